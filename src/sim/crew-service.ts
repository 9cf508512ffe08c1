// Local crew execution service: an independent HTTP implementation of the
// interface in docs/spec/crew-execution-service.md, speaking the shapes that
// real deployments send (docs/spec/crew-api-field-notes.md).
//
// Used by the test suite (over real HTTP) and by newcomers who want to try the
// bot without a deployed crew (`npm run crew:sim`). It deliberately imports
// nothing from the bot: it must not share the client's assumptions.

import { randomUUID } from "node:crypto";
import { setMaxListeners } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";

// ---------------------------------------------------------------------------
// Public types

export interface SimTaskContext {
  inputs: Record<string, string>;
  /** 1 for the first attempt, +1 for every rejection of this task. */
  round: number;
  /** Every non-empty human_feedback given so far in this execution, oldest first. */
  feedback: string[];
}

export interface SimTask {
  id: string;
  name: string;
  agent: string;
  /** The run pauses (state PAUSED) after this task until POST /resume. */
  humanInput?: boolean;
  /** Time the task takes, default 50 ms. Step webhooks are spread across it. */
  delayMs?: number;
  output?: string | ((ctx: SimTaskContext) => string);
  /** Step webhooks emitted while the task runs, default 2. */
  steps?: number;
  /** Sent in the task webhook; generated from the name when absent. */
  description?: string;
  expectedOutput?: string;
}

/** "stop": POST /stop/{kickoff_id}; script a 404 or 405 for it (failWith) to act like a deployment without it. */
export type SimEndpoint = "inputs" | "kickoff" | "status" | "resume" | "stop";

export interface SimFailure {
  endpoint: SimEndpoint;
  status: number;
  /** How many requests get this answer; default: forever. */
  times?: number;
  /** JSON body (a string is sent as text/plain); default {"error","message"}. */
  body?: unknown;
  /** Extra response headers, e.g. {"retry-after": "1"}. */
  headers?: Record<string, string>;
  /** The request is carried out first and only its answer is this failure (a gateway's 504 after the crew took it). */
  afterHandling?: boolean;
}

export interface SimCrewOptions {
  /** 0 = random; default 0. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Organization bearer token (full access). */
  token: string;
  /** User-scoped token: may call GET /inputs and status only (401 elsewhere). */
  userToken?: string;
  /** Declared inputs, default ["topic"]. */
  inputs?: string[];
  /** Which GET /inputs variant to answer (default names). */
  inputsShape?: "names" | "objects" | "map";
  /** Default: research (humanInput) then write (humanInput). */
  tasks?: SimTask[];
  /** spec: GET /{id}/status ; legacy: GET /status/{id}; default both. */
  statusPath?: "spec" | "legacy" | "both";
  /** Delay before answering GET /inputs. */
  inputsDelayMs?: number;
  /** Delay before answering POST /kickoff (a crew slow to start). */
  kickoffDelayMs?: number;
  /** Scripted errors, answered before normal handling (before the token check). */
  failWith?: SimFailure[];
  /** The run fails once `afterTask` tasks are done (0 = before the first task). */
  failRun?: { afterTask: number; error: string };
  /** Default 5000. */
  webhookTimeoutMs?: number;
  /**
   * "deployed" (default) behaves like real deployments (field notes): task webhooks carry no task_id,
   * a paused task is also announced on the human-input webhook (with the authentication it was given),
   * and status says PENDING_HUMAN_INPUT / "Pending Human Input" while paused. "seed" keeps the seed
   * interface's behaviour: task_id in the task webhook, no human-input webhook, state PAUSED.
   */
  mode?: "deployed" | "seed";
  /**
   * The event stream, sent whenever a kickoff or resume asks for it (`webhooks`): `only` sends nothing
   * else (no step, task, crew or human-input callbacks); `chaos` shuffles each batch and repeats an event.
   */
  eventStream?: { only?: boolean; chaos?: boolean };
  /** The callback (or event) saying the run has ended is sent this long after status says so (a status running ahead of it). */
  endCallbackLagMs?: number;
}

export interface SimRequestLog {
  method: string;
  path: string;
  headers: Record<string, string | undefined>;
  /** Parsed JSON when the body is JSON, the raw text otherwise, undefined when empty. */
  body: unknown;
  at: number;
}

/** STOPPED: POST /stop ended the run; it sends no more webhooks. */
export type SimState = "PENDING" | "RUNNING" | "PAUSED" | "SUCCESS" | "FAILED" | "STOPPED";

export interface SimWebhookDelivery {
  url: string;
  kind: "step" | "task" | "crew" | "input" | "events";
  body: unknown;
  /** When the request was sent (ms since the epoch). */
  sentAt: number;
  status?: number;
  error?: string;
}

export interface SimLastTask {
  task_id: string;
  name: string;
  agent: string;
  output: string;
}

export interface SimExecution {
  id: string;
  inputs: Record<string, string>;
  meta?: Record<string, unknown>;
  /** Current callback URLs: replaced wholesale by every resume. */
  webhooks: { task?: string; step?: string; crew?: string; input?: string; inputAuth?: string; events?: string; eventsAuth?: string; eventTypes?: string[] };
  /** Snapshot of the task list taken at kickoff. */
  tasks: SimTask[];
  state: SimState;
  /** Index of the task running / paused / next to run. */
  taskIndex: number;
  /** Round per task id (absent = 1). */
  rounds: Record<string, number>;
  feedback: string[];
  /** Latest output per task id. */
  outputs: Record<string, string>;
  pausedTaskId?: string;
  lastExecutedTask: SimLastTask | null;
  result: string;
  error?: string;
  tokenUsage: number;
  createdAt: number;
  updatedAt: number;
}

export interface SimCrewService {
  /** Base URL, e.g. http://127.0.0.1:PORT */
  url: string;
  /** Every request received (for test assertions). */
  requests: SimRequestLog[];
  webhookDeliveries: SimWebhookDelivery[];
  executions: Map<string, SimExecution>;
  /** Resolves once pred() is true (polled every 10 ms); rejects after timeoutMs (default 5000). */
  waitFor(pred: () => boolean, timeoutMs?: number): Promise<void>;
  /** Change behaviour at run time. Task changes apply to later kickoffs. */
  setOptions(patch: Partial<SimCrewOptions>): void;
  /** True while a run is working through its tasks or its webhooks are being sent (tests wait for it to end). */
  readonly busy: boolean;
  /** Webhooks queued or being sent (a run working on a long task sends none while it works). */
  readonly delivering: number;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------
// Defaults

const DEFAULT_TASK_DELAY_MS = 50;
const DEFAULT_STEPS = 2;
const DEFAULT_WEBHOOK_TIMEOUT_MS = 5000;
const MAX_BODY_BYTES = 1024 * 1024;

export function defaultSimTasks(): SimTask[] {
  return [
    { id: "task-research", name: "research_task", agent: "Senior Research Analyst", humanInput: true },
    { id: "task-write", name: "writing_task", agent: "Content Writer", humanInput: true },
  ];
}

function describeTask(task: SimTask): { description: string; expected_output: string } {
  const words =
    task.name
      .replace(/_task$/, "")
      .replace(/[_-]+/g, " ")
      .trim() || task.name;
  return {
    description: task.description ?? `Carry out the ${words} step for the given inputs.`,
    expected_output: task.expectedOutput ?? `A Markdown document with the ${words} results.`,
  };
}

/** Realistic multi-line Markdown built from the inputs, the round and the feedback. */
export function defaultTaskOutput(task: SimTask, ctx: SimTaskContext): string {
  const entries = Object.entries(ctx.inputs);
  const subject = ctx.inputs["topic"] ?? entries[0]?.[1] ?? "the requested subject";
  const audience = ctx.inputs["audience"];
  const lines: string[] = [];
  const isResearch = /research|analy/i.test(task.name + " " + task.agent);
  lines.push(isResearch ? `# Research brief: ${subject}` : `# ${capitalise(task.name.replace(/_task$/, "").replace(/[_-]+/g, " "))}: ${subject}`);
  lines.push("");
  lines.push(`_Prepared by ${task.agent} · round ${ctx.round}_`);
  lines.push("");
  if (entries.length > 0) {
    lines.push("**Inputs**");
    for (const [k, v] of entries) lines.push(`- ${k}: ${v}`);
    lines.push("");
  }
  if (isResearch) {
    lines.push("## Key findings");
    lines.push(`1. Interest in ${subject} has grown steadily over the last two years.`);
    lines.push(`2. Most practitioners cite tooling maturity as the main obstacle.`);
    lines.push(`3. Early adopters report measurable time savings within a quarter.`);
    lines.push("");
    lines.push("## Sources to check");
    lines.push("- Industry survey (2024), section 3");
    lines.push("- Two practitioner interviews (notes attached)");
  } else {
    lines.push("## Draft");
    lines.push(
      `${capitalise(subject)} is no longer a niche concern${audience ? ` for ${audience}` : ""}. ` + "The evidence gathered so far points to steady adoption and concrete gains.",
    );
    lines.push("");
    lines.push("- **Why it matters:** teams ship faster with fewer hand-offs.");
    lines.push("- **What to watch:** tooling maturity and cost control.");
    lines.push("- **Next step:** start with one small, well-measured pilot.");
  }
  if (ctx.round >= 2) {
    const latest = ctx.feedback[ctx.feedback.length - 1];
    lines.push("");
    lines.push(`## Revision (round ${ctx.round})`);
    lines.push(latest ? `Addressed reviewer feedback: "${latest}"` : "Revised after the reviewer asked for changes.");
  } else if (ctx.feedback.length > 0) {
    lines.push("");
    lines.push("## Reviewer notes taken into account");
    for (const f of ctx.feedback) lines.push(`- ${f}`);
  }
  return lines.join("\n");
}

function capitalise(s: string): string {
  return s.length > 0 ? s[0]!.toUpperCase() + s.slice(1) : s;
}

// ---------------------------------------------------------------------------
// Implementation

interface ExecInternals {
  /** Delivery chain: every webhook of one execution is sent after the previous one. */
  chain: Promise<void>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`HTTP ${status}`);
  }
}

type Route =
  | { endpoint: "health" }
  | { endpoint: "inputs" }
  | { endpoint: "kickoff" }
  | { endpoint: "resume" }
  | { endpoint: "stop"; id: string }
  | { endpoint: "status"; id: string }
  | { endpoint: "notfound" }
  | { endpoint: "method"; allow: string };

export async function startCrewService(initial: SimCrewOptions): Promise<SimCrewService> {
  if (!initial || typeof initial.token !== "string" || initial.token.length === 0) {
    throw new Error("startCrewService: a non-empty token is required");
  }
  let opts: SimCrewOptions = { ...initial };
  let failures = armFailures(opts.failWith);

  const requests: SimRequestLog[] = [];
  const webhookDeliveries: SimWebhookDelivery[] = [];
  const executions = new Map<string, SimExecution>();
  const internals = new Map<string, ExecInternals>();
  const runs = new Set<Promise<void>>();
  let delivering = 0;
  const closing = new AbortController();
  setMaxListeners(0, closing.signal); // one listener per pending sleep / webhook
  let closed = false;

  // ---- helpers --------------------------------------------------------------

  const sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      if (closing.signal.aborted || ms <= 0) return resolve();
      const done = () => {
        clearTimeout(timer);
        closing.signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      closing.signal.addEventListener("abort", done, { once: true });
    });

  const track = (p: Promise<void>) => {
    const wrapped = p.catch(() => undefined);
    runs.add(wrapped);
    void wrapped.finally(() => runs.delete(wrapped));
  };

  async function send(kind: SimWebhookDelivery["kind"], url: string, body: unknown, authorization?: string): Promise<void> {
    if (closed) return;
    const timeoutMs = opts.webhookTimeoutMs ?? DEFAULT_WEBHOOK_TIMEOUT_MS;
    const record: SimWebhookDelivery = { url, kind, body, sentAt: Date.now() };
    try {
      const res = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", "user-agent": "crewline-crew-sim/1", ...(authorization ? { authorization } : {}) },
        body: JSON.stringify(body),
        signal: AbortSignal.any([closing.signal, AbortSignal.timeout(timeoutMs)]),
      });
      record.status = res.status;
      await res.arrayBuffer().catch(() => undefined);
    } catch (err) {
      record.error = errorText(err);
    }
    webhookDeliveries.push(record);
  }

  /** The event-stream events a callback stands for (the framework's event bus names). */
  function eventsFor(kind: SimWebhookDelivery["kind"], body: Record<string, unknown>): { type: string; data: Record<string, unknown> }[] {
    if (kind === "step") {
      return body["tool"]
        ? [{ type: "tool_usage_started", data: { tool_name: body["tool"], tool_args: body["tool_input"] } }]
        : [{ type: "llm_call_started", data: { messages: body["thought"] } }];
    }
    if (kind === "task") return [{ type: "task_completed", data: { task_name: body["name"], agent_role: body["agent"], output: body["output"] } }];
    if (kind === "crew")
      return body["error"] ? [{ type: "crew_kickoff_failed", data: { error: body["error"] } }] : [{ type: "crew_kickoff_completed", data: { output: body["result"] } }];
    return [];
  }

  /** Sends the events a callback stands for as one batch (shuffled, with a repeat, under chaos). */
  function stream(exec: SimExecution, kind: SimWebhookDelivery["kind"], body: Record<string, unknown>): void {
    streamEvents(exec, eventsFor(kind, body));
  }

  function streamEvents(exec: SimExecution, events: { type: string; data: Record<string, unknown> }[]): void {
    const { events: url, eventsAuth, eventTypes } = exec.webhooks;
    if (!url) return;
    const now = Date.now();
    let batch = events
      .filter((e) => !eventTypes || eventTypes.includes(e.type))
      .map((e, i) => ({ id: randomUUID(), execution_id: exec.id, timestamp: new Date(now + i).toISOString(), type: e.type, data: e.data }));
    if (!batch.length) return;
    if (opts.eventStream?.chaos) batch = [...batch].reverse().concat(batch[0]!);
    queue(exec, () => send("events", url, { events: batch }, eventsAuth));
  }

  /** Sends a run's webhooks one after the other, in the order they were asked for; counted until sent. */
  function queue(exec: SimExecution, sending: () => Promise<void>): Promise<void> {
    const inner = internals.get(exec.id)!;
    delivering++;
    const p = inner.chain.then(() => (exec.state === "STOPPED" ? undefined : sending())).finally(() => delivering--);
    inner.chain = p.catch(() => undefined);
    return p;
  }

  function deliver(exec: SimExecution, kind: SimWebhookDelivery["kind"], body: Record<string, unknown>): Promise<void> {
    // A stopped run says nothing more.
    if (exec.state === "STOPPED") return Promise.resolve();
    stream(exec, kind, body);
    const url = opts.eventStream?.only ? undefined : exec.webhooks[kind as "step" | "task" | "crew" | "input"];
    if (!url) return Promise.resolve();
    if (exec.meta !== undefined) body = { ...body, meta: exec.meta };
    return queue(exec, () => send(kind, url, body, kind === "input" ? exec.webhooks.inputAuth : undefined));
  }

  const touch = (exec: SimExecution) => {
    exec.updatedAt = Date.now();
  };

  // ---- the run --------------------------------------------------------------

  async function runFrom(exec: SimExecution): Promise<void> {
    for (;;) {
      if (closed || exec.state === "STOPPED") return;
      const idx = exec.taskIndex;
      const failRun = opts.failRun;
      if (failRun && idx >= failRun.afterTask) return fail(exec, failRun.error);
      const task = exec.tasks[idx];
      if (!task) return complete(exec);
      const ok = await runTask(exec, task);
      if (!ok || task.humanInput) return; // failed, closed, or paused for review
      exec.taskIndex = idx + 1;
      touch(exec);
    }
  }

  /** Runs one task; false when the run stopped (closed or failed). */
  async function runTask(exec: SimExecution, task: SimTask): Promise<boolean> {
    if (exec.state === "STOPPED") return false;
    exec.state = "RUNNING";
    touch(exec);
    const round = exec.rounds[task.id] ?? 1;
    const steps = Math.max(0, Math.floor(task.steps ?? DEFAULT_STEPS));
    const slice = Math.max(0, task.delayMs ?? DEFAULT_TASK_DELAY_MS) / (steps + 1);
    const subject = exec.inputs["topic"] ?? Object.values(exec.inputs)[0] ?? "the inputs";
    // The event stream (only) tells when a task starts, with its name.
    streamEvents(exec, [{ type: "task_started", data: { task_name: task.name, agent_role: task.agent } }]);
    for (let i = 0; i < steps; i++) {
      await sleep(slice);
      if (closed || isStopped(exec)) return false;
      const body: Record<string, unknown> =
        i % 2 === 0
          ? {
              thought: `${task.agent}: ${round > 1 ? "revising with the reviewer's feedback" : `planning the ${task.name} work`} on ${subject}`,
              kickoff_id: exec.id,
            }
          : {
              thought: `Looking up material about ${subject}`,
              tool: "search_internet",
              tool_input: JSON.stringify({ query: `${subject} ${task.name.replace(/_/g, " ")}` }),
              result: `Found ${3 + i} relevant sources about ${subject}.`,
              kickoff_id: exec.id,
            };
      await deliver(exec, "step", body);
    }
    await sleep(slice);
    if (closed || isStopped(exec)) return false;

    let output: string;
    try {
      const ctx: SimTaskContext = { inputs: { ...exec.inputs }, round, feedback: [...exec.feedback] };
      const spec = task.output;
      output = typeof spec === "function" ? String(spec(ctx)) : typeof spec === "string" ? spec : defaultTaskOutput(task, ctx);
    } catch (err) {
      await fail(exec, `Task ${task.name} raised: ${errorText(err)}`);
      return false;
    }
    exec.outputs[task.id] = output;
    exec.lastExecutedTask = { task_id: task.id, name: task.name, agent: task.agent, output };
    exec.tokenUsage += Math.ceil(output.length / 4) + 120;
    if (task.humanInput) {
      // Paused before the webhook goes out: a receiver may resume at once.
      exec.state = "PAUSED";
      exec.pausedTaskId = task.id;
    }
    touch(exec);
    const d = describeTask(task);
    const deployed = (opts.mode ?? "deployed") === "deployed";
    await deliver(exec, "task", {
      // Real deployments document no task id in the task webhook (field notes).
      ...(deployed ? {} : { task_id: task.id }),
      name: task.name,
      description: d.description,
      expected_output: d.expected_output,
      agent: task.agent,
      output,
      kickoff_id: exec.id,
    });
    if (deployed && task.humanInput && exec.pausedTaskId === task.id) {
      await deliver(exec, "input", { execution_id: exec.id, task_id: task.id, name: task.name, agent: task.agent, task_output: output });
    }
    return !closed;
  }

  async function complete(exec: SimExecution): Promise<void> {
    const last = exec.tasks[exec.tasks.length - 1];
    exec.result = last ? (exec.outputs[last.id] ?? "") : "";
    exec.state = "SUCCESS";
    exec.pausedTaskId = undefined;
    touch(exec);
    if (opts.endCallbackLagMs) await sleep(opts.endCallbackLagMs);
    await deliver(exec, "crew", {
      kickoff_id: exec.id,
      result: exec.result,
      token_usage: { total_tokens: exec.tokenUsage },
    });
  }

  async function fail(exec: SimExecution, error: string): Promise<void> {
    exec.state = "FAILED";
    exec.error = error;
    exec.result = "";
    exec.pausedTaskId = undefined;
    touch(exec);
    if (opts.endCallbackLagMs) await sleep(opts.endCallbackLagMs);
    await deliver(exec, "crew", { kickoff_id: exec.id, result: "", error });
  }

  // ---- endpoints ------------------------------------------------------------

  function route(method: string, path: string): Route {
    const parts = path
      .split("/")
      .filter((p) => p.length > 0)
      .map(safeDecode);
    const statusPath = opts.statusPath ?? "both";
    const want = (m: string, r: Route): Route => (method === m || (m === "GET" && method === "HEAD") ? r : { endpoint: "method", allow: m });
    if (parts.length === 0) return want("GET", { endpoint: "health" });
    if (parts.length === 1 && parts[0] === "inputs") return want("GET", { endpoint: "inputs" });
    if (parts.length === 1 && parts[0] === "kickoff") return want("POST", { endpoint: "kickoff" });
    if (parts.length === 1 && parts[0] === "resume") return want("POST", { endpoint: "resume" });
    if (parts.length === 2 && parts[0] === "stop") return want("POST", { endpoint: "stop", id: parts[1]! });
    if (parts.length === 2 && parts[1] === "status" && statusPath !== "legacy") return want("GET", { endpoint: "status", id: parts[0]! });
    if (parts.length === 2 && parts[0] === "status" && statusPath !== "spec") return want("GET", { endpoint: "status", id: parts[1]! });
    return { endpoint: "notfound" };
  }

  async function handleInputs(): Promise<unknown> {
    if (opts.inputsDelayMs) await sleep(opts.inputsDelayMs);
    const names = opts.inputs ?? ["topic"];
    switch (opts.inputsShape ?? "names") {
      case "objects":
        return {
          inputs: names.map((name) => ({ name, type: "string", required: true, description: inputDescription(name) })),
        };
      case "map":
        return { inputs: Object.fromEntries(names.map((name) => [name, inputDescription(name)])) };
      default:
        return { inputs: [...names] };
    }
  }

  function handleKickoff(body: unknown): unknown {
    if (!isRecord(body)) throw badRequest("Request body must be a JSON object");
    const declared = opts.inputs ?? ["topic"];
    const rawInputs = body["inputs"];
    if (rawInputs !== undefined && rawInputs !== null && !isRecord(rawInputs)) {
      throw new HttpError(422, {
        error: "Validation error",
        message: "inputs must be an object",
        details: { missing_inputs: [...declared] },
      });
    }
    const inputs: Record<string, string> = {};
    for (const [k, v] of Object.entries(rawInputs ?? {})) {
      if (v === undefined || v === null) continue;
      inputs[k] = typeof v === "string" ? v : typeof v === "object" ? JSON.stringify(v) : String(v);
    }
    const missing = declared.filter((name) => (inputs[name] ?? "") === "");
    if (missing.length > 0) {
      throw new HttpError(422, {
        error: "Validation error",
        message: "Missing required inputs",
        details: { missing_inputs: missing },
      });
    }
    const meta = body["meta"];
    if (meta !== undefined && meta !== null && !isRecord(meta)) {
      throw new HttpError(422, { error: "Validation error", message: "meta must be an object", details: { field: "meta" } });
    }
    const webhooks = readWebhooks(body);
    const now = Date.now();
    const exec: SimExecution = {
      id: randomUUID(),
      inputs,
      ...(isRecord(meta) ? { meta: { ...meta } } : {}),
      webhooks,
      tasks: (opts.tasks ?? defaultSimTasks()).map((t) => ({ ...t })),
      state: "PENDING",
      taskIndex: 0,
      rounds: {},
      feedback: [],
      outputs: {},
      lastExecutedTask: null,
      result: "",
      tokenUsage: 0,
      createdAt: now,
      updatedAt: now,
    };
    executions.set(exec.id, exec);
    internals.set(exec.id, { chain: Promise.resolve() });
    // Starts after the response is on its way: state is PENDING until then.
    track(new Promise<void>((resolve) => setImmediate(resolve)).then(() => runFrom(exec)));
    return { kickoff_id: exec.id };
  }

  function handleStatus(id: string): unknown {
    const exec = executions.get(id);
    if (!exec) throw new HttpError(404, { error: "Not found" });
    const total = exec.tasks.length;
    const completed =
      exec.state === "SUCCESS" ? total : exec.state === "PAUSED" ? Math.min(total, exec.taskIndex + 1) : exec.state === "PENDING" ? 0 : Math.min(total, exec.taskIndex);
    const current = exec.tasks[Math.min(exec.taskIndex, total - 1)];
    const body: Record<string, unknown> = {
      state: exec.state === "PAUSED" && (opts.mode ?? "deployed") === "deployed" ? "PENDING_HUMAN_INPUT" : exec.state,
      status: exec.state === "PAUSED" && (opts.mode ?? "deployed") === "deployed" ? "Pending Human Input" : statusText(exec),
      result: exec.state === "SUCCESS" ? exec.result : "",
      last_executed_task: exec.lastExecutedTask ? { ...exec.lastExecutedTask } : null,
      progress: {
        unit: "tasks",
        completed,
        total,
        remaining: total - completed,
        current: current?.name ?? null,
        current_agent: current?.agent ?? null,
        started_at: new Date(exec.createdAt).toISOString(),
        updated_at: new Date(exec.updatedAt).toISOString(),
        duration_seconds: Math.round((exec.updatedAt - exec.createdAt) / 10) / 100,
      },
    };
    if (exec.state === "FAILED") body["error"] = exec.error ?? "Execution failed";
    return body;
  }

  function handleResume(body: unknown): unknown {
    if (!isRecord(body)) throw badRequest("Request body must be a JSON object");
    const problems: string[] = [];
    const str = (k: string) => {
      const v = body[k];
      if (typeof v !== "string" || (k !== "human_feedback" && v.length === 0)) problems.push(k);
      return typeof v === "string" ? v : "";
    };
    const executionId = str("execution_id");
    const taskId = str("task_id");
    const feedback = str("human_feedback");
    const approve = body["is_approve"];
    if (typeof approve !== "boolean") problems.push("is_approve");
    if (problems.length > 0) {
      throw new HttpError(422, {
        error: "Validation error",
        message: "Missing or invalid required fields",
        details: { missing_fields: problems },
      });
    }
    const webhooks = readWebhooks(body);
    const exec = executions.get(executionId);
    if (!exec) throw new HttpError(404, { error: "Not found", message: "Execution not found" });
    if (exec.state !== "PAUSED" || exec.pausedTaskId !== taskId) {
      throw badRequest("Execution is not in pending human input state");
    }
    // Webhook URLs are not carried over: only the ones sent now stay active.
    exec.webhooks = webhooks;
    if (feedback.trim().length > 0) exec.feedback.push(feedback);
    exec.pausedTaskId = undefined;
    exec.state = "RUNNING";
    touch(exec);
    let answer: { status: string; message: string };
    if (approve) {
      exec.taskIndex += 1;
      answer =
        exec.taskIndex >= exec.tasks.length
          ? { status: "completed", message: "Execution completed successfully" }
          : { status: "resumed", message: "Execution resumed successfully" };
    } else {
      exec.rounds[taskId] = (exec.rounds[taskId] ?? 1) + 1;
      answer = { status: "retrying", message: "Task will be retried with your feedback" };
    }
    track(new Promise<void>((resolve) => setImmediate(resolve)).then(() => runFrom(exec)));
    return answer;
  }

  /** POST /stop/{id}: the run ends at once (STOPPED) and sends nothing more; 409 when it had already ended. */
  function handleStop(id: string): unknown {
    const exec = executions.get(id);
    if (!exec) throw new HttpError(404, { error: "Not found", message: "Execution not found" });
    if (exec.state === "SUCCESS" || exec.state === "FAILED" || exec.state === "STOPPED") {
      throw new HttpError(409, { error: "Conflict", message: `Execution already ended (${exec.state})` });
    }
    exec.state = "STOPPED";
    exec.pausedTaskId = undefined;
    touch(exec);
    return { status: "stopped", message: "Execution stopped" };
  }

  function readWebhooks(body: Record<string, unknown>): SimExecution["webhooks"] {
    const out: SimExecution["webhooks"] = {};
    const fields = [
      ["taskWebhookUrl", "task"],
      ["stepWebhookUrl", "step"],
      ["crewWebhookUrl", "crew"],
    ] as const;
    for (const [field, kind] of fields) {
      const v = body[field];
      if (v === undefined || v === null || v === "") continue;
      if (typeof v !== "string" || !isHttpUrl(v)) {
        throw new HttpError(422, { error: "Validation error", message: `${field} must be an http(s) URL`, details: { field } });
      }
      out[kind] = v;
    }
    // webhooks: {events, url, realtime, authentication}: the event stream.
    const ws = body["webhooks"];
    if (isRecord(ws) && typeof ws["url"] === "string" && isHttpUrl(ws["url"])) {
      out.events = ws["url"];
      const auth = isRecord(ws["authentication"]) ? ws["authentication"] : {};
      if (auth["strategy"] === "bearer" && typeof auth["token"] === "string") out.eventsAuth = `Bearer ${auth["token"]}`;
      if (Array.isArray(ws["events"])) out.eventTypes = ws["events"].filter((e): e is string => typeof e === "string");
    }
    // humanInputWebhook: {url, authentication: {strategy: "bearer", token} | {strategy: "basic", username, password}}
    const hi = body["humanInputWebhook"];
    if (isRecord(hi) && typeof hi["url"] === "string" && isHttpUrl(hi["url"])) {
      out.input = hi["url"];
      const auth = isRecord(hi["authentication"]) ? hi["authentication"] : {};
      if (auth["strategy"] === "bearer" && typeof auth["token"] === "string") out.inputAuth = `Bearer ${auth["token"]}`;
      else if (auth["strategy"] === "basic") out.inputAuth = `Basic ${Buffer.from(`${String(auth["username"] ?? "")}:${String(auth["password"] ?? "")}`).toString("base64")}`;
    } else if (typeof body["humanInputWebhookUrl"] === "string" && isHttpUrl(body["humanInputWebhookUrl"] as string)) {
      out.input = body["humanInputWebhookUrl"] as string;
    }
    return out;
  }

  function takeFailure(endpoint: SimEndpoint): SimFailure | undefined {
    for (const f of failures) {
      if (f.entry.endpoint !== endpoint) continue;
      if (f.remaining === undefined) return f.entry;
      if (f.remaining > 0) {
        f.remaining -= 1;
        return f.entry;
      }
    }
    return undefined;
  }

  // ---- server ---------------------------------------------------------------

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const method = (req.method ?? "GET").toUpperCase();
    let path = "/";
    try {
      path = new URL(req.url ?? "/", "http://sim.local").pathname;
    } catch {
      path = req.url ?? "/";
    }
    const headers: Record<string, string | undefined> = {};
    for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(", ") : v;

    let raw: string;
    try {
      raw = await readBody(req);
    } catch (err) {
      requests.push({ method, path, headers, body: undefined, at: Date.now() });
      if (err instanceof HttpError) return sendJson(res, err.status, err.body);
      return; // connection broke while reading
    }
    let parsed: unknown;
    let jsonOk = true;
    if (raw.length > 0) {
      try {
        parsed = JSON.parse(raw);
      } catch {
        parsed = raw;
        jsonOk = false;
      }
    }
    requests.push({ method, path, headers, body: parsed, at: Date.now() });

    const r = route(method, path);
    if (r.endpoint === "health") {
      res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
      res.end(method === "HEAD" ? undefined : "Healthy");
      return;
    }
    const sendScripted = (scripted: SimFailure) => {
      const body = scripted.body === undefined ? { error: "Simulated failure", message: `Scripted ${scripted.status} for ${r.endpoint}` } : scripted.body;
      if (typeof body === "string") {
        res.writeHead(scripted.status, { "content-type": "text/plain; charset=utf-8", ...(scripted.headers ?? {}) });
        res.end(body);
        return;
      }
      sendJson(res, scripted.status, body, scripted.headers);
    };
    let lateFailure: SimFailure | undefined;
    if (r.endpoint === "inputs" || r.endpoint === "kickoff" || r.endpoint === "status" || r.endpoint === "resume" || r.endpoint === "stop") {
      const scripted = takeFailure(r.endpoint);
      if (scripted?.afterHandling) lateFailure = scripted;
      else if (scripted) return sendScripted(scripted);
    }

    const auth = headers["authorization"] ?? "";
    const match = /^Bearer\s+(.+)$/i.exec(auth.trim());
    const presented = match?.[1]?.trim();
    const isOrg = presented !== undefined && presented === opts.token;
    const isUser = presented !== undefined && opts.userToken !== undefined && opts.userToken !== "" && presented === opts.userToken;
    const userAllowed = r.endpoint === "inputs" || r.endpoint === "status";
    if (!isOrg && !(isUser && userAllowed)) {
      return sendJson(res, 401, { error: "Unauthorized", message: "Invalid bearer token" });
    }

    if (r.endpoint === "notfound") return sendJson(res, 404, { error: "Not found" });
    if (r.endpoint === "method") return sendJson(res, 405, { error: "Method not allowed" }, { allow: r.allow });

    try {
      let out: unknown;
      switch (r.endpoint) {
        case "inputs":
          out = await handleInputs();
          break;
        case "status":
          out = handleStatus(r.id);
          break;
        case "kickoff":
          if (!jsonOk) throw badRequest("Request body must be valid JSON");
          if (opts.kickoffDelayMs) await sleep(opts.kickoffDelayMs);
          out = handleKickoff(parsed);
          break;
        case "resume":
          if (!jsonOk) throw badRequest("Request body must be valid JSON");
          out = handleResume(parsed);
          break;
        case "stop":
          out = handleStop(r.id);
          break;
      }
      if (closed && res.destroyed) return;
      if (lateFailure) return sendScripted(lateFailure);
      sendJson(res, 200, out);
    } catch (err) {
      if (err instanceof HttpError) return sendJson(res, err.status, err.body);
      sendJson(res, 500, { error: "Internal server error", message: errorText(err) });
    }
  }

  const server = http.createServer((req, res) => {
    req.on("error", () => undefined);
    res.on("error", () => undefined);
    handle(req, res).catch((err) => {
      if (!res.headersSent) sendJson(res, 500, { error: "Internal server error", message: errorText(err) });
      else res.destroy();
    });
  });
  server.on("clientError", (_err, socket) => {
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n");
    else socket.destroy();
  });

  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once("error", onError);
    server.listen(opts.port ?? 0, opts.host ?? "127.0.0.1", () => {
      server.off("error", onError);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const hostForUrl = addr.family === "IPv6" || addr.address.includes(":") ? `[${addr.address}]` : addr.address;
  const url = `http://${hostForUrl}:${addr.port}`;

  let closePromise: Promise<void> | undefined;

  return {
    url,
    requests,
    webhookDeliveries,
    executions,
    get busy() {
      return runs.size > 0;
    },
    get delivering() {
      return delivering;
    },
    waitFor(pred, timeoutMs = 5000) {
      return new Promise<void>((resolve, reject) => {
        const started = Date.now();
        const check = () => {
          let ok = false;
          try {
            ok = pred();
          } catch (err) {
            return reject(err instanceof Error ? err : new Error(String(err)));
          }
          if (ok) return resolve();
          if (Date.now() - started >= timeoutMs) return reject(new Error(`waitFor: condition not met within ${timeoutMs} ms`));
          setTimeout(check, 10);
        };
        check();
      });
    },
    setOptions(patch) {
      const next: SimCrewOptions = { ...opts };
      for (const [k, v] of Object.entries(patch) as [keyof SimCrewOptions, unknown][]) {
        if (k === "port" || k === "host") continue; // fixed once listening
        if (k === "token" && (typeof v !== "string" || v === "")) continue;
        (next as unknown as Record<string, unknown>)[k] = v;
      }
      opts = next;
      if ("failWith" in patch) failures = armFailures(opts.failWith);
    },
    close() {
      closePromise ??= (async () => {
        closed = true;
        closing.abort();
        const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        await serverClosed;
        await Promise.allSettled([...runs]);
        await Promise.allSettled([...internals.values()].map((i) => i.chain));
      })();
      return closePromise;
    },
  };
}

// ---------------------------------------------------------------------------
// Small utilities

/** Whether POST /stop ended the run (a function, so that a check after an await is not narrowed away). */
function isStopped(exec: SimExecution): boolean {
  return exec.state === "STOPPED";
}

function armFailures(list: SimFailure[] | undefined): { entry: SimFailure; remaining: number | undefined }[] {
  return (list ?? []).map((entry) => ({ entry, remaining: entry.times === undefined ? undefined : Math.max(0, entry.times) }));
}

function statusText(exec: SimExecution): string {
  const task = exec.tasks[exec.taskIndex];
  switch (exec.state) {
    case "PENDING":
      return "Execution queued";
    case "RUNNING":
      return task ? `Running task ${task.name} (${exec.taskIndex + 1}/${exec.tasks.length})` : "Finishing execution";
    case "PAUSED":
      return task ? `Waiting for human input on task ${task.name}` : "Waiting for human input";
    case "SUCCESS":
      return "Execution completed";
    case "FAILED":
      return `Execution failed: ${exec.error ?? "unknown error"}`;
    case "STOPPED":
      return "Execution stopped";
  }
}

function inputDescription(name: string): string {
  const known: Record<string, string> = {
    topic: "The subject the crew researches and writes about",
    audience: "Who the final text is written for",
    current_year: "The current year, for time-sensitive research",
  };
  return known[name] ?? `Value for ${name.replace(/[_-]+/g, " ")}`;
}

function badRequest(message: string): HttpError {
  return new HttpError(400, { error: "Bad request", message });
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function isHttpUrl(v: string): boolean {
  try {
    const u = new URL(v);
    return u.protocol === "http:" || u.protocol === "https:";
  } catch {
    return false;
  }
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function errorText(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    if (err.name === "TimeoutError") return `timeout: ${err.message}`;
    return cause instanceof Error ? `${err.message}: ${cause.message}` : err.message;
  }
  return String(err);
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on("data", (chunk: Buffer) => {
      if (tooLarge) return;
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        tooLarge = true;
        chunks.length = 0;
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (tooLarge) reject(new HttpError(413, { error: "Payload too large", message: `Body exceeds ${MAX_BODY_BYTES} bytes` }));
      else resolve(Buffer.concat(chunks).toString("utf8"));
    });
    req.on("error", reject);
    req.on("aborted", () => reject(new Error("request aborted")));
  });
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body ?? null);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...(headers ?? {}),
  });
  res.end(text);
}
