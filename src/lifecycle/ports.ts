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

export interface RunNotifier {
  /** Posts a review message into the run's thread (with a file when the output is long). */
  postReview(execution: Execution, review: Review): Promise<{ ts: string; fileAttached: boolean }>;
  /** Rewrites a review message in place after a decision or when the run ends. */
  updateReview(execution: Execution, review: Review, note?: string): Promise<void>;
  /** Posts the completion (or failure) notice in the channel and refreshes the announcement. */
  postCompletion(execution: Execution): Promise<{ ts: string }>;
  /** Posts or updates the run's single progress message; returns its ts. */
  showProgress(execution: Execution, progress: ProgressSnapshot, ts: string | null): Promise<{ ts: string }>;
  /** A plain notice in the run's thread (e.g. a crew error). */
  postThreadNotice(execution: Execution, text: string): Promise<void>;
  /** A reply in the run's thread, as written (mrkdwn with mentions): escalations, reassignments. */
  postThreadMessage(execution: Execution, text: string): Promise<void>;
  /** A reply in the run's thread about a review's deadline: the reminder it posts, or an automatic decision that did not reach the crew. */
  postDeadlineNotice(execution: Execution, review: Review, notice: DeadlineNotice): Promise<void>;
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
