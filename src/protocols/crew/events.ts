// The crew's event stream (field notes: `webhooks` on kickoff): batches {"events": [{id, execution_id,
// timestamp, type, data}]}, unordered, possibly repeated. Each event is read tolerantly into what the
// lifecycle already understands: a progress line, or the body of a task or crew callback.
import { z } from "zod";
import { readableJson } from "../../text/bounded-json.js";
import { readableError } from "../../text/readable-error.js";
import { truncatePlain } from "../../text/truncate.js";
import { CrewError } from "./errors.js";
import type { StepEvent } from "./types.js";

/** Events per batch at most: a larger batch is refused rather than half-read. */
export const MAX_EVENTS_PER_BATCH = 1000;

export interface StreamEvent {
  id: string;
  type: string;
  /** Milliseconds since the epoch; undefined when the event carries no readable time (see parseEventBatch). */
  at: number | undefined;
  runId?: string;
  data: Record<string, unknown>;
}

/** What one event means for the run. */
export type StreamEffect =
  | { kind: "progress"; step: StepEvent }
  /** Recorded and processed like a task or crew callback with this body. */
  | { kind: "callback"; callback: "task" | "crew"; body: Record<string, unknown> }
  | { kind: "ignore" };

const text = z.string().trim().min(1).max(100_000);
const eventSchema = z.object({
  id: z.union([text, z.number().finite()]).transform(String),
  type: text.max(100),
  timestamp: z.union([z.string(), z.number()]).optional(),
  execution_id: z.union([text, z.number()]).optional(),
  data: z.record(z.string(), z.unknown()).nullish(),
});
const batchSchema = z.object({ events: z.array(z.unknown()).max(MAX_EVENTS_PER_BATCH) });

function invalid(crewName: string, detail: string): CrewError {
  return new CrewError({ kind: "invalid_response", crewName, operation: "webhook", detail });
}

/** The batch's events, deduplicated by id and sorted by timestamp. Unreadable events are skipped. */
export function parseEventBatch(body: unknown, crewName = ""): StreamEvent[] {
  const batch = batchSchema.safeParse(body);
  if (!batch.success) throw invalid(crewName, `event batch must be {"events": [...]} with at most ${MAX_EVENTS_PER_BATCH} events`);
  const seen = new Set<string>();
  const events: StreamEvent[] = [];
  for (const raw of batch.data.events) {
    const e = eventSchema.safeParse(raw);
    if (!e.success || seen.has(e.data.id)) continue;
    seen.add(e.data.id);
    events.push({
      id: e.data.id,
      type: e.data.type,
      at: timeOf(e.data.timestamp),
      runId: e.data.execution_id === undefined ? undefined : String(e.data.execution_id),
      data: e.data.data ?? {},
    });
  }
  // An event without a readable time is taken to follow the one before it in the batch (it sorts with
  // it, right after it), not to precede everything. Stable sort: equal keys keep their batch order.
  let key = Number.NEGATIVE_INFINITY;
  const keyed = events.map((e) => {
    key = e.at ?? key;
    return { e, key };
  });
  return keyed.sort((a, b) => a.key - b.key).map((k) => k.e);
}

/** Seconds below this, milliseconds from it: 1e12 ms is September 2001, 1e12 s the year 33658. */
const MS_FROM = 1e12;
const NUMERIC = /^\d{1,16}(?:\.\d{1,9})?$/;

/** An epoch number (seconds or milliseconds, by magnitude), a numeric string of one, or a date text. */
function timeOf(ts: string | number | undefined): number | undefined {
  const n = typeof ts === "number" ? ts : typeof ts === "string" && NUMERIC.test(ts.trim()) ? Number(ts.trim()) : undefined;
  if (n !== undefined) return Number.isFinite(n) && n > 0 ? (n < MS_FROM ? n * 1000 : n) : undefined;
  // Date texts are short; a long string is not one (and is not worth parsing).
  const ms = typeof ts === "string" && ts.length <= 64 ? Date.parse(ts) : Number.NaN;
  return Number.isNaN(ms) ? undefined : ms;
}

const str = (v: unknown): string | undefined => (typeof v === "string" && v.trim() ? v : typeof v === "number" ? String(v) : undefined);
const out = (v: unknown): string | undefined => str(v) ?? (v && typeof v === "object" ? readableJson(v) : undefined);

/** The agent's role, from `agent_role`, `agent` (a role or {role}) — whatever the event carries. */
function agentOf(d: Record<string, unknown>): string | undefined {
  const agent = d.agent;
  return str(d.agent_role) ?? str(agent) ?? (agent && typeof agent === "object" ? str((agent as Record<string, unknown>).role) : undefined);
}

function taskOf(d: Record<string, unknown>): Record<string, unknown> {
  return d.task && typeof d.task === "object" ? (d.task as Record<string, unknown>) : {};
}

/** A step's line, as kept: 300 characters at most (cut whole: a split emoji is no JSON PostgreSQL stores). */
const line = (s: string) => truncatePlain(s, 300);

function progress(summary: string, agent?: string, task?: string): StreamEffect {
  return { kind: "progress", step: { kind: "step", summary: line(agent ? `${summary} · ${agent}` : summary), ...(task ? { task: line(task) } : {}) } };
}

export function effectOf(e: StreamEvent): StreamEffect {
  const d = e.data;
  const task = taskOf(d);
  const taskName = str(d.task_name) ?? str(task.name) ?? str(d.name);
  switch (e.type) {
    case "task_started":
      return progress(`▶️ Task ${taskName ?? "started"}`, agentOf(d), taskName);
    case "agent_execution_started":
      return progress(`🤖 ${agentOf(d) ?? "An agent"} is working`);
    case "tool_usage_started":
      return progress(`🔧 ${str(d.tool_name) ?? "tool"}${str(d.tool_args) ? `: ${str(d.tool_args)}` : ""}`, agentOf(d));
    case "tool_usage_error": {
      // Shown in the progress message: a traceback by its last line only.
      const error = str(d.error);
      return progress(`⚠️ ${str(d.tool_name) ?? "A tool"} failed${error ? `: ${readableError(error)}` : ""}`, agentOf(d));
    }
    case "llm_call_started":
      return progress("💭 Thinking", agentOf(d));
    case "task_completed": {
      const output = out(d.output) ?? out(task.output) ?? out(d.result);
      if (!output) return { kind: "ignore" };
      const taskId = taskName ? undefined : str(d.task_id);
      // Named by neither (the platform publishes no shape for `data`): keyed "task", as a human-input
      // request naming none is, rather than stored and then refused by the task webhook's parser.
      return {
        kind: "callback",
        callback: "task",
        body: { name: taskName ?? (taskId ? undefined : "task"), agent: agentOf(d) ?? str(task.agent), output, ...(taskId ? { task_id: taskId } : {}) },
      };
    }
    case "crew_kickoff_completed":
      return { kind: "callback", callback: "crew", body: { result: out(d.output) ?? out(d.result) ?? "" } };
    case "crew_kickoff_failed":
      return { kind: "callback", callback: "crew", body: { result: "", error: str(d.error) ?? "The crew reported the run as failed." } };
    default:
      // tool_usage_finished, llm_call_completed and types Crewline does not use: nothing to show.
      return { kind: "ignore" };
  }
}
