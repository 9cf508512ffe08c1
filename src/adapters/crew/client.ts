// HTTP client for one deployed crew (docs/spec/crew-execution-service.md and docs/spec/crew-api-field-notes.md).
// Transport and error mapping only; wire shapes are read by ./parse.ts.
import { setTimeout as sleep } from "node:timers/promises";
import { Agent, type Dispatcher, request } from "undici";
import { CrewError, type CrewErrorKind, type CrewOperation, isCrewError } from "../../protocols/crew/errors.js";
import { parseErrorBody, parseInputs, parseKickoff, parseResume, parseStatus } from "../../protocols/crew/parse.js";
import type { CrewApi, CrewInput, ExecutionStatus, KickoffRequest, ResumeRequest, ResumeResult, StopResult } from "../../protocols/crew/types.js";
import { MAX_ANSWER_BYTES, readBoundedText } from "../../text/bounded-body.js";
import { parseBoundedJson } from "../../text/bounded-json.js";
import { redactEchoes, sentSecrets } from "../../text/echoes.js";
import { readableError } from "../../text/readable-error.js";
import { sanitizeJson } from "../../text/sanitize.js";

export interface CrewClientOptions {
  name: string;
  baseUrl: string;
  /** Organization token: kickoff and resume, and reads when no userToken is set. */
  token: string;
  /** User-scoped token, used for the read-only calls (inputs, status) when set. */
  userToken?: string;
  connectTimeoutMs?: number;
  readTimeoutMs?: number;
  retry?: { attempts: number; baseDelayMs: number };
  /** Shared dispatcher; the client then neither configures nor closes it. */
  dispatcher?: Dispatcher;
}

type Method = "GET" | "POST";

interface Call {
  op: CrewOperation;
  method: Method;
  path: string[];
  token: string;
  body?: unknown;
}

interface Reply {
  statusCode: number;
  text: string;
  /** The answer went past MAX_ANSWER_BYTES: nothing of it was kept. */
  tooLarge?: boolean;
}

/** Status path forms: the spec's, and the one deployed services use. */
type StatusForm = "spec" | "deployed";

const RETRY_AFTER_CAP_MS = 10_000;
const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
const DEFAULT_READ_TIMEOUT_MS = 15_000;
const DEFAULT_ATTEMPTS = 3;
/**
 * The longest a POST (a kickoff, a decision's /resume) can take with the default settings: every
 * attempt's connect, headers and body time-outs, the waits between them, and /resume's one re-send
 * in camelCase after a 422. A decision under way is not taken over as abandoned before this is over
 * (src/root/use-cases.ts): its answer may still come, and a second decision would reach the crew.
 */
export const CREW_POST_LONGEST_MS = 2 * (DEFAULT_ATTEMPTS * (DEFAULT_CONNECT_TIMEOUT_MS + 2 * DEFAULT_READ_TIMEOUT_MS) + (DEFAULT_ATTEMPTS - 1) * RETRY_AFTER_CAP_MS);
/**
 * The longest a status GET can take with the default settings: every attempt's connect, headers and
 * body time-outs and the waits between them. A poll's lease outlasts it (src/root/use-cases.ts), so another replica
 * does not poll the run again while a crew slow to answer is still being asked.
 */
export const CREW_GET_LONGEST_MS = DEFAULT_ATTEMPTS * (DEFAULT_CONNECT_TIMEOUT_MS + 2 * DEFAULT_READ_TIMEOUT_MS) + (DEFAULT_ATTEMPTS - 1) * RETRY_AFTER_CAP_MS;
const COLD_START_STATUSES = new Set([502, 503, 504]);
const TIMEOUT_CODES = new Set(["UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);
/** Failures where the request certainly never reached the crew. */
const NOT_SENT_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT", "ENETUNREACH", "EHOSTUNREACH"]);

export class CrewClient implements CrewApi {
  readonly name: string;
  private readonly base: URL;
  private readonly token: string;
  private readonly readToken: string;
  private readonly readTimeoutMs: number;
  private readonly retry: { attempts: number; baseDelayMs: number };
  private readonly dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  // Deployed services answer /status/{id}; the spec's form is the fallback (field notes).
  private statusForm: StatusForm = "deployed";

  constructor(opts: CrewClientOptions) {
    this.name = opts.name;
    this.base = parseBaseUrl(opts.name, opts.baseUrl);
    this.token = checkToken(opts.name, opts.token);
    this.readToken = opts.userToken ? checkToken(opts.name, opts.userToken) : this.token;
    this.readTimeoutMs = opts.readTimeoutMs ?? DEFAULT_READ_TIMEOUT_MS;
    this.retry = opts.retry ?? { attempts: DEFAULT_ATTEMPTS, baseDelayMs: 300 };
    this.ownsDispatcher = opts.dispatcher === undefined;
    this.dispatcher =
      opts.dispatcher ??
      new Agent({
        connect: { timeout: opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS },
        headersTimeout: this.readTimeoutMs,
        bodyTimeout: this.readTimeoutMs,
      });
  }

  async listInputs(): Promise<CrewInput[]> {
    const reply = await this.send({ op: "inputs", method: "GET", path: ["inputs"], token: this.readToken });
    return parseInputs(this.json("inputs", reply), this.name);
  }

  async kickoff(req: KickoffRequest): Promise<{ kickoffId: string }> {
    const body = withoutUndefined({
      inputs: req.inputs,
      meta: req.meta,
      taskWebhookUrl: req.taskWebhookUrl,
      stepWebhookUrl: req.stepWebhookUrl,
      crewWebhookUrl: req.crewWebhookUrl,
      humanInputWebhook: req.humanInputWebhook,
      webhooks: req.webhooks,
    });
    const reply = await this.send({ op: "kickoff", method: "POST", path: ["kickoff"], token: this.token, body });
    try {
      return parseKickoff(this.json("kickoff", reply), this.name);
    } catch (e) {
      // A 2xx in JSON (or too large to read): the crew took the kickoff. An id Crewline cannot read (none,
      // an unusable one) loses the kickoff id, not the run: its first callback names it (Runs.adopt). A
      // readable answer that is not JSON (a login or proxy page) is not the crew's: nothing started.
      if (!isCrewError(e) || (!reply.tooLarge && !looksLikeJson(reply.text))) throw e;
      throw new CrewError({ kind: "invalid_response", crewName: this.name, operation: "kickoff", status: reply.statusCode, detail: e.detail, maybeApplied: true, cause: e });
    }
  }

  async status(kickoffId: string): Promise<ExecutionStatus> {
    const first = this.statusForm;
    const second: StatusForm = first === "spec" ? "deployed" : "spec";
    let firstMiss: CrewError | undefined;
    for (const form of [first, second]) {
      try {
        const reply = await this.send({ op: "status", method: "GET", path: statusPath(form, kickoffId), token: this.readToken });
        this.statusForm = form;
        return parseStatus(this.json("status", reply), this.name);
      } catch (e) {
        if (!isCrewError(e) || e.kind !== "not_found") throw e;
        firstMiss ??= e;
      }
    }
    throw firstMiss;
  }

  async resume(req: ResumeRequest): Promise<ResumeResult> {
    const hooks = {
      taskWebhookUrl: req.taskWebhookUrl,
      stepWebhookUrl: req.stepWebhookUrl,
      crewWebhookUrl: req.crewWebhookUrl,
      humanInputWebhook: req.humanInputWebhook,
      webhooks: req.webhooks,
    };
    const body = withoutUndefined({ execution_id: req.executionId, task_id: req.taskId, human_feedback: req.humanFeedback, is_approve: req.isApprove, ...hooks });
    let reply: Reply;
    try {
      reply = await this.send({ op: "resume", method: "POST", path: ["resume"], token: this.token, body });
    } catch (e) {
      // A guide shows a camelCase body; after a 422 that names those fields, try that form once.
      // Never after a time-out or a 400: the first call may have been taken (field notes).
      if (!isCrewError(e) || e.status !== 422 || !namesCamelCaseResumeFields(e)) throw e;
      const camel = withoutUndefined({
        executionId: req.executionId,
        taskId: req.taskId,
        humanFeedback: req.humanFeedback,
        isApprove: req.isApprove,
        ...hooks,
        humanInputWebhookUrl: req.humanInputWebhook?.url,
      });
      reply = await this.send({ op: "resume", method: "POST", path: ["resume"], token: this.token, body: camel });
    }
    // The resume took effect once we have a 2xx; an odd body must not turn it into a failure.
    return parseResume(tryJson(reply.text));
  }

  /**
   * POST /stop/{kickoff_id}: any 2xx is "stopped" (its body is not published); 404 and 405 mean the
   * deployment has no /stop, but a 404 naming the execution that the crew has no such run (ended); 409, or a 400 naming a finished state, that the run had already ended.
   * Other failures throw (another 400 is a refusal, in the crew's words).
   */
  async stop(kickoffId: string): Promise<StopResult> {
    try {
      await this.send({ op: "stop", method: "POST", path: ["stop", kickoffId], token: this.token, body: {} });
      return { outcome: "stopped" };
    } catch (e) {
      if (!isCrewError(e) || e.status === undefined) throw e;
      // A 404 naming the execution is the crew's "no such run" (field notes), not a deployment without /stop.
      if (e.status === 404 && namesMissingExecution(e.serviceMessage)) return { outcome: "ended", ...(e.serviceMessage ? { message: e.serviceMessage } : {}) };
      if (e.status === 404 || e.status === 405) return { outcome: "not_supported", status: e.status };
      if (e.status === 409 || (e.status === 400 && namesFinishedState(e.serviceMessage))) return { outcome: "ended", ...(e.serviceMessage ? { message: e.serviceMessage } : {}) };
      throw e;
    }
  }

  /** Closes the client's own connection pool; a dispatcher passed in is left to its owner. */
  async close(): Promise<void> {
    if (this.ownsDispatcher) await this.dispatcher.close();
  }

  private async send(call: Call): Promise<Reply> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once(call);
      } catch (e) {
        if (!isCrewError(e) || attempt >= this.retry.attempts || !mayRetry(call.method, e)) throw e;
        await sleep(this.backoffMs(attempt, e));
      }
    }
  }

  private async once(call: Call): Promise<Reply> {
    let res: Dispatcher.ResponseData;
    let text: string;
    let tooLarge: boolean;
    try {
      res = await request(joinUrl(this.base, call.path), {
        dispatcher: this.dispatcher,
        method: call.method,
        headers: headersFor(call),
        body: call.body === undefined ? undefined : JSON.stringify(call.body),
        headersTimeout: this.readTimeoutMs,
        bodyTimeout: this.readTimeoutMs,
      });
      // Bounded: an endless or huge answer is cut off, and read as one Crewline cannot use.
      const declared = Number(res.headers["content-length"] ?? 0);
      const read = declared > MAX_ANSWER_BYTES ? undefined : await readBoundedText(res.body);
      if (read === undefined) res.body.destroy();
      text = read ?? "";
      tooLarge = read === undefined;
    } catch (e) {
      throw this.networkError(call, e);
    }
    if (res.statusCode >= 200 && res.statusCode < 300) return { statusCode: res.statusCode, text, tooLarge };
    throw this.httpError(call, res.statusCode, res.headers["retry-after"], text);
  }

  private networkError(call: Call, cause: unknown): CrewError {
    const code = errorCode(cause);
    const kind: CrewErrorKind = code !== undefined && TIMEOUT_CODES.has(code) ? "timeout" : "unreachable";
    const notSent = code !== undefined && NOT_SENT_CODES.has(code);
    return new CrewError({
      kind,
      crewName: this.name,
      operation: call.op,
      cause,
      ...(call.method === "POST" ? { maybeApplied: !notSent } : {}),
    });
  }

  private httpError(call: Call, status: number, retryAfter: string | string[] | undefined, text: string): CrewError {
    const { serviceMessage, missingInputs, invalidInputs } = parseErrorBody(tryJson(text) ?? text);
    const kind = kindForStatus(status);
    // Made readable first: redactEchoes reads only the text's start, and a traceback ends with its reason.
    const secrets = [this.token, this.readToken, ...sentSecrets(call.body)];
    const shown = (message: string) => redactEchoes(readableError(message), secrets);
    return new CrewError({
      kind,
      crewName: this.name,
      operation: call.op,
      status,
      serviceMessage: serviceMessage === undefined ? undefined : shown(serviceMessage),
      missingInputs: kind === "missing_inputs" ? (missingInputs ?? []) : undefined,
      invalidInputs: invalidInputs?.map((i) => ({ name: i.name, message: shown(i.message) })),
      retryAfterSeconds: kind === "server" ? parseRetryAfter(retryAfter) : undefined,
      // A gateway that stopped waiting: the service may have taken the kickoff or the decision.
      ...(call.method === "POST" && status === 504 ? { maybeApplied: true } : {}),
    });
  }

  private json(op: CrewOperation, reply: Reply): unknown {
    const body = tryJson(reply.text);
    if (body === undefined) {
      const detail = reply.tooLarge ? `answer larger than ${MAX_ANSWER_BYTES} bytes` : "answer is not JSON";
      throw new CrewError({ kind: "invalid_response", crewName: this.name, operation: op, status: reply.statusCode, detail });
    }
    return body;
  }

  private backoffMs(attempt: number, e: CrewError): number {
    if (e.retryAfterSeconds !== undefined) return Math.min(e.retryAfterSeconds * 1000, RETRY_AFTER_CAP_MS);
    const exp = this.retry.baseDelayMs * 2 ** (attempt - 1);
    return Math.min(exp * (1 + Math.random() / 2), RETRY_AFTER_CAP_MS);
  }
}

/**
 * GETs are safe to repeat. A POST is repeated only when it certainly never arrived
 * (connection refused) or the service said it is not ready (502/503): after a read time-out,
 * a reset or a 504 (a gateway that stopped waiting for the service), the kickoff or resume may
 * already have taken effect.
 */
function mayRetry(method: Method, e: CrewError): boolean {
  const status = e.kind === "server" ? e.status : undefined;
  if (status !== undefined && COLD_START_STATUSES.has(status)) return method === "GET" || status !== 504;
  if (method === "GET") return e.kind === "unreachable" || e.kind === "timeout";
  return errorCode(e.cause) === "ECONNREFUSED";
}

/** Whether a 404's words are about the execution ("Execution ID not found", "No execution found with ID: …"). */
function namesMissingExecution(message: string | undefined): boolean {
  const text = message?.toLowerCase() ?? "";
  return text.includes("execution") && (text.includes("not found") || text.includes("no execution"));
}

/** Words by which a 400 from /stop says the run had ended (field notes); "failed" alone is too often a refusal's word. */
const FINISHED_WORDS = new Set(["ended", "finished", "completed", "stopped", "cancelled", "canceled", "revoked", "terminated", "succeeded"]);
/** "not running", "no longer running", "isn't running", "not active". */
const NEGATIONS = new Set(["not", "longer", "t"]);
const RUNNING_WORDS = new Set(["running", "active"]);
const REFUSAL_WORDS = new Set(["cannot", "can", "unable", "until", "while", "before", "unless"]);

/** Whether a /stop refusal's words name a finished state. Split into words, not matched by pattern: the text is the crew's. */
function namesFinishedState(message: string | undefined): boolean {
  if (!message) return false;
  const words = message.toLowerCase().split(/[^a-z]+/);
  // "cannot be stopped while…", "not allowed until … has completed": a refusal that names a state, not an end.
  if (words.some((word, i) => REFUSAL_WORDS.has(word) || (word === "not" && words[i + 1] === "allowed"))) return false;
  return words.some((word, i) => FINISHED_WORDS.has(word) || (word === "failed" && words[i - 1] === "already") || (NEGATIONS.has(word) && RUNNING_WORDS.has(words[i + 1] ?? "")));
}

function kindForStatus(status: number): CrewErrorKind {
  if (status === 401 || status === 403) return "unauthorized";
  if (status === 404) return "not_found";
  if (status === 422) return "missing_inputs";
  if (status === 429 || status >= 500) return "server";
  if (status >= 400) return "bad_request";
  return "invalid_response";
}

function headersFor(call: Call): Record<string, string> {
  return {
    authorization: `Bearer ${call.token}`,
    accept: "application/json",
    "user-agent": "Crewline",
    ...(call.body === undefined ? {} : { "content-type": "application/json" }),
  };
}

function statusPath(form: StatusForm, kickoffId: string): string[] {
  return form === "spec" ? [kickoffId, "status"] : ["status", kickoffId];
}

/** Keeps any path prefix of the base (e.g. https://x.example/crews/abc/) and escapes each segment. */
export function joinUrl(base: URL, segments: string[]): string {
  const url = new URL(base.href);
  url.pathname = `${base.pathname.replace(/\/+$/, "")}/${segments.map(encodeURIComponent).join("/")}`;
  return url.href;
}

/** Node puts the code on the error; happy-eyeballs connects wrap several in an AggregateError. */
function errorCode(e: unknown): string | undefined {
  if (typeof e !== "object" || e === null) return undefined;
  const { code, errors, cause } = e as { code?: unknown; errors?: unknown; cause?: unknown };
  if (typeof code === "string") return code;
  if (Array.isArray(errors) && errors.length) return errorCode(errors[0]);
  return cause === undefined ? undefined : errorCode(cause);
}

export function parseRetryAfter(header: string | string[] | undefined): number | undefined {
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** Crew answers are outside input: bounded before parsing, and stored text PostgreSQL can hold. */
function tryJson(text: string): unknown {
  if (text.trim() === "") return undefined;
  try {
    return sanitizeJson(parseBoundedJson(text));
  } catch {
    return undefined;
  }
}

function withoutUndefined<T extends Record<string, unknown>>(obj: T): Partial<T> {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined)) as Partial<T>;
}

// Errors from here must not echo the URL or token: either may carry secrets.
function parseBaseUrl(name: string, raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`Crew "${name}": the base URL is not a valid URL`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new Error(`Crew "${name}": the base URL must start with http:// or https://`);
  }
  return url;
}

function checkToken(name: string, token: string): string {
  if (!token || /[\s\x00-\x1f\x7f]/.test(token)) {
    throw new Error(`Crew "${name}": the token is empty or contains spaces or control characters`);
  }
  return token;
}

/** A 422 that asks for the camelCase resume fields a guide shows (executionId, taskId, humanFeedback). */
export function namesCamelCaseResumeFields(e: CrewError): boolean {
  const said = [e.serviceMessage ?? "", ...(e.missingInputs ?? [])].join(" ");
  return /\b(executionId|taskId|humanFeedback)\b/.test(said);
}

/** Whether an answer is JSON at all (its first character opens an object or an array). */
function looksLikeJson(text: string): boolean {
  const first = text.trimStart()[0];
  return first === "{" || first === "[";
}
