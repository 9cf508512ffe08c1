// The local flow deployment (`npm run crew:sim` with SIM_FLOW_TARGET_URL): sends signed human feedback
// requests the way the platform does (docs/spec/crew-api-field-notes.md, last section) and serves their
// callback URLs, recording every answer and refusing late (410) or repeated (409) ones.
import crypto from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { signFlowBody } from "../protocols/flows/signature.js";

export interface SimFlowOptions {
  port?: number;
  host?: string;
  /** The webhook signing secret (as shown in the flow's dashboard). */
  secret: string;
  /** Where requests are sent (Crewline's PUBLIC_URL + /hooks/flows/<name>). */
  targetUrl?: string;
  /** Answers arriving later than this after the request are refused with 410 (0: never). */
  answerWindowMs?: number;
  deploymentName?: string;
  /** Called for every callback call (accepted or refused). */
  onCall?: (call: SimFlowCall) => void;
}

export interface SimFlowRequestOverrides {
  id?: string;
  method_name?: string;
  message?: string;
  output?: string;
  /** undefined: ["approved", "rejected"]; null: the field is absent. */
  emit?: string[] | null;
  assigned_to_email?: string;
  event_type?: string;
  [k: string]: unknown;
}

export interface SendOptions {
  /** Sign with another secret (a forgery). */
  secret?: string;
  /** Unix seconds to sign with (a stale request). */
  timestamp?: number;
  /** Leave the signature headers out. */
  unsigned?: boolean;
  /** Send exactly this body (already serialised). */
  rawBody?: string;
  url?: string;
  /** Where the request's callback URL points instead of this service (a proxy in front of it). */
  callbackOrigin?: string;
}

export interface SimFlowCall {
  requestId: string;
  status: number;
  body: unknown;
  at: number;
}

export interface SimFlowAnswer {
  requestId: string;
  feedback: string;
  source: string;
  at: number;
}

export interface SimFlowService {
  url: string;
  /** Every POST to a callback URL, with the status it was answered. */
  calls: SimFlowCall[];
  /** Answers that were accepted (at most one per request). */
  answers: SimFlowAnswer[];
  /** Sends one signed request; resolves with the HTTP answer and the body sent. */
  send(overrides?: SimFlowRequestOverrides, opts?: SendOptions): Promise<{ status: number; text: string; body: Record<string, unknown> }>;
  /** The next `times` callback calls answer this status (e.g. 503, 409) without recording an answer. */
  failNext(status: number, body?: Record<string, unknown>, times?: number): void;
  /** Marks a request as answered elsewhere (a timeout auto-response, an e-mail reply). */
  answerElsewhere(requestId: string): void;
  close(): Promise<void>;
}

interface Issued {
  token: string;
  createdAt: number;
  answered: boolean;
}

export async function startFlowService(opts: SimFlowOptions): Promise<SimFlowService> {
  const issued = new Map<string, Issued>();
  const calls: SimFlowCall[] = [];
  const answers: SimFlowAnswer[] = [];
  const faults: { status: number; body: Record<string, unknown> }[] = [];
  let url = "";

  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const parsedUrl = new URL(req.url ?? "/", "http://sim");
      const m = /^\/human_feedback_requests\/([^/]+)\/respond$/.exec(parsedUrl.pathname);
      if (req.method !== "POST" || !m) return json(res, 404, { error: "Not Found" });
      const requestId = decodeURIComponent(m[1]!);
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        body = undefined;
      }
      const answer = (status: number, out: Record<string, unknown>) => {
        const call = { requestId, status, body, at: Date.now() };
        calls.push(call);
        opts.onCall?.(call);
        json(res, status, out);
      };
      const fault = faults.shift();
      if (fault) return answer(fault.status, fault.body);
      const entry = issued.get(requestId);
      if (!entry) return answer(404, { error: "Not Found", message: "Human feedback request not found" });
      if (parsedUrl.searchParams.get("token") !== entry.token) return answer(401, { error: "Unauthorized", message: "Invalid response token" });
      const b = body as { feedback?: unknown; source?: unknown } | undefined;
      if (!b || typeof b.feedback !== "string") return answer(422, { error: "Unprocessable Entity", message: "feedback is required" });
      if (entry.answered) return answer(409, { error: "Conflict", message: "Feedback was already provided for this request" });
      if (opts.answerWindowMs && Date.now() - entry.createdAt > opts.answerWindowMs) return answer(410, { error: "Gone", message: "This request has expired" });
      entry.answered = true;
      answers.push({ requestId, feedback: b.feedback, source: String(b.source ?? ""), at: Date.now() });
      answer(200, { status: "received", message: "Feedback received" });
    });
  });
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, opts.host ?? "127.0.0.1", resolve));
  const address = server.address() as AddressInfo;
  url = `http://${opts.host ?? "127.0.0.1"}:${address.port}`;

  return {
    url,
    calls,
    answers,
    async send(overrides = {}, sendOpts = {}) {
      const id = overrides.id ?? crypto.randomUUID();
      const token = crypto.randomBytes(16).toString("hex");
      if (!issued.has(id)) issued.set(id, { token, createdAt: Date.now(), answered: false });
      const { emit, ...rest } = overrides;
      const body: Record<string, unknown> = {
        event_type: "new_request",
        id,
        status: "pending",
        flow_id: "flow-sim",
        method_name: "review_article",
        message: "Please review this article",
        output: "# Draft\n\nThe article to review.",
        ...(emit === null ? {} : { emit: emit ?? ["approved", "rejected"] }),
        state: {},
        metadata: {},
        created_at: new Date().toISOString(),
        callback_url: `${sendOpts.callbackOrigin ?? url}/human_feedback_requests/${encodeURIComponent(id)}/respond?token=${issued.get(id)!.token}`,
        response_token: issued.get(id)!.token,
        deployment_id: 456,
        deployment_name: opts.deploymentName ?? "sim-flow",
        organization_id: 789,
        ...rest,
      };
      const raw = sendOpts.rawBody ?? JSON.stringify(body);
      const timestamp = sendOpts.timestamp ?? Math.floor(Date.now() / 1000);
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (!sendOpts.unsigned) {
        headers["x-crewai-timestamp"] = String(timestamp);
        headers["x-crewai-signature"] = signFlowBody(sendOpts.secret ?? opts.secret, timestamp, raw);
      }
      const target = sendOpts.url ?? opts.targetUrl;
      if (!target) throw new Error("no target URL to send the flow request to");
      const res = await fetch(target, { method: "POST", headers, body: raw, signal: AbortSignal.timeout(30_000) });
      return { status: res.status, text: await res.text(), body };
    },
    failNext(status, body = { error: "Service Unavailable" }, times = 1) {
      for (let i = 0; i < times; i++) faults.push({ status, body });
    },
    answerElsewhere(requestId) {
      const entry = issued.get(requestId);
      if (entry) entry.answered = true;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export const FLOW_SIM_HELP = `Flow deployment (optional; on when SIM_FLOW_TARGET_URL is set):
  SIM_FLOW_TARGET_URL        Crewline's flow webhook URL, e.g. http://localhost:3000/hooks/flows/flow
  SIM_FLOW_SECRET            webhook signing secret (default "sim-flow-secret"; Crewline's FLOW_WEBHOOK_SECRET)
  SIM_FLOW_PORT              port of the callback server (default 8788; 0 = random)
  SIM_FLOW_REQUESTS          feedback requests sent at start (default 1); press Enter to send another
  SIM_FLOW_EMIT              comma-separated outcomes (default approved,rejected); "none" = free-text feedback only
  SIM_FLOW_ASSIGNEE          assigned_to_email of the requests (default none)
  SIM_FLOW_ANSWER_WINDOW_MS  answers later than this are refused with 410 (default 0 = never); repeats get 409`;

/** Starts the flow deployment from SIM_FLOW_* when SIM_FLOW_TARGET_URL is set (npm run crew:sim). */
export async function startFlowSimFromEnv(env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<SimFlowService | undefined> {
  const targetUrl = env.SIM_FLOW_TARGET_URL?.trim();
  if (!targetUrl) return undefined;
  if (!/^https?:\/\//i.test(targetUrl)) throw new Error("SIM_FLOW_TARGET_URL must be an http(s) URL");
  const int = (name: string, fallback: number) => {
    const raw = env[name]?.trim();
    if (!raw) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be an integer >= 0 (got "${raw}")`);
    return n;
  };
  const emitRaw = env.SIM_FLOW_EMIT?.trim() ?? "approved,rejected";
  const emit =
    emitRaw.toLowerCase() === "none"
      ? null
      : emitRaw
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean);
  const service = await startFlowService({
    secret: env.SIM_FLOW_SECRET?.trim() || "sim-flow-secret",
    targetUrl,
    port: int("SIM_FLOW_PORT", 8788),
    host: env.SIM_HOST?.trim() || "127.0.0.1",
    answerWindowMs: int("SIM_FLOW_ANSWER_WINDOW_MS", 0),
    onCall: (call) =>
      log(`flow: answer to ${call.requestId} → ${call.status}${call.status === 200 ? `: ${JSON.stringify((call.body as { feedback?: string })?.feedback ?? "")}` : ""}`),
  });
  const assignee = env.SIM_FLOW_ASSIGNEE?.trim();
  let n = 0;
  const sendOne = async () => {
    n++;
    try {
      const res = await service.send({
        emit,
        method_name: "review_article",
        message: `Please review article #${n}`,
        output: `# Article ${n}\n\nA short draft the flow wants a human to check.\n\n- point one\n- point two`,
        ...(assignee ? { assigned_to_email: assignee } : {}),
      });
      log(`flow: request ${String(res.body.id)} sent → Crewline answered ${res.status}`);
    } catch (err) {
      log(`flow: could not reach ${targetUrl}: ${(err as Error).message}`);
    }
  };
  log(`Flow simulator: callbacks on ${service.url}; sending to ${targetUrl}; outcomes: ${emit ? emit.join(", ") : "none (free text)"}`);
  for (let i = 0; i < int("SIM_FLOW_REQUESTS", 1); i++) await sendOne();
  if (process.stdin.isTTY) {
    process.stdin.on("data", () => void sendOne());
    process.stdin.unref?.();
  }
  return service;
}
