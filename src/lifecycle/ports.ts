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
 * What a review message shows beside its own row (src/lifecycle/approval-rows.ts reads it): the
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

export interface RunNotifier {
  /** Posts a review message into the run's thread (with a file when the output, or its diff against the previous round, is long). */
  postReview(execution: Execution, review: Review, context?: ReviewContext): Promise<{ ts: string; fileAttached: boolean }>;
  /** Rewrites a review message in place after a decision or when the run ends. */
  updateReview(execution: Execution, review: Review, note?: string, context?: ReviewContext): Promise<void>;
  /** After an edit and approve: the edited version as a file in the thread, when it is too long to read in the message. */
  attachEditedOutput(execution: Execution, review: Review, edit: { by: string; text: string }): Promise<void>;
  /** Posts the completion (or failure) notice in the channel and refreshes the announcement. */
  postCompletion(execution: Execution): Promise<{ ts: string }>;
  /** Posts or updates the run's single progress message; returns its ts. */
  showProgress(execution: Execution, progress: ProgressSnapshot, ts: string | null): Promise<{ ts: string }>;
  /** A plain notice in the run's thread (e.g. a crew error). */
  postThreadNotice(execution: Execution, text: string): Promise<void>;
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
