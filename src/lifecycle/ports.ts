// What the lifecycle needs from the outside world, as interfaces: the Slack surface implements
// RunNotifier, the crew registry implements CrewDirectory. Tests can pass their own.

import type { CrewApi, EventStreamWebhook, HumanInputWebhook } from "../crew/types.js";
import type { Execution, Review } from "../generated/prisma/client.js";

export type { Execution, Review };

export interface ProgressSnapshot {
  steps: number;
  latest: string;
  agent?: string;
  done: boolean;
  updatedAt: Date;
}

/**
 * The run's Slack effects, one Web API call each, performed by the outbox worker (src/outbox/) and
 * never by the lifecycle itself, which only enqueues them. `effectId` goes into the message's
 * metadata, so a post interrupted by a crash can be found again (findPosted).
 */
export interface RunNotifier {
  /** Posts a task message or review into the run's thread. */
  postReview(execution: Execution, review: Review, effectId: string): Promise<{ ts: string }>;
  /** The whole output of a long task message, as a file in the thread. */
  attachReviewFile(execution: Execution, review: Review): Promise<void>;
  /** Rewrites a review message in place (decision, closing, gaining its controls). */
  updateReview(execution: Execution, review: Review, note?: string): Promise<void>;
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
}

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
