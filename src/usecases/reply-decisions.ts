// Deciding by replying in a review's thread (or a flow request's): the reply is matched to the review
// it is about, checked against the rules of a click, recorded once per Slack message (a repeated
// delivery, or the same message on another replica, does nothing), and then either mapped to the
// same decide call a click makes, or, when it says neither approve nor reject, kept for the private
// question the replier is asked ("Reject round 2 with your reply as feedback?"). No decision path of
// its own: Reviews.decide and FlowRequests.decide take it from there, exactly once, with `via: "reply"`.
import { outcomesOf } from "../domain/flow-outcomes.js";
import { flowReplyChoices, flowReplyIntent, type ReplyIntent, replyIntent } from "../domain/reply-intent.js";
import type { Logger } from "../log/log.js";
import { findFlowRequestByMessage } from "../store/flow-requests.js";
import { type ReviewWithExecution, reviewsInThread } from "../store/reviews.js";
import type { Sql } from "../store/sql.js";
import {
  claimThreadReplyAnswer,
  deleteThreadRepliesBefore,
  editThreadReplyText,
  findThreadReply,
  forgetDeletedThreadReply,
  type NewThreadReply,
  recordThreadReply,
} from "../store/thread-replies.js";
import { isBlank } from "../text/blank.js";
import { type AccessPorts, fromItsWorkspace, replyInReviewThread, replyMayAnswerFlowRequest, replyMayDecide, reviewerGate } from "./access.js";
import type { FlowDecisionOutcome, FlowRequest, FlowRequests } from "./flows.js";
import { type Clock, systemClock } from "./ports.js";
import type { DecisionOutcome, Reviews } from "./reviews.js";

/** A reply in a thread, as Slack delivered it (its text already cut: domain/reply-intent.ts cutReply). */
export interface ThreadReplyIn {
  channelId: string;
  threadTs: string;
  ts: string;
  userId: string;
  text: string;
  /** The text was cut to REPLY_TEXT_MAX characters. */
  cut: boolean;
}

/**
 * Whether a reply that could not be looked up (the database unreachable) is told it was not taken as a
 * decision. Only an approve or reject, and only in a thread that may hold a review or a flow request:
 * one whose parent the bot posted (a run's announcement, a flow request, a review moved to a direct
 * message). Slack names the parent's author on every reply in a thread (`parent_user_id`); without it,
 * or without the bot's own id, a thread cannot be told apart and the reply is told, as before. A run
 * started with the message shortcut has someone else's message as its parent: an approve there goes
 * unanswered while the database is down (its review still shows open), the price of not answering
 * "lgtm" in every other thread of the channel.
 */
export function toldWhenUnrecorded(reply: { text: string; parentUserId?: string | undefined }, botUserId: string | undefined): boolean {
  if (replyIntent(reply.text).kind === "other") return false;
  return !reply.parentUserId || !botUserId || reply.parentUserId === botUserId;
}

/** The private question about a reply that said neither approve nor reject; its buttons carry `replyId`. */
export type ReplyQuestion =
  | { kind: "review"; replyId: string; taskName: string; round: number; otherPending: number; cut: boolean }
  /**
   * An approve or reject by reply where several reviews the replier may decide wait in one thread
   * (tasks awaited in parallel, or a run started from a message in another run's thread): which one?
   * Each button names a review (`pickValue`); `more` wait beyond those shown.
   */
  | { kind: "which"; replyId: string; approve: boolean; reviews: WhichReview[]; more: number; cut: boolean }
  | {
      kind: "flow";
      replyId: string;
      flowName: string;
      /** The outcome "… with this" sends (undefined: the flow takes free feedback, or has no reject-like outcome). */
      rejectOutcome?: string;
      approveOutcome?: string;
      /** The flow takes free feedback (no outcomes): the reply itself is the answer. */
      freeText: boolean;
      outcomes: string[];
      cut: boolean;
    };

/** A review a "which" question offers: what tells it apart from the others in the thread. */
export interface WhichReview {
  /** The button's value (pickValue). */
  value: string;
  taskName: string;
  round: number;
  crewName: string;
  /** The output's first characters. */
  excerpt: string;
}

export type ReplyChoice = "reject" | "approve" | "ignore";

export type ReplyOutcome =
  /** Nothing to say: not a review's thread, talk from someone who may not decide, a repeated delivery, talk after a decision, Ignore. */
  | { kind: "ignored" }
  | { kind: "review"; outcome: DecisionOutcome }
  | { kind: "flow"; outcome: FlowDecisionOutcome }
  | { kind: "question"; question: ReplyQuestion }
  /** A question's button that names no reply of the clicker's. */
  | { kind: "unknown_question" }
  | { kind: "answered_already" }
  /** The clicker may no longer decide what the question was about. */
  | { kind: "no_longer_allowed" }
  /** An approve or reject from someone of another organisation than the run's or request's (a Slack Connect channel). */
  | { kind: "other_organisation"; of: "review" | "flow" }
  /** An approve or reject in a thread where a flow request and a crew review both wait (a run started on the request's message): never a guess. */
  | { kind: "both_waiting" };

/** How long a reply is remembered (repeated deliveries come within minutes; questions are answered or forgotten by then). */
export const THREAD_REPLY_RETENTION_MS = 7 * 24 * 3600_000;
const CLEANUP_EVERY_MS = 3600_000;
/** At most this many reviews of a thread are read to find the one a reply is about. */
const THREAD_REVIEWS = 50;
/** At most this many reviews are offered as buttons when a reply could mean several. */
export const WHICH_REVIEWS_SHOWN = 5;
const EXCERPT_MAX = 200;

/** The value of a "which review" button: the reply, and the review and round it names. */
export function pickValue(replyId: string, reviewId: string, round: number): string {
  return `${replyId}:${reviewId}:${round}`;
}
function parsePick(value: string): { replyId: string; reviewId: string; round: number } | undefined {
  const [replyId, reviewId, round, ...rest] = value.split(":");
  if (!replyId || !reviewId || rest.length || !/^\d{1,6}$/.test(round ?? "")) return undefined;
  return { replyId, reviewId, round: Number(round) };
}
const IGNORED: ReplyOutcome = { kind: "ignored" };

/** Where a reply was written, and by whom. */
type ReplyPlace = Pick<ThreadReplyIn, "userId" | "channelId" | "threadTs">;
/** What a recorded reply is about (nothing, when unset). */
type ReplyAbout = Partial<Pick<NewThreadReply, "reviewId" | "round" | "flowRequestId">>;

export interface ReplyDecisionDeps {
  db: Sql;
  reviews: Reviews;
  flows?: FlowRequests;
  log: Logger;
  clock?: Clock;
}

export class ReplyDecisions {
  private readonly sql: Sql;
  private readonly clock: Clock;
  private lastCleanup = 0;

  constructor(private readonly deps: ReplyDecisionDeps) {
    this.sql = deps.db;
    this.clock = deps.clock ?? systemClock;
  }

  /** A reply in a thread: a decision, a question, or nothing at all. */
  async onReply(reply: ThreadReplyIn, ports: AccessPorts): Promise<ReplyOutcome> {
    this.forgetOldReplies();
    const reviews = await reviewsInThread(this.sql, { channelId: reply.channelId, threadTs: reply.threadTs, limit: THREAD_REVIEWS });
    const here = reviews.filter((r) => replyInReviewThread(r, reply));
    const request = this.deps.flows ? await findFlowRequestByMessage(this.sql, reply.channelId, reply.threadTs) : undefined;
    if (!here.length) return request ? this.onFlowReply(request, reply, ports) : IGNORED;
    // A run started on a flow request's message shares its thread: a reply goes to whichever waits.
    if (request?.state === "pending") {
      if (!here.some((r) => r.state === "pending")) return this.onFlowReply(request, reply, ports);
      // Decisive for either: an approve or reject word, or one of the flow's own outcomes ("ship it").
      const decisive = replyIntent(reply.text).kind !== "other" || flowReplyIntent(reply.text, outcomesOf(request)).kind === "outcome";
      if (decisive) return (await this.record(reply, { flowRequestId: request.id })) ? { kind: "both_waiting" } : IGNORED;
    }
    return this.onReviewReply(here, reply, ports);
  }

  private async onReviewReply(inThread: ReviewWithExecution[], reply: ThreadReplyIn, ports: AccessPorts): Promise<ReplyOutcome> {
    // Only the reviews shown before the reply was written: one written earlier (Slack delivering it late,
    // after a retry) was about what the thread showed then, not about a round or task posted since.
    const reviews = inThread.filter((r) => !!r.messageTs && tsNotAfter(r.messageTs, reply.ts));
    if (!reviews.length) return IGNORED;
    const pending = reviews.filter((r) => r.state === "pending");
    // Several waiting in one thread (tasks in parallel, runs started in it): the newest, as the question says.
    const target = pending.reduce<ReviewWithExecution | undefined>((best, r) => (!best || r.createdAt > best.createdAt ? r : best), undefined);
    const intent = replyIntent(reply.text);
    if (!target) {
      // Decided already: talk in the thread is not for the bot, but an approve or reject is answered.
      const latest = reviews[0]!;
      if (intent.kind === "other" || !(await replyMayDecide(ports, latest, reply))) return IGNORED;
      if (!(await this.record(reply, { reviewId: latest.id, round: latest.round }))) return IGNORED;
      return { kind: "review", outcome: { kind: "already_decided", review: latest } };
    }
    const asked = intent.kind === "other";
    if (intent.kind !== "other" && pending.length > 1) {
      // An approve or reject that could mean several reviews is never a guess: which one?
      const which = await this.which(pending, reply, ports, intent);
      if (which) return which;
    }
    if (!(await replyMayDecide(ports, target, reply))) {
      // Talk is not for the bot; an approve or reject is told why it was not taken, as a click would be.
      if (asked) return IGNORED;
      return this.refused(reply, { reviewId: target.id, round: target.round }, await reviewRefusal(ports, target, reply.userId));
    }
    const recorded = await this.record(reply, { text: asked ? reply.text : null, reviewId: target.id, round: target.round });
    if (!recorded) return IGNORED;
    if (asked)
      return {
        kind: "question",
        question: { kind: "review", replyId: recorded.id, taskName: target.taskName, round: target.round, otherPending: pending.length - 1, cut: reply.cut },
      };
    return this.decide(target.id, reply.userId, intent.kind === "approve", intent.kind === "reject" ? intent.feedback : "");
  }

  /** The decide call a click makes, as a reply's. */
  private async decide(reviewId: string, userId: string, approve: boolean, feedback: string): Promise<ReplyOutcome> {
    return { kind: "review", outcome: await this.deps.reviews.decide({ reviewId, userId, approve, feedback, via: "reply" }) };
  }

  /** The decide call a click on a flow request's message makes, as a reply's in its thread. */
  private async decideFlow(request: FlowRequest, place: ReplyPlace, outcomeIndex: number | undefined, feedback: string): Promise<ReplyOutcome> {
    const { userId, channelId, threadTs: messageTs } = place;
    return { kind: "flow", outcome: await this.deps.flows!.decide({ requestId: request.id, userId, outcomeIndex, feedback, channelId, messageTs, via: "reply" }) };
  }

  /** A question's button deciding a review: still waiting in the round asked about, and the clicker still allowed to decide it. */
  private async decideAsked(found: ReviewWithExecution, round: number | null, place: ReplyPlace, ports: AccessPorts, approve: boolean, feedback: string): Promise<ReplyOutcome> {
    if (found.state !== "pending" || found.round !== round) return { kind: "review", outcome: { kind: "already_decided", review: found } };
    if (!(await replyMayDecide(ports, found, place))) return { kind: "no_longer_allowed" };
    return this.decide(found.id, place.userId, approve, approve ? "" : feedback);
  }

  /**
   * An approve or reject where several reviews wait in the reply's thread, of which the replier may
   * decide (newest first): one, which it decides; several, the question naming each; none, undefined
   * (the newest's refusal is told).
   */
  private async which(
    pending: ReviewWithExecution[],
    reply: ThreadReplyIn,
    ports: AccessPorts,
    intent: Exclude<ReplyIntent, { kind: "other" }>,
  ): Promise<ReplyOutcome | undefined> {
    const theirs: ReviewWithExecution[] = [];
    for (const review of pending) if (await replyMayDecide(ports, review, reply)) theirs.push(review);
    if (theirs.length === 0) return undefined;
    const approve = intent.kind === "approve";
    const feedback = intent.kind === "reject" ? intent.feedback : "";
    if (theirs.length === 1) {
      const only = theirs[0]!;
      if (!(await this.record(reply, { reviewId: only.id, round: only.round }))) return IGNORED;
      return this.decide(only.id, reply.userId, approve, feedback);
    }
    // A reject without its feedback is answered as when one review waits, before any question (once per Slack message).
    if (!approve && isBlank(feedback)) return (await this.record(reply)) ? { kind: "review", outcome: { kind: "feedback_required" } } : IGNORED;
    const recorded = await this.record(reply, { text: reply.text });
    if (!recorded) return IGNORED;
    const shown = theirs.slice(0, WHICH_REVIEWS_SHOWN);
    return {
      kind: "question",
      question: {
        kind: "which",
        replyId: recorded.id,
        approve,
        reviews: shown.map((r) => ({
          value: pickValue(recorded.id, r.id, r.round),
          taskName: r.taskName,
          round: r.round,
          crewName: r.execution.crewName,
          // Cut before anything reads it: an output can be megabytes.
          excerpt: r.output.slice(0, EXCERPT_MAX),
        })),
        more: theirs.length - shown.length,
        cut: reply.cut,
      },
    };
  }

  /**
   * A button of the "which review" question: the reply must be the clicker's, asked about once, the
   * review one waiting in that reply's thread in the round the button names, and the clicker must
   * still pass the rules of a click. The reply's own words decide (approve, or reject with its feedback).
   */
  async onPick(value: string, choice: "approve" | "reject", userId: string, ports: AccessPorts): Promise<ReplyOutcome> {
    const pick = parsePick(value);
    const row = pick && (await findThreadReply(this.sql, pick.replyId));
    if (!pick || !row || row.userId !== userId || row.text === null || row.reviewId !== null || row.flowRequestId !== null) return { kind: "unknown_question" };
    const intent = replyIntent(row.text);
    const found = await this.deps.reviews.get(pick.reviewId);
    const place = { userId, channelId: row.channelId, threadTs: row.threadTs };
    if (intent.kind !== choice || !found || !replyInReviewThread(found, place)) return { kind: "unknown_question" };
    if (!(await claimThreadReplyAnswer(this.sql, row.id, this.clock.now()))) return { kind: "answered_already" };
    return this.decideAsked(found, pick.round, place, ports, intent.kind === "approve", intent.kind === "reject" ? intent.feedback : "");
  }

  private async onFlowReply(request: FlowRequest, reply: ThreadReplyIn, ports: AccessPorts): Promise<ReplyOutcome> {
    const flows = this.deps.flows!;
    const emit = outcomesOf(request);
    const intent = flowReplyIntent(reply.text, emit);
    const decisive = intent.kind === "outcome" || replyIntent(reply.text).kind !== "other";
    if (request.state !== "pending" && !decisive) return IGNORED;
    if (!(await replyMayAnswerFlowRequest(ports, request, reply))) {
      if (request.state !== "pending" || !decisive) return IGNORED;
      return this.refused(reply, { flowRequestId: request.id }, await flowRefusal(ports, flows, request, reply.userId));
    }
    const asked = request.state === "pending" && intent.kind === "other";
    const recorded = await this.record(reply, { text: asked ? reply.text : null, flowRequestId: request.id });
    if (!recorded) return IGNORED;
    if (request.state !== "pending") return { kind: "flow", outcome: { kind: "already_decided", request } };
    if (intent.kind === "other") {
      const choices = flowReplyChoices(emit);
      return {
        kind: "question",
        question: {
          kind: "flow",
          replyId: recorded.id,
          flowName: request.flowName,
          ...(choices.reject !== undefined ? { rejectOutcome: emit[choices.reject]! } : {}),
          ...(choices.approve !== undefined ? { approveOutcome: emit[choices.approve]! } : {}),
          freeText: emit.length === 0,
          outcomes: emit,
          cut: reply.cut,
        },
      };
    }
    return this.decideFlow(request, reply, intent.index, intent.comment);
  }

  /**
   * A button of the private question: "Reject with this" (the reply, kept server-side, as feedback),
   * "Approve" or "Ignore". The question must be the clicker's, answered once, about a review (or
   * request) still waiting in the same round, and the clicker must still pass the rules of a click.
   */
  async onQuestionAnswer(replyId: string, choice: ReplyChoice, userId: string, ports: AccessPorts): Promise<ReplyOutcome> {
    const row = await findThreadReply(this.sql, replyId);
    if (!row || row.userId !== userId || row.text === null) return { kind: "unknown_question" };
    // A "which review" question is answered by its own buttons (onPick), or ignored.
    if (choice !== "ignore" && row.reviewId === null && row.flowRequestId === null) return { kind: "unknown_question" };
    if (!(await claimThreadReplyAnswer(this.sql, row.id, this.clock.now()))) return choice === "ignore" ? IGNORED : { kind: "answered_already" };
    if (choice === "ignore") return IGNORED;
    const place = { userId, channelId: row.channelId, threadTs: row.threadTs };
    if (row.reviewId) {
      const found = await this.deps.reviews.get(row.reviewId);
      return found ? this.decideAsked(found, row.round, place, ports, choice === "approve", row.text) : { kind: "review", outcome: { kind: "unknown_review" } };
    }
    const flows = this.deps.flows;
    const request = row.flowRequestId && flows ? await flows.get(row.flowRequestId) : null;
    if (!flows || !request) return { kind: "flow", outcome: { kind: "unknown_request" } };
    if (request.state !== "pending") return { kind: "flow", outcome: { kind: "already_decided", request } };
    if (!(await replyMayAnswerFlowRequest(ports, request, place))) return { kind: "no_longer_allowed" };
    const emit = outcomesOf(request);
    const choices = flowReplyChoices(emit);
    const index = choice === "approve" ? choices.approve : choices.reject;
    // A flow taking free feedback: "Send this" sends the reply itself.
    if (index === undefined && emit.length > 0) return { kind: "flow", outcome: { kind: "unknown_outcome" } };
    return this.decideFlow(request, place, index, choice === "approve" ? "" : row.text);
  }

  /** A reply deleted in Slack: its words are not kept, nor sent as feedback by a question asked about it before. */
  async onDeleted(channelId: string, ts: string): Promise<void> {
    await forgetDeletedThreadReply(this.sql, { channelId, ts }, this.clock.now());
  }

  /** A reply its author edited (its text already cut): a question still open about it sends the new words. */
  async onEdited(channelId: string, ts: string, userId: string, text: string): Promise<void> {
    await editThreadReplyText(this.sql, { channelId, ts, userId, text });
  }

  /** A refused approve or reject: told once per Slack message (a repeated delivery says nothing); undefined: nothing to tell. */
  private async refused(reply: ThreadReplyIn, about: ReplyAbout, refusal: ReplyOutcome | undefined): Promise<ReplyOutcome> {
    if (!refusal || !(await this.record(reply, about))) return IGNORED;
    return refusal;
  }

  /** Records the reply once per Slack message (undefined: recorded already), with what it is about and, for a question, its text. */
  private record(reply: ThreadReplyIn, about: ReplyAbout & { text?: string | null } = {}) {
    const { channelId, ts, threadTs, userId } = reply;
    return recordThreadReply(this.sql, { channelId, ts, threadTs, userId, text: null, reviewId: null, round: null, flowRequestId: null, ...about }, this.clock.now());
  }

  /** About once an hour per process, replies older than the retention are deleted (in the background). */
  private forgetOldReplies(): void {
    const now = this.clock.now().getTime();
    if (now - this.lastCleanup < CLEANUP_EVERY_MS) return;
    this.lastCleanup = now;
    deleteThreadRepliesBefore(this.sql, new Date(now - THREAD_REPLY_RETENTION_MS)).catch((err) => this.deps.log.warn("could not forget old thread replies", { err }));
  }
}

/** Why someone may not decide a review, in the words of a click's refusal; undefined when it cannot be said (Slack unreachable). */
async function reviewRefusal(ports: AccessPorts, target: ReviewWithExecution, userId: string): Promise<ReplyOutcome | undefined> {
  if (!fromItsWorkspace(ports, target.execution)) return { kind: "other_organisation", of: "review" };
  const gate = await reviewerGate(ports, target, userId).catch(() => undefined);
  return gate && !gate.allowed ? { kind: "review", outcome: { kind: "not_allowed", who: gate.who } } : undefined;
}

/** Why someone may not answer a flow request; undefined when it cannot be said. */
async function flowRefusal(ports: AccessPorts, flows: FlowRequests, request: FlowRequest, userId: string): Promise<ReplyOutcome | undefined> {
  if (!fromItsWorkspace(ports, request)) return { kind: "other_organisation", of: "flow" };
  const may = await ports.flows?.mayDecide(request, userId).catch(() => undefined);
  return may === false ? { kind: "flow", outcome: flows.notAllowed(request) } : undefined;
}

/** Whether Slack message ts `a` ("1700000000.000123") is not after `b`: seconds, then the fraction (a float loses its last digits). */
function tsNotAfter(a: string, b: string): boolean {
  const [aSeconds = "", aMicros = ""] = a.split(".");
  const [bSeconds = "", bMicros = ""] = b.split(".");
  if (aSeconds !== bSeconds) return Number(aSeconds) < Number(bSeconds);
  // The fractions as decimals: digits of one length compare as text.
  const length = Math.max(aMicros.length, bMicros.length);
  return aMicros.padEnd(length, "0") <= bMicros.padEnd(length, "0");
}
