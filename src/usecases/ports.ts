// What the lifecycle needs from the outside world, as interfaces: the Slack surface implements
// RunNotifier, the crew registry implements CrewDirectory. Tests can pass their own.

import type { CrewApi, EventStreamWebhook, HumanInputWebhook } from "../protocols/crew/types.js";
import type { ExecutionRow } from "../store/executions.js";
import type { ReviewRow } from "../store/reviews.js";

/** One crew run, as the store reads it. */
export type Execution = ExecutionRow;
/** One review round, as the store reads it. */
export type Review = ReviewRow;

export interface ProgressSnapshot {
  steps: number;
  latest: string;
  agent?: string;
  done: boolean;
  updatedAt: Date;
}

/**
 * What a review message shows beside its own row (src/usecases/review-context.ts assembles it): the
 * approvals so far, the edit that went to the crew, and for round 2 and later the previous round.
 */
export interface ReviewContext {
  /** Approvals needed and given so far (oldest first); shown when more than one is needed or someone edited. */
  approvals?: { required: number; by: { userId: string; note?: string; edited: boolean }[] };
  /** Edit and approve: the edited output (the latest edit) and who made it. */
  edit?: { by: string; text: string };
  /** Round 2 and later: the previous round's output and the feedback that asked for this one. */
  previous?: { round: number; output: string; feedback?: string; decidedBy?: string };
}

/**
 * The run's Slack effects, one Web API call each, performed by the outbox worker (src/outbox/) and
 * never by the lifecycle itself, which only enqueues them. `effectId` goes into the message's
 * metadata, so a post interrupted by a crash can be found again (findPosted).
 */
export interface RunNotifier {
  /** Posts a task message or review into the run's thread. */
  postReview(execution: Execution, review: Review, effectId: string, context?: ReviewContext): Promise<{ ts: string }>;
  /** The whole output of a long task message, as a file in the thread. */
  attachReviewFile(execution: Execution, review: Review): Promise<void>;
  /** Round 2 and later: the whole diff from the previous round, as a file, when it is long. */
  attachRoundDiff(execution: Execution, review: Review, previous: NonNullable<ReviewContext["previous"]>): Promise<void>;
  /** Rewrites a review message in place (decision, closing, gaining its controls, approvals so far). */
  updateReview(execution: Execution, review: Review, note?: string, context?: ReviewContext): Promise<void>;
  /** After an edit and approve: the edited version as a file in the thread (when too long to read in the message). */
  attachEditedOutput(execution: Execution, review: Review, edit: { by: string; text: string }): Promise<void>;
  /** Posts the completion (or failure) notice in the channel. */
  postCompletion(execution: Execution, effectId: string): Promise<{ ts: string }>;
  /** The final output as a file, when it is too long for the notice. */
  attachCompletionFile(execution: Execution): Promise<void>;
  /** Shows the run's final state on its announcement (the thread's parent). */
  updateAnnouncement(execution: Execution): Promise<void>;
  /** Posts (ts null) or updates the run's single progress message; returns its ts. */
  showProgress(execution: Execution, progress: ProgressSnapshot, ts: string | null, effectId: string): Promise<{ ts: string }>;
  /** A reminder under a review nobody has decided. */
  postReminder(execution: Execution, review: Review, reminder: { who: string; waitedMs: number }, effectId: string): Promise<void>;
  /** The ts of a message an interrupted post of this effect left in the run's channel (or thread), if it can be found. */
  findPosted(execution: Execution, threadTs: string | null, effectId: string): Promise<string | undefined>;
  /** A reply in the run's thread, as written (mrkdwn with mentions): escalations, reassignments. */
  postThreadMessage(execution: Execution, text: string, effectId: string): Promise<void>;
  /** A reply in the run's thread about a review's deadline: the reminder it posts, or an automatic decision that did not reach the crew. */
  postDeadlineNotice(execution: Execution, review: Review, notice: DeadlineNotice, effectId: string): Promise<void>;
}

export type DeadlineNotice =
  | { kind: "reminder" /** mentions of who may decide */; who: string; withinMs: number }
  | { kind: "not_delivered"; action: "reject" | "approve"; message: string };

export interface CrewDirectory {
  get(name: string): CrewApi | undefined;
}

export interface WebhookUrls {
  taskWebhookUrl: string;
  stepWebhookUrl: string;
  crewWebhookUrl: string;
  humanInputWebhook?: HumanInputWebhook;
  webhooks?: EventStreamWebhook;
}

export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };
