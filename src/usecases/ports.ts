// What the lifecycle needs from the outside world, as interfaces: the Slack surface implements
// RunNotifier, the crew registry implements CrewDirectory. Tests can pass their own.

import type { NewEffect } from "../domain/effects.js";
import type { RunPlan } from "../domain/plan.js";
import type { CrewApi, EventStreamWebhook, HumanInputWebhook } from "../protocols/crew/types.js";
import type { ExecutionRow } from "../store/executions.js";
import type { FlowRequestRow } from "../store/flow-requests.js";
import type { ReviewRow } from "../store/reviews.js";
import type { Sql } from "../store/sql.js";

export type { NewEffect };

/** One crew run, as the store reads it. */
export type Execution = ExecutionRow;
/** One review round, as the store reads it. */
export type Review = ReviewRow;
/** One flow feedback request, as the store reads it. */
export type FlowRequest = FlowRequestRow;

export interface ProgressSnapshot {
  steps: number;
  latest: string;
  done: boolean;
  updatedAt: Date;
  /** Once done, the run's state: how it ended (stopped, failed…). */
  state?: string;
}

/**
 * What a review message shows beside its own row (src/usecases/review-context.ts assembles it): the
 * approvals so far, the edit that went to the crew, and for round 2 and later the previous round.
 */
export interface ReviewContext {
  /** Approvals needed and given so far (oldest first; a flow's each toward its outcome, counted apart); shown when more than one is needed or someone edited. */
  approvals?: { required: number; by: { userId: string; note?: string; edited: boolean; outcome?: string }[] };
  /** Edit and approve: the edited output (the latest edit) and who made it. */
  edit?: { by: string; text: string };
  /** Round 2 and later: the previous round's output and the feedback that asked for this one. */
  previous?: { round: number; output: string; feedback?: string; decidedBy?: string };
}

/** One streaming call, prepared: its method (the budget is asked first), what the stream shows once it is made, and the call. */
export interface PlanCall {
  method: "chat.startStream" | "chat.appendStream" | "chat.stopStream";
  shown: Record<string, string>;
  /** A stop that carries no chunks (the plan showed everything already). */
  bare?: boolean;
  /** Makes the call; the streamed message's ts. */
  send(): Promise<{ ts: string }>;
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
  /**
   * The run's live plan in Slack's message streaming: the one call that brings the run's streamed
   * message up to `plan` (chat.startStream when `stream.ts` is null, chat.stopStream once the plan
   * ended, else chat.appendStream with the cards that changed), or undefined when it shows that
   * already. `appendOnly`: an ended plan's cards appended without stopping it (its stop waits for a token).
   * Absent: the notifier does not stream (progress is one updated message).
   */
  planCall?(execution: Execution, plan: RunPlan, stream: { ts: string | null; shown: unknown; appendOnly?: boolean }): PlanCall | undefined;
  /**
   * While the run's live plan waits for Slack to let it start: posts (ts null) or updates the message
   * in the run's thread showing its latest card and when its step came; its ts. `stopped`: the run was
   * stopped before its plan started (the message's last words). Absent: the plan just waits.
   */
  showEarlyProgress?(execution: Execution, plan: RunPlan, shown: { stepAt: Date; stopped?: boolean }, ts: string | null, effectId: string): Promise<{ ts: string }>;
  /** A reminder under a review nobody has decided. */
  postReminder(execution: Execution, review: Review, reminder: { who: string; waitedMs: number }, effectId: string): Promise<void>;
  /**
   * The ts of a message an interrupted post of this effect left in the run's channel (or thread), if it
   * can be found; `since`: when the effect was enqueued (the post is no older, so the look-up starts there).
   */
  findPosted(execution: Execution, threadTs: string | null, effectId: string, since: Date): Promise<string | undefined>;
  /** A reply in the run's thread: an escalation, a reassignment, an interrupted decision. */
  postThreadNotice(execution: Execution, notice: RunNotice, effectId: string): Promise<void>;
  /** A reply in the run's thread about a review's deadline: the reminder it posts, or an automatic decision that did not reach the crew. */
  postDeadlineNotice(execution: Execution, review: Review, notice: DeadlineNotice, effectId: string): Promise<void>;
  /** Which files a review needs beside its message, its output or its diff being too long to read there. */
  reviewFiles(review: Review, context: ReviewContext): { output: boolean; diff: boolean };
  /** Whether an edit and approve attaches the edited version as a file (too long to read in the message). */
  editNeedsFile(review: Review, edit: { text: string }): boolean;
  /** Whether the completion notice needs the final output as a file. */
  completionNeedsFile(execution: Execution): boolean;
  /** Opens the direct message with these users (a group DM with several), for a run whose channel Slack refused: its channel id. */
  openConversation?(execution: Execution, userIds: string[]): Promise<string>;
}

/**
 * A reply in a run's thread, as facts: the outbox stores them, and the Slack side words them when it
 * posts (adapters/slack/blocks/notices.ts). Mentions (`who`) are Slack's `<@U…>`/`<!subteam^S…>`.
 */
export type RunNotice =
  | { kind: "escalation"; ids: string[]; taskName: string; round: number; reminders: number }
  | { kind: "reassignment"; to: string; by: string; taskName: string; round: number; reason?: string }
  /** A decision interrupted before it reached the crew (its process died); the review is open again. */
  | { kind: "decision_interrupted"; by: string | null; taskName: string; round: number }
  /** Someone ended the run from Slack (a user id): stopped, or no longer followed (its crew cannot be stopped from Slack). */
  | { kind: "run_stopped"; by: string; how: "stopped" | "abandoned" }
  /** Worded already: a reply an earlier version of Crewline enqueued. */
  | { kind: "text"; text: string };

/** A reply under a flow request's message, as facts (the request row gives the flow and step). */
export type FlowNotice =
  | { kind: "reminder"; who: string; waitedMs: number }
  | { kind: "escalation"; ids: string[]; reminders: number }
  | { kind: "reassignment"; to: string; by: string; reason?: string }
  /** A "remind" deadline passed, or an approve/reject one the flow offers no such outcome for (`lacking`). */
  | { kind: "deadline_passed"; who: string; withinMs: number; lacking?: "approve" | "reject" }
  /** The deadline's automatic answer did not reach the flow (`message`: why); the request is open again. */
  | { kind: "deadline_not_delivered"; message: string }
  | { kind: "text"; text: string };

/** What a flow request's message shows beside its row (usecases/flows.ts assembles it): approvals so far, the edit. */
export type FlowRequestContext = Pick<ReviewContext, "approvals" | "edit">;

/** The flow side of the outbox: one Slack call per effect, like RunNotifier. */
export interface FlowNotifier {
  postRequest(request: FlowRequest, effectId: string, context?: FlowRequestContext): Promise<{ ts: string }>;
  attachRequestFile(request: FlowRequest): Promise<void>;
  updateRequest(request: FlowRequest, context?: FlowRequestContext): Promise<void>;
  attachEditedOutput(request: FlowRequest, edit: { by: string; text: string }): Promise<void>;
  /** A reply under the request's message: a reminder, an escalation, a reassignment, a passed deadline. */
  postNotice(request: FlowRequest, notice: FlowNotice, effectId: string): Promise<void>;
  /** The Slack user with this e-mail (the request's assignee) in the request's workspace, or undefined. */
  lookupByEmail(email: string, request: Pick<FlowRequest, "teamId" | "enterpriseId">): Promise<string | undefined>;
  /** As RunNotifier.findPosted: under the request's message (threadTs) or in its channel, from `since` on. */
  findPosted(request: FlowRequest, threadTs: string | null, effectId: string, since: Date): Promise<string | undefined>;
  /** Whether the request's output goes in a file beside its message, as first posted or as shown with its context (approvals, an edit). */
  requestNeedsFile(request: FlowRequest, context?: FlowRequestContext): boolean;
  /** Whether an edit and approve attaches the edited version as a file. */
  editNeedsFile(request: FlowRequest, edit: { text: string }): boolean;
  /** Opens the direct message (a group DM with several) with these users and the members of these user groups, for a request whose channel Slack refused: its channel id. */
  openConversation?(request: FlowRequest, who: { users: string[]; usergroups: string[] }): Promise<string>;
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

/**
 * The outbox as use cases see it (src/outbox/index.ts is the one implementation): a use case asks for
 * a Slack effect inside the transaction of the change that calls for it, and wakes the worker once
 * that has committed.
 */
export interface Outbox {
  /** Enqueues on the caller's transaction (a runner's, or a store handle on one); call nudge() once it has committed. Resolves false when the one-time effect was enqueued already. */
  add(tx: Sql, effect: NewEffect): Promise<boolean>;
  /** Enqueues on its own and wakes the worker. */
  request(effect: NewEffect): Promise<void>;
  /** A one-time message enqueued for later (runAt) goes now instead, on the caller's transaction; call nudge() once committed. */
  hurry(tx: Sql, effect: Pick<NewEffect, "kind" | "subjectId" | "part">): Promise<void>;
  /** Wakes this process's worker (other replicas find the work at their next tick). */
  nudge(): void;
}

/** A Slack workspace, and its Enterprise Grid org when it has one: whose client (token) to use. */
export interface TeamRef {
  teamId: string;
  enterpriseId?: string | null;
}

export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/**
 * This process as the holder of claims (a decision under way, a deadline's action, a stop): the id its
 * heartbeat announces, which each claim records, and the time before which another holder's last
 * heartbeat means it is gone, so its claims are taken over at once (ReplicaHeartbeat, replicas.ts).
 */
export interface ClaimHolder {
  readonly replicaId: string;
  deadBefore(now: Date): Date;
}

/** What a flow's callback said to an answer (src/adapters/flows/callback-client.ts). */
export interface FlowCallbackAnswer {
  /** ok: taken; refused: a 4xx about the request (it expired, was answered); failed: may be answered again. */
  kind: "ok" | "refused" | "failed";
  status: number | null;
  message: string | null;
  /** Failed in a way the flow may have taken it all the same (a time-out, a gateway's 502/504). */
  maybeTaken?: boolean;
}

/** Delivers an answer to a flow: POST {feedback, source: "slack"} to the callback URL its request carried. */
export interface FlowCallback {
  /** How long the flow is given to answer. */
  readonly timeoutMs: number;
  answer(callbackUrl: string, feedback: string): Promise<FlowCallbackAnswer>;
}
