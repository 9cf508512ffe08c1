// Tolerant readers for the crew service's wire shapes (see the field notes).
// Pure: no I/O. Every failure is a CrewError of kind "invalid_response".
import crypto from "node:crypto";
import { z } from "zod";
import { readableJson } from "../../text/bounded-json.js";
import { safeSlice, truncatePlain } from "../../text/truncate.js";
import { CrewError, type CrewOperation, type InvalidInput } from "./errors.js";
import type { CrewCompletionEvent, CrewEvent, CrewInput, ExecutionPhase, ExecutionStatus, HumanInputEvent, ResumeResult, StepEvent, TaskEvent } from "./types.js";

const STEP_SUMMARY_MAX = 300;

// ---- shared helpers ----

/** Any object that is not an array; extra keys are kept and ignored. */
const record = z.record(z.string(), z.unknown());
/** zod 4 treats a bare z.unknown() object key as required. */
const anyValue = z.unknown().optional();
/** An optional field of the wrong type is dropped instead of failing the whole body. */
const lenient = <T extends z.ZodType>(schema: T) => schema.optional().catch(undefined);
/** Longest id accepted (a task's, a run's): ids are stored, indexed and sent back as they came; a longer one is no id. */
const ID_MAX = 200;
const idText = z
  .union([z.string(), z.number()])
  .transform((v) => String(v).trim())
  .pipe(z.string().min(1).max(ID_MAX));
const nonEmpty = z.string().refine((s) => s.trim() !== "");

function invalid(operation: CrewOperation, crewName: string, why: string): CrewError {
  return new CrewError({ kind: "invalid_response", operation, crewName, detail: why });
}

function asRecord(body: unknown, operation: CrewOperation, crewName: string): Record<string, unknown> {
  const parsed = record.safeParse(body);
  if (!parsed.success) throw invalid(operation, crewName, "expected a JSON object");
  return parsed.data;
}

/** Strings as they are, anything else JSON (indented when small); empty or null → undefined. */
function toText(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string") return value.trim() === "" ? undefined : value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return readableJson(value);
}

/** Longest task name kept whole. */
export const TASK_NAME_MAX = 200;

/**
 * A task's name, bounded. CrewAI names a task without a name by its description, which can hold the
 * run's inputs, and the name identifies the task's reviews in a unique index (PostgreSQL keeps an index
 * row under 2,704 bytes: an 8,000-character name failed every attempt to store its review). A longer
 * name keeps its start and a hash of the whole, so every source (webhook, human-input request, status)
 * still names the task alike.
 */
function taskName(value: unknown): string | undefined {
  const text = toText(value);
  if (text === undefined || text.length <= TASK_NAME_MAX) return text;
  const hash = crypto.createHash("sha256").update(text).digest("hex").slice(0, 12);
  return `${safeSlice(text, TASK_NAME_MAX - 15).trimEnd()}… ${hash}`;
}

/** Longest whole name kept for /resume (a task's description, as CrewAI names an unnamed task). */
export const WHOLE_NAME_MAX = 32 * 1024;

/**
 * The whole name of a task whose name was cut, when no task id names it (a crew whose task ids are
 * its names: the field notes leave it open): /resume names the task by it, as the crew knows it.
 */
function wholeName(value: unknown, taskId: string | undefined): string | undefined {
  if (taskId !== undefined) return undefined;
  const text = toText(value);
  return text !== undefined && text.length > TASK_NAME_MAX && text.length <= WHOLE_NAME_MAX ? text : undefined;
}

function firstId(...values: unknown[]): string | undefined {
  for (const v of values) {
    const parsed = idText.safeParse(v);
    if (parsed.success) return parsed.data;
  }
  return undefined;
}

// ---- GET /inputs ----

const TYPE_WORDS = new Set(["string", "str", "text", "number", "integer", "int", "float", "boolean", "bool", "array", "list", "object", "dict", "date", "url"]);

const inputObject = z.object({
  name: idText,
  type: lenient(z.string()),
  description: lenient(z.string()),
  required: lenient(z.union([z.boolean(), z.enum(["true", "false"])])),
});
const inputList = z.array(z.union([idText, inputObject]));
const mapValue = z.union([z.string(), z.null(), inputObject.omit({ name: true })]);
const inputMap = z.record(z.string(), mapValue);

export function parseInputs(body: unknown, crewName = ""): CrewInput[] {
  const wrapper = record.safeParse(body).data;
  const inner = wrapper?.inputs;
  // {"inputs": null} alone: a crew that takes none (not one input named "inputs"; beside others, it is one).
  if (inner === null && Object.keys(wrapper ?? {}).length === 1) return [];
  const wrapped = Array.isArray(inner) || record.safeParse(inner).success;
  const raw = wrapped ? inner : body;

  const list = inputList.safeParse(raw);
  if (list.success) return dedupe(list.data.map(fromListItem));
  const map = inputMap.safeParse(raw);
  if (map.success) return dedupe(Object.entries(map.data).map(([name, v]) => fromMapEntry(name, v)));
  throw invalid("inputs", crewName, "unrecognised inputs list");
}

function fromListItem(item: string | z.infer<typeof inputObject>): CrewInput {
  if (typeof item === "string") return { name: item, required: true };
  return withOptional({ name: item.name, required: item.required !== false && item.required !== "false" }, item);
}

function fromMapEntry(name: string, value: z.infer<typeof mapValue>): CrewInput {
  const base = { name: name.trim(), required: true };
  if (value === null) return base;
  if (typeof value !== "string") return fromListItem({ ...value, name: base.name });
  const text = value.trim();
  if (text === "") return base;
  return TYPE_WORDS.has(text.toLowerCase()) ? { ...base, type: text } : { ...base, description: text };
}

function withOptional(input: CrewInput, extra: { type?: string; description?: string }): CrewInput {
  return {
    ...input,
    ...(extra.type ? { type: extra.type } : {}),
    ...(extra.description ? { description: extra.description } : {}),
  };
}

function dedupe(inputs: CrewInput[]): CrewInput[] {
  const seen = new Set<string>();
  return inputs.filter((i) => i.name !== "" && !seen.has(i.name) && seen.add(i.name));
}

// ---- GET status ----

const lastTaskSchema = z.object({
  output: anyValue,
  agent: anyValue,
  name: lenient(z.string()),
  task_id: anyValue,
  id: anyValue,
});

const progressSchema = z.object({
  completed: lenient(z.number()),
  total: lenient(z.number()),
  current: lenient(z.union([z.string(), z.number()])),
  current_agent: lenient(z.string()),
});

const statusSchema = z.object({
  state: lenient(nonEmpty),
  status: lenient(nonEmpty),
  result: anyValue,
  result_json: anyValue,
  last_executed_task: lenient(lastTaskSchema),
  progress: lenient(progressSchema),
  error: anyValue,
});

export function parseStatus(body: unknown, crewName = ""): ExecutionStatus {
  const parsed = statusSchema.safeParse(asRecord(body, "status", crewName));
  if (!parsed.success) throw invalid("status", crewName, "unrecognised status body");
  const s = parsed.data;
  const rawState = s.state ?? s.status;
  if (rawState === undefined) throw invalid("status", crewName, "status body has no state");

  // The paused state's literal is unpublished: the status text may be what says a human is awaited,
  // unless the state itself plainly says the run is going (a task named "review_required" must not
  // turn a running run into one waiting for a decision it cannot take).
  const stateSaysGoing = s.state !== undefined && /^(running|started|pending|queued|in progress)$/i.test(s.state.trim().replace(/[_-]+/g, " "));
  const phase = phaseOf(rawState) === "running" && !stateSaysGoing && s.status !== undefined && isWaitingText(s.status) ? "paused" : phaseOf(rawState);
  const lastTask = lastTaskOf(s.last_executed_task);
  const output = toText(s.result_json) ?? resultText(s.result) ?? lastTask?.output;
  const crewWords = toText(errorText(s.error)) ?? (phase === "failed" && s.state && s.status !== s.state ? s.status : undefined);
  // A cancelled run must not read as a failure of the crew's own (nor end without a word): say so plainly.
  const cancelled = isCancelledState(rawState);
  const error = cancelled ? cancelledText(rawState, crewWords) : crewWords;
  const progress = progressOf(s.progress);
  return {
    rawState,
    phase,
    ...(cancelled ? { cancelled } : {}),
    ...(output !== undefined ? { output } : {}),
    ...(lastTask ? { lastTask } : {}),
    ...(error !== undefined ? { error } : {}),
    ...(progress ? { progress } : {}),
  };
}

const PHASES: Record<string, ExecutionPhase> = {
  success: "succeeded",
  completed: "succeeded",
  failed: "failed",
  failure: "failed",
  error: "failed",
  revoked: "failed",
  // A cancelled state is unpublished (field notes, POST /stop): any of these has ended, however it was stopped.
  stopped: "failed",
  cancelled: "failed",
  canceled: "failed",
  "not found": "failed",
  paused: "paused",
};

/** States saying the run was cancelled (REVOKED is Celery's word for it). */
const CANCELLED_KEYS = new Set(["stopped", "cancelled", "canceled", "revoked"]);

function stateKey(state: string): string {
  return state.trim().toLowerCase().replace(/[_-]+/g, " ");
}

export function phaseOf(state: string): ExecutionPhase {
  const key = stateKey(state);
  return PHASES[key] ?? (isWaitingText(key) ? "paused" : "running");
}

function isCancelledState(state: string): boolean {
  return CANCELLED_KEYS.has(stateKey(state));
}

/**
 * The end of a run the crew reports cancelled. It says what, not why: a stop from the platform's own UI,
 * or one of Crewline's whose answer or record was lost, read the same.
 */
function cancelledText(state: string, crewWords: string | undefined): string {
  const said = `The crew reports this run ${state.trim()}: it was stopped or cancelled.`;
  return crewWords === undefined ? said : `${said} The crew says: ${crewWords}`;
}

/**
 * Whether a state or status text says the run waits for a person: PAUSED, PENDING_HUMAN_INPUT,
 * WAITING, "Pending Human Input", "Waiting for human input on task …", "feedback required", …
 */
export function isWaitingText(text: string): boolean {
  const t = text.trim().toLowerCase().replace(/[_-]+/g, " ");
  if (t === "waiting" || t === "paused") return true;
  const human = /\b(human|feedback|review|approval)\b/.test(t);
  const waits = /\b(pending|waiting|awaiting|paused|required|needed|requested)\b/.test(t);
  return human && waits;
}

/** `result` is a string once finished; older services send `{output, tasks[]}`. */
function resultText(result: unknown): string | undefined {
  if (typeof result === "string") return toText(result);
  const obj = record.safeParse(result);
  return obj.success ? toText(obj.data.output) : undefined;
}

/**
 * A run's error as its words: an error given as an object says them in `message` (or `detail`, `error`),
 * as Python's `type` and `value`, or in its `traceback`, whose last line is what people read
 * (readableError); shown as JSON it put the whole traceback, quoted, in the channel.
 */
function errorText(error: unknown): unknown {
  const obj = record.safeParse(error);
  if (!obj.success) return error;
  const said = (key: string) => (typeof obj.data[key] === "string" && (obj.data[key] as string).trim() ? (obj.data[key] as string) : undefined);
  const typed = said("type") && said("value") ? `${said("type")}: ${said("value")}` : undefined;
  return said("message") ?? said("detail") ?? said("error") ?? typed ?? said("traceback") ?? error;
}

function lastTaskOf(t: z.infer<typeof lastTaskSchema> | undefined): ExecutionStatus["lastTask"] {
  if (!t) return undefined;
  const taskId = firstId(t.task_id, t.id);
  const out = {
    output: toText(t.output),
    agent: agentName(t.agent),
    name: taskName(t.name),
    taskId,
    wholeName: wholeName(t.name, taskId),
  };
  return dropUndefined(out);
}

function progressOf(p: z.infer<typeof progressSchema> | undefined): ExecutionStatus["progress"] {
  if (!p) return undefined;
  const out = {
    completed: p.completed,
    total: p.total,
    current: p.current === undefined ? undefined : String(p.current),
    currentAgent: p.current_agent,
  };
  return Object.values(out).some((v) => v !== undefined) ? dropUndefined(out) : undefined;
}

/** Agents arrive as a role string or, from some services, an object with `role`. */
function agentName(agent: unknown): string | undefined {
  if (typeof agent === "string") return agent.trim() || undefined;
  const obj = record.safeParse(agent);
  return obj.success && typeof obj.data.role === "string" ? obj.data.role : undefined;
}

function dropUndefined<T extends Record<string, unknown>>(obj: T): T {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined)) as T;
}

// ---- webhooks ----

export function parseWebhook(kind: "step" | "task" | "crew" | "input", body: unknown, crewName = ""): CrewEvent {
  const b = asRecord(body, "webhook", crewName);
  if (kind === "step") return stepEvent(b);
  if (kind === "task") return taskEvent(b, crewName);
  if (kind === "input") return humanInputEvent(b, crewName);
  return crewEvent(b);
}

/** The human-input request's JSON is unpublished: every name the field notes list is accepted. */
function humanInputEvent(b: Record<string, unknown>, crewName: string): HumanInputEvent {
  // Some senders nest the task: {task: {id, name, output}}.
  const task = record.safeParse(b.task).success ? (b.task as Record<string, unknown>) : {};
  const output = toText(b.output) ?? toText(b.task_output) ?? toText(b.taskOutput) ?? toText(b.result) ?? toText(task.output) ?? toText(b.output_json);
  if (output === undefined || !output.trim()) throw invalid("webhook", crewName, "human-input request has no task output");
  const taskId = firstId(b.task_id, b.taskId, b.id, task.id, task.task_id);
  const named = [b.name, b.task_name, task.name].find((n) => toText(n) !== undefined);
  return dropUndefined({
    kind: "input" as const,
    runId: firstId(b.execution_id, b.executionId, b.kickoff_id),
    taskId,
    name: taskName(named),
    wholeName: wholeName(named, taskId),
    agent: agentName(b.agent) ?? agentName(task.agent),
    output,
  });
}

function stepEvent(b: Record<string, unknown>): StepEvent {
  const tool = toText(b.tool);
  const toolInput = toText(b.tool_input);
  const thought = toText(b.thought);
  const result = toText(b.result);
  return dropUndefined({
    kind: "step" as const,
    // Older step payloads carried the run id as task_id.
    runId: firstId(b.kickoff_id, b.execution_id, b.task_id),
    thought,
    tool,
    toolInput,
    result,
    summary: stepSummary(tool, toolInput, thought, toText(b.action)),
  });
}

function stepSummary(tool?: string, toolInput?: string, thought?: string, action?: string): string {
  if (tool) return oneLine(`🔧 ${tool}${toolInput ? `: ${toolInput}` : ""}`);
  if (thought) return oneLine(`💭 ${thought}`);
  if (action) return oneLine(`⚙️ ${action}`);
  return "⚙️ Working…";
}

/** A step's line (cut whole: a split emoji is no JSON PostgreSQL stores). */
const oneLine = (text: string) => truncatePlain(text, STEP_SUMMARY_MAX);

function taskEvent(b: Record<string, unknown>, crewName: string): TaskEvent {
  const name = taskName(b.name);
  const taskId = firstId(b.task_id, b.taskId, b.id);
  const taskKey = taskId ?? name;
  if (taskKey === undefined) throw invalid("webhook", crewName, "task payload has no task id or name");
  return dropUndefined({
    kind: "task" as const,
    runId: firstId(b.kickoff_id, b.execution_id),
    taskKey,
    taskId,
    name,
    wholeName: wholeName(b.name, taskId),
    description: toText(b.description),
    agent: agentName(b.agent),
    output: toText(b.output) ?? toText(b.output_json) ?? toText(b.summary) ?? "",
  });
}

function crewEvent(b: Record<string, unknown>): CrewCompletionEvent {
  const state = toText(b.state) ?? toText(b.status);
  const failedState = state !== undefined && phaseOf(state) === "failed";
  const error = toText(errorText(b.error)) ?? (failedState ? `The crew reported ${state}.` : undefined);
  return dropUndefined({
    kind: "crew" as const,
    runId: firstId(b.kickoff_id, b.execution_id),
    output: toText(b.result_json) ?? crewResultText(b.result) ?? "",
    error,
  });
}

function crewResultText(result: unknown): string | undefined {
  const obj = record.safeParse(result);
  if (obj.success && "output" in obj.data) return toText(obj.data.output);
  return toText(result);
}

// ---- kickoff / resume responses ----

export function parseKickoff(body: unknown, crewName = ""): { kickoffId: string } {
  const b = asRecord(body, "kickoff", crewName);
  // The run id under any name a callback gives it (field notes).
  const kickoffId = firstId(b.kickoff_id, b.kickoffId, b.execution_id, b.executionId, b.id);
  if (kickoffId === undefined) throw invalid("kickoff", crewName, "kickoff answer has no kickoff_id");
  return { kickoffId };
}

const RESUME_STATUSES = ["resumed", "retrying", "completed"] as const;

/** Every field is optional and an unknown status is dropped: the resume itself succeeded. */
export function parseResume(body: unknown): ResumeResult {
  const b = record.safeParse(body);
  if (!b.success) return {};
  const status = RESUME_STATUSES.find(
    (s) =>
      s ===
      String(b.data.status ?? "")
        .trim()
        .toLowerCase(),
  );
  const message = toText(b.data.message);
  return dropUndefined({ status, message });
}

// ---- error bodies: {"error","message","details"} or FastAPI {"detail"} ----

export interface ErrorBody {
  serviceMessage?: string;
  missingInputs?: string[];
  /** Inputs the crew refused for their value, each with its words (FastAPI's detail items that do not say "missing"); name "" for an item about no input. */
  invalidInputs?: InvalidInput[];
}

export function parseErrorBody(body: unknown): ErrorBody {
  const b = record.safeParse(body);
  if (!b.success) return typeof body === "string" ? plainTextMessage(body) : {};
  const missing = missingInputsOf(b.data);
  const invalid = invalidInputsOf(b.data);
  return dropUndefined({
    serviceMessage: serviceMessageOf(b.data),
    missingInputs: missing.length ? missing : undefined,
    invalidInputs: invalid.length ? invalid : undefined,
  });
}

/** Proxies answer with HTML pages; those are noise for a Slack user. */
function plainTextMessage(text: string): ErrorBody {
  const t = text.trim();
  return t && !t.startsWith("<") ? { serviceMessage: t } : {};
}

function serviceMessageOf(b: Record<string, unknown>): string | undefined {
  const error = typeof b.error === "string" ? b.error.trim() : undefined;
  const message = typeof b.message === "string" ? b.message.trim() : undefined;
  if (error && message && error !== message) return `${error}: ${message}`;
  return message || error || detailText(b.detail);
}

function detailText(detail: unknown): string | undefined {
  if (!Array.isArray(detail)) return toText(detail);
  const parts = detail.map((d) => {
    const item = record.safeParse(d);
    if (!item.success) return toText(d);
    const field = locLabel(item.data.loc);
    const msg = toText(item.data.msg);
    return field && msg ? `${field}: ${msg}` : msg;
  });
  return parts.filter(Boolean).join("; ") || undefined;
}

/** Most input names a 422 is read for: each becomes a field of the corrected form, which holds fewer. */
export const MISSING_INPUTS_MAX = 100;

/** Input names as /inputs names are read (trimmed, at most ID_MAX characters; anything else is no name), once each, bounded. */
function inputNames(values: unknown[]): string[] {
  const names = values.map((v) => (typeof v === "string" ? idText.safeParse(v).data : undefined)).filter((n): n is string => n !== undefined);
  return [...new Set(names)].slice(0, MISSING_INPUTS_MAX);
}

function missingInputsOf(b: Record<string, unknown>): string[] {
  const details = record.safeParse(b.details);
  for (const candidate of [details.data?.missing_inputs, b.missing_inputs]) {
    const listed = Array.isArray(candidate) ? inputNames(candidate) : [];
    if (listed.length) return listed;
  }
  return inputNames(
    detailItems(b)
      .filter(saysMissing)
      .map((d) => inputNameOf(d.loc)),
  );
}

/**
 * What a FastAPI detail list refuses other than a missing input, bounded as missing names are: each input
 * whose value it refused ("value is not a valid integer") once, with its first message; and each item about
 * no input (a field Crewline sends itself: ["body", "meta"]) once, named "", its words saying what it is about.
 */
function invalidInputsOf(b: Record<string, unknown>): InvalidInput[] {
  const refused = new Map<string, InvalidInput>();
  for (const item of detailItems(b)) {
    const name = inputNameOf(item.loc);
    const entry = name === undefined ? aboutNoInput(item) : saysMissing(item) ? undefined : { name, message: String(item.msg).trim() };
    const key = entry && (entry.name ? `input ${entry.name}` : `said ${entry.message}`);
    if (key && !refused.has(key)) refused.set(key, entry);
    if (refused.size >= MISSING_INPUTS_MAX) break;
  }
  return [...refused.values()];
}

/** A detail item about no input, in its words (or its type when it has none) with what it is about. */
function aboutNoInput(item: Record<string, unknown>): InvalidInput | undefined {
  const words = toText(item.msg)?.trim() ?? toText(item.type);
  const label = locLabel(item.loc);
  return words === undefined ? undefined : { name: "", message: label ? `${label}: ${words}` : words };
}

function detailItems(b: Record<string, unknown>): Record<string, unknown>[] {
  const items = Array.isArray(b.detail) ? b.detail.map((d) => record.safeParse(d).data) : [];
  return items.filter((d) => d !== undefined);
}

/** Whether a detail item says its input is absent: pydantic's type "missing" (v2) or "value_error.missing" (v1), v1's msg "field required", or no msg at all. */
function saysMissing(item: Record<string, unknown>): boolean {
  const type = typeof item.type === "string" ? item.type.trim().toLowerCase() : "";
  const msg = typeof item.msg === "string" ? item.msg.trim().toLowerCase() : "";
  return type === "missing" || type === "value_error.missing" || msg === "field required" || msg === "";
}

const LOC_NOISE = new Set(["body", "query", "path", "header", "inputs"]);

/** The input a FastAPI `loc` names, the part after "inputs": ["body", "inputs", "topic"] names "topic"; ["body", "meta"] names none. */
function inputNameOf(loc: unknown): string | undefined {
  if (!Array.isArray(loc)) return undefined;
  const at = loc.indexOf("inputs");
  return at >= 0 && typeof loc[at + 1] === "string" ? idText.safeParse(loc[at + 1]).data : undefined;
}

/** What a FastAPI `loc` is about, for the crew's words: its last meaningful part ("topic", "meta"). */
function locLabel(loc: unknown): string | undefined {
  if (!Array.isArray(loc)) return undefined;
  const parts = loc.filter((p): p is string => typeof p === "string" && !LOC_NOISE.has(p));
  return parts.at(-1);
}
