// A run's live plan: one card per crew task, as the run's facts show it (pure; no Slack words).
// The cards come from what the crew told us: the task outputs recorded as reviews (a task finished),
// the latest step or event of the task under way (with the name a task_started event gave it), and
// the run's end. Card ids are the task's place in the run (task-1, task-2…), so the card a running
// task showed before its name was known is the one its output completes.

import { isFinished, STOPPED_STATES } from "./states.js";

export type PlanTaskStatus = "pending" | "in_progress" | "complete" | "error";

export interface PlanTask {
  id: string;
  title: string;
  status: PlanTaskStatus;
  /** What it is doing (the latest tool or thought), or why it waits. */
  details?: string;
  /** Its output, when finished (the words are cut and escaped where they are shown). */
  output?: string;
}

/** One review round of a task (the store's Review row, the fields the plan reads). */
export interface PlanReview {
  taskKey: string;
  taskName: string;
  round: number;
  state: string;
  output: string;
  createdAt: Date;
}

/** The latest step of the task under way, as the progress effect's payload carries it. */
export interface PlanStep {
  latest: string;
  /** When `latest` arrived (ms since the epoch). */
  latestAt: number;
  /** The task's name from a task_started event, and when that arrived. */
  task?: string;
  taskAt?: number;
}

export interface PlanFacts {
  /** The run's state (src/domain/states.ts). */
  state: string;
  error?: string | null;
  reviews: readonly PlanReview[];
  step?: PlanStep;
}

export interface RunPlan {
  tasks: PlanTask[];
  /** The run ended (completed, failed…): the stream stops with these cards. */
  ended: boolean;
  failed: boolean;
  /** The run was stopped from Slack, or is no longer followed (not a failure). */
  stopped?: "stopped" | "abandoned";
}

const WAITING_STATES = new Set(["pending", "deciding"]);

export function planOf(facts: PlanFacts): RunPlan {
  const ended = isFinished(facts.state);
  const stopped = STOPPED_STATES.includes(facts.state as (typeof STOPPED_STATES)[number]) ? (facts.state as "stopped" | "abandoned") : undefined;
  const failed = ended && facts.state !== "completed" && !stopped;
  // Tasks in the order their first output came; each shows its latest round.
  const byTask = new Map<string, PlanReview>();
  const order: string[] = [];
  let lastOutputAt = 0;
  for (const r of [...facts.reviews].sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.round - b.round)) {
    if (!byTask.has(r.taskKey)) order.push(r.taskKey);
    const seen = byTask.get(r.taskKey);
    if (!seen || r.round >= seen.round) byTask.set(r.taskKey, r);
    lastOutputAt = Math.max(lastOutputAt, r.createdAt.getTime());
  }
  const tasks: PlanTask[] = order.map((key, i) => cardOf(byTask.get(key)!, i, ended, stopped));
  const step = facts.step;
  const working = !!step && step.latest.trim() !== "" && step.latestAt > lastOutputAt;
  const last = tasks[tasks.length - 1];
  const lastReview = order.length ? byTask.get(order[order.length - 1]!) : undefined;
  if (!working && !ended && last && lastReview?.state === "posted") {
    // The latest output may still turn into a review (a human-input request follows the task webhook):
    // it completes once the next task runs or the run ends, so a card never goes back from complete.
    last.status = "in_progress";
    last.details = "Output posted";
  }
  if (working && last && last.status === "in_progress") {
    // A rejected task the crew is doing again: its card shows the new steps.
    last.details = step.latest;
  } else if (working) {
    const named = step.task && (step.taskAt ?? 0) > lastOutputAt ? step.task : undefined;
    tasks.push({ id: taskId(tasks.length), title: named ?? `Task ${tasks.length + 1}`, status: "in_progress", details: step.latest });
  }
  if (ended) {
    for (const t of tasks) {
      if (t.status !== "in_progress" && t.status !== "pending") continue;
      // The run ended while this task was under way (or waited): it failed or was stopped with the run, or finished.
      t.status = failed || stopped ? "error" : "complete";
      if (stopped) t.details = STOPPED_WORDS[stopped];
      else if (failed && facts.error) t.details = facts.error;
    }
  }
  return { tasks, ended, failed, ...(stopped ? { stopped } : {}) };
}

export function taskId(index: number): string {
  return `task-${index + 1}`;
}

const STOPPED_WORDS = { stopped: "Stopped from Slack", abandoned: "No longer followed" } as const;

function cardOf(r: PlanReview, index: number, ended: boolean, stopped: RunPlan["stopped"]): PlanTask {
  const base = { id: taskId(index), title: r.taskName || r.taskKey, output: r.output };
  // Still waiting when someone stopped the run (its decision on its way to the crew, or a review the
  // stop found): the run stopped before the decision was known to be taken.
  if (WAITING_STATES.has(r.state) && stopped)
    return { ...base, status: "error", details: `${STOPPED_WORDS[stopped]} ${r.state === "deciding" ? "while its decision was being sent" : "before a decision"}` };
  if (WAITING_STATES.has(r.state)) return { ...base, status: ended ? "complete" : "pending", details: "Waiting for a decision" };
  if (r.state === "rejected") return { ...base, status: "in_progress", details: "Sent back: the crew is doing it again" };
  // A review closed by the run's stop was not done: its card says the run stopped before a decision.
  // (A task message the stop found stays "posted", a finished task, below.)
  if (r.state === "closed")
    return stopped ? { ...base, status: "error", details: `${STOPPED_WORDS[stopped]} before a decision` } : { ...base, status: "complete", details: "Closed without a decision" };
  // Details said, so that the last step the card showed while it ran does not stay as if still under way.
  return { ...base, status: "complete", details: r.round > 1 ? `Done (round ${r.round})` : "Done" };
}

/**
 * While a run's live plan waits for Slack to let it start, the message that shows its latest step
 * meanwhile is refreshed when it shows a step older than this (and a newer one came), so a person sees
 * a step at least about every 10 s even when the refresh waits for a token. 6 s, not 7: on a busy
 * two-core machine the refresh came up to 4 s late (11.3 s); the bench gave the same figures at 6 and
 * 7 s, and worse at 4 s (docs/benchmarks.md).
 */
export const EARLY_PROGRESS_REFRESH_MS = 6000;

/**
 * A refresh of that message still refused a token when the step it shows is this old takes its token
 * as a notice (SlackCall.overdue), no longer leaving half of Tier 3 to others: when decisions shown
 * together empty the bucket, progress's share comes back only after about 5 s (6 s + 5 s: the 11.7 s a
 * step once waited in test/e2e/plan-waits.test.ts on a busy machine).
 */
export const EARLY_PROGRESS_OVERDUE_MS = 7000;

/**
 * How long a live plan waits after an append before its next one: its share of the workspace's append
 * tier among the plans streaming there (`liveStreams` of them, one token every `intervalMs`), at least a
 * second and at most 8 s. Without it the plans that happen to find a token append every second while
 * others wait half a minute; with it, twelve plans append about every 7 s each, every one of them.
 */
export function appendSpacing(liveStreams: number, intervalMs: number): number {
  return Math.min(8000, Math.max(1000, Math.ceil(Math.max(1, liveStreams) * intervalMs)));
}

/** A live plan whose token is this close is waited for; a longer wait shows the run's steps in a message meanwhile. */
export const EARLY_PROGRESS_AFTER_MS = 2000;

/**
 * A finished run's plan is stopped (chat.stopStream, Tier 2 like chat.startStream) after the plans
 * waiting to start, for this long after the run ended; then it takes its turn like a start.
 */
export const STOP_YIELDS_MS = 60_000;

/**
 * Slack errors of a streaming call that mean Slack does not offer streaming there: a method it does
 * not know, a scope or token type it does not grant, a feature not enabled in the workspace. The
 * workspace's runs then show progress as one updated message (remembered in the database).
 */
export const STREAMING_REFUSALS: readonly string[] = [
  "unknown_method",
  "method_deprecated",
  "missing_scope",
  "not_allowed_token_type",
  "not_allowed",
  "feature_not_enabled",
  "team_not_enabled",
  "no_permission",
];

/** Errors of an append or stop that mean the stream is over on Slack's side (the next progress starts a new one). */
export const STREAM_GONE: readonly string[] = ["message_not_in_streaming_state", "message_not_found", "cant_update_message"];
