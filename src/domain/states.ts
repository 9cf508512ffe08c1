// The execution and review state machines, as pure data. Every write in the lifecycle is a
// conditional update "from one of these states", so races between replicas, webhooks and polls
// resolve in the database, and this table is the single place that says what may follow what.

// "uninstalled": the app was removed from the run's workspace (src/adapters/slack/uninstall.ts); nothing more is
// posted or polled for it. "stopped": someone stopped it from Slack and the crew took the stop; "abandoned": the
// crew cannot be stopped from Slack and someone chose to stop following it (src/usecases/stops.ts).
export const EXECUTION_STATES = ["starting", "running", "waiting", "completed", "failed", "lost", "kickoff_failed", "uninstalled", "stopped", "abandoned"] as const;
export type ExecutionState = (typeof EXECUTION_STATES)[number];

export const FINISHED_STATES: readonly ExecutionState[] = ["completed", "failed", "lost", "kickoff_failed", "uninstalled", "stopped", "abandoned"];
/** Ended by a person from Slack: the run's messages say who (Execution.stoppedBy). */
export const STOPPED_STATES: readonly ExecutionState[] = ["stopped", "abandoned"];
/**
 * A run that may still produce news: status is polled, reviews are reminded and their deadlines kept,
 * and it shows on App Home. ("starting" counts: a fast crew can call back before the kickoff answer.)
 */
export const LIVE_STATES: readonly ExecutionState[] = ["starting", "running", "waiting"];

export type ExecutionEvent = "kicked_off" | "kickoff_failed" | "review_opened" | "review_decided" | "succeeded" | "failed" | "lost" | "uninstalled" | "stopped" | "abandoned";

const EXECUTION_TRANSITIONS: Record<ExecutionEvent, { from: readonly ExecutionState[]; to: ExecutionState }> = {
  kicked_off: { from: ["starting"], to: "running" },
  kickoff_failed: { from: ["starting"], to: "kickoff_failed" },
  // A fast crew can call back before the kickoff answer has been stored: "starting" counts as live.
  review_opened: { from: LIVE_STATES, to: "waiting" },
  review_decided: { from: ["waiting", "running"], to: "running" },
  succeeded: { from: LIVE_STATES, to: "completed" },
  failed: { from: LIVE_STATES, to: "failed" },
  lost: { from: ["running", "waiting"], to: "lost" },
  // The app was removed from the run's workspace: nothing more can be posted or decided.
  uninstalled: { from: LIVE_STATES, to: "uninstalled" },
  // Someone stopped it from Slack and the crew took POST /stop.
  stopped: { from: LIVE_STATES, to: "stopped" },
  // The crew cannot be stopped from Slack (no /stop): Crewline stops following it.
  abandoned: { from: LIVE_STATES, to: "abandoned" },
};

export function executionTransition(event: ExecutionEvent) {
  return EXECUTION_TRANSITIONS[event];
}

export function nextExecutionState(current: string, event: ExecutionEvent): ExecutionState | undefined {
  const t = EXECUTION_TRANSITIONS[event];
  return (t.from as readonly string[]).includes(current) ? t.to : undefined;
}

export function isFinished(state: string): boolean {
  return (FINISHED_STATES as readonly string[]).includes(state);
}

// "posted": a task's output shown in the thread with no decision controls; every task webhook makes
// one. It becomes "pending" (a review) only once the crew is known to wait for a person on it.
export const REVIEW_STATES = ["posted", "pending", "deciding", "approved", "rejected", "closed"] as const;
export type ReviewState = (typeof REVIEW_STATES)[number];

export type ReviewEvent =
  | "wait_confirmed"
  | "claimed"
  | "resume_ok_approve"
  | "resume_ok_reject"
  | "resume_failed"
  | "not_waiting"
  | "run_finished"
  | "run_stopped"
  | "workspace_removed"
  | "superseded";

const REVIEW_TRANSITIONS: Record<ReviewEvent, { from: readonly ReviewState[]; to: ReviewState }> = {
  // A human-input request or the status says the crew waits on this output: it becomes a review.
  wait_confirmed: { from: ["posted"], to: "pending" },
  // The first click moves pending → deciding atomically; every later click finds it taken.
  claimed: { from: ["pending"], to: "deciding" },
  resume_ok_approve: { from: ["deciding"], to: "approved" },
  resume_ok_reject: { from: ["deciding"], to: "rejected" },
  // The crew did not take the decision: the review can be decided again.
  resume_failed: { from: ["deciding"], to: "pending" },
  not_waiting: { from: ["deciding"], to: "closed" },
  run_finished: { from: ["pending"], to: "closed" },
  // The run was stopped (or is no longer followed): its reviews close. Its task messages stay finished
  // tasks ("posted"), as at the run's own end: closed, they would read as reviews stopped before a decision.
  run_stopped: { from: ["pending"], to: "closed" },
  // The app was removed from the run's workspace: its messages can no longer change.
  workspace_removed: { from: ["posted", "pending"], to: "closed" },
  // The crew ran the task again (a newer round came): an earlier review left undecided can no longer
  // be decided, since /resume names the task, not the round, and would decide the new output unseen.
  superseded: { from: ["pending"], to: "closed" },
};

export function reviewTransition(event: ReviewEvent) {
  return REVIEW_TRANSITIONS[event];
}

export function nextReviewState(current: string, event: ReviewEvent): ReviewState | undefined {
  const t = REVIEW_TRANSITIONS[event];
  return (t.from as readonly string[]).includes(current) ? t.to : undefined;
}

/** A task webhook's round: a new output after a rejection is the next round; the same output again is a duplicate. */
export function nextRound(latest: { round: number; state: string; outputHash: string } | undefined, outputHash: string): number | undefined {
  if (!latest) return 1;
  if (latest.state === "rejected") return latest.round + 1;
  if (latest.outputHash === outputHash) return undefined;
  // A different output while the last round is undecided or approved: the crew ran the task again.
  return latest.round + 1;
}

// A flow's human feedback request (src/usecases/flows.ts): answered once, through an atomic
// pending → deciding claim, like a review.
export const FLOW_REQUEST_STATES = ["pending", "deciding", "answered", "closed"] as const;
export type FlowRequestState = (typeof FLOW_REQUEST_STATES)[number];

export type FlowRequestEvent = "claimed" | "answered" | "taken_earlier" | "refused" | "not_taken" | "answer_failed" | "abandoned" | "workspace_removed";

const FLOW_REQUEST_TRANSITIONS: Record<FlowRequestEvent, { from: readonly FlowRequestState[]; to: FlowRequestState }> = {
  // The first answer (a click, or the deadline) moves pending → deciding; every later one finds it taken.
  claimed: { from: ["pending"], to: "deciding" },
  // The flow took the answer.
  answered: { from: ["deciding"], to: "answered" },
  // The flow refused it as already answered after an earlier answer may have reached it (its call timed
  // out, or was cut off): answered, by that earlier answer.
  taken_earlier: { from: ["deciding"], to: "answered" },
  // The flow refused it for what the request is (404, 409, 410; 401/403: its token): closed with its reason.
  refused: { from: ["deciding"], to: "closed" },
  // The flow refused the answer itself (400, 413, 422: too long, malformed): open again, to be answered differently.
  not_taken: { from: ["deciding"], to: "pending" },
  // 5xx, time-out or unreachable: open again so someone can answer.
  answer_failed: { from: ["deciding"], to: "pending" },
  // Its process died while calling the flow: open again long after any call could still be running.
  abandoned: { from: ["deciding"], to: "pending" },
  workspace_removed: { from: ["pending"], to: "closed" },
};

export function flowRequestTransition(event: FlowRequestEvent) {
  return FLOW_REQUEST_TRANSITIONS[event];
}

export function nextFlowRequestState(current: string, event: FlowRequestEvent): FlowRequestState | undefined {
  const t = FLOW_REQUEST_TRANSITIONS[event];
  return (t.from as readonly string[]).includes(current) ? t.to : undefined;
}

/** What a review's message shows for a state: "deciding" looks like "pending". */
export function shownAs(state: string): string {
  return state === "deciding" ? "pending" : state;
}
