// A pending review as a decision request (issue #14), over the decision core (decisions/core.ts) as
// FlowRequests has a flow request: its reminders (after REVIEW_REMINDER_MINUTES, then twice as long
// each time, up to REVIEW_REMINDER_MAX, mentioning who may decide), the escalation after the last one
// (the crew's escalateTo), its reassignment, and its deadline (decideWithin / onTimeout), stamped on
// the row when the round becomes a review and taken once when it passes: reject and approve go to the
// crew through Reviews.decide (a click's path, without the reviewer gate), remind posts a reminder
// counted as one. Who they let decide is read back by the reviewer gate (reviewer-rules.ts reviewGrants).
import type { ReviewerRules as RulesConfig, TimeoutAction } from "../config/config.js";
import { LIVE_STATES } from "../domain/states.js";
import type { Logger } from "../log/log.js";
import { approvalsOf, remindersDue } from "../store/decision-requests.js";
import { findReviewWithExecution, type ReviewWithExecution, stampDeadline, withExecutions } from "../store/reviews.js";
import type { Sql } from "../store/sql.js";
import type { Audit } from "./audit.js";
import { DEADLINE_ACTOR, DecisionCore, type DecisionTarget } from "./decisions/core.js";
import { crewReviewTarget, deadlineNoticeEffect } from "./decisions/crew-review.js";
import { type ClaimHolder, type Clock, type Execution, type Outbox, type Review, systemClock } from "./ports.js";
import { describeWaitingReviewers } from "./reviewer-rules.js";
import type { Decision, DecisionOutcome } from "./reviews.js";

/** The crew's deadline settings; undefined when its reviews have no deadline. */
export type DeadlineOf = (crewName: string) => { withinMs: number; onTimeout: TimeoutAction } | undefined;

/**
 * The review became pending: stamps its deadline (once; a later promotion keeps the first) and returns
 * the row to show. No write when the crew has no deadline. (Reviews calls it: a function of the setting
 * alone, so Reviews needs no ReviewRequests, which needs Reviews.decide.)
 */
export function deadlineStamper(deadlineOf: DeadlineOf | undefined, clock: Clock = systemClock) {
  return async (execution: Execution, review: Review, tx: Sql): Promise<Review> => {
    const deadline = deadlineOf?.(execution.crewName);
    if (!deadline || review.decideBy) return review;
    const now = clock.now();
    const decideBy = new Date(now.getTime() + deadline.withinMs);
    return (await stampDeadline(tx, review.id, { decideBy, onTimeout: deadline.onTimeout }, now)) ?? review;
  };
}

export type ReassignOutcome = { kind: "reassigned"; review: Review } | { kind: "not_pending" } | { kind: "unknown_review" } | { kind: "same_person" };

export interface ReviewRequestDeps {
  db: Sql;
  /** Where the Slack effects it asks for are enqueued (in the transaction of each claim). */
  outbox: Outbox;
  audit: Audit;
  log: Logger;
  clock?: Clock;
  /** Wait before the first reminder, and reminders per review at most (0: none; the last one escalates). */
  reminders: { afterMs: number; max: number };
  /** Who may decide a crew's reviews (a reminder mentions those who have not approved yet); undefined: anyone, and the starter is mentioned. */
  rulesOf: (crewName: string) => RulesConfig | undefined;
  /** The crew's escalation list (escalateTo / CREW_ESCALATE_TO); undefined: none. */
  escalateToOf: (crewName: string) => RulesConfig | undefined;
  deadlineOf?: DeadlineOf;
  /** Reviews.decide: a deadline's reject and approve go to the crew like a click. */
  decide: (decision: Decision) => Promise<DecisionOutcome>;
  /** A deadline claim whose action never finished (the process died) is retaken after this long (CLAIM_STALE_MS), or once its holder is gone. */
  claimStaleMs?: number;
  /** This replica: named in its claims; the claims of a holder gone are taken over at once. */
  holder?: ClaimHolder;
}

export class ReviewRequests {
  private readonly clock: Clock;
  private readonly core: DecisionCore;
  private readonly target: DecisionTarget<ReviewWithExecution>;
  private reminding: Promise<number> | undefined;
  private deadlining: Promise<number> | undefined;

  constructor(private readonly deps: ReviewRequestDeps) {
    this.clock = deps.clock ?? systemClock;
    this.core = new DecisionCore(deps);
    this.target = crewReviewTarget(deps.escalateToOf);
  }

  /** Sends every reminder that is due; how many were sent. Overlapping calls share one pass. */
  remindDue(): Promise<number> {
    this.reminding ??= this.sendReminders().finally(() => (this.reminding = undefined));
    return this.reminding;
  }

  /** Takes every deadline that has passed; how many actions were taken. Overlapping calls share one pass. */
  deadlinesDue(): Promise<number> {
    this.deadlining ??= this.takeDeadlines().finally(() => (this.deadlining = undefined));
    return this.deadlining;
  }

  /** Takes over only the deadline actions whose holder is gone (a dead replica's), at once. */
  takeOver(): Promise<number> {
    return this.takeDeadlines(true);
  }

  /** After a reminder (a deadline's remind counts as one): the last one escalates the review, once (the decision core). */
  escalate(review: ReviewWithExecution, remindersSent: number): Promise<boolean> {
    return this.core.escalate(this.target, review, remindersSent, this.deps.reminders.max);
  }

  /** Hands a pending review to `to` (the caller checked that `by` may decide it), through the decision core. */
  async reassign(p: { reviewId: string; by: string; to: string; reason: string }): Promise<ReassignOutcome> {
    const found = await findReviewWithExecution(this.deps.db, p.reviewId);
    if (!found) return { kind: "unknown_review" };
    const outcome = await this.core.reassign(this.target, found, p);
    if (outcome.kind !== "reassigned") return outcome;
    const { execution: _, ...review } = outcome.row;
    return { kind: "reassigned", review };
  }

  private async sendReminders(): Promise<number> {
    const settings = this.deps.reminders;
    if (settings.max <= 0) return 0;
    const due = await remindersDue(this.deps.db, "Review", { now: this.clock.now(), ...settings, liveRuns: { states: LIVE_STATES }, limit: 50 });
    return this.core.remind(this.target, await withExecutions(this.deps.db, due), { settings, who: (r) => this.who(r), afterReminder: (r, sent) => this.escalate(r, sent) });
  }

  /**
   * Who a reminder mentions: the crew's named reviewers who have not approved yet (groups stay), or the
   * run's starter when anyone may decide; and whoever the review was handed to, as a flow request's does.
   */
  private async who({ execution, id, reassignedTo }: ReviewWithExecution): Promise<string> {
    const rules = this.deps.rulesOf(execution.crewName);
    const approvers = rules?.users.length || reassignedTo ? (await approvalsOf(this.deps.db, "Review", id)).map((a) => a.userId) : [];
    const named = rules ? describeWaitingReviewers(rules, approvers) : `<@${execution.userId}>`;
    if (!reassignedTo || approvers.includes(reassignedTo) || named.includes(`<@${reassignedTo}>`)) return named;
    return `${named}, <@${reassignedTo}>`;
  }

  private async takeDeadlines(takeoversOnly = false): Promise<number> {
    const due = await this.core.dueDeadlines("Review", { staleMs: this.deps.claimStaleMs ?? 60_000, takeoversOnly, liveRuns: { states: LIVE_STATES, kickoff: true } });
    if (due.length === 0) return 0;
    return this.core.takeDeadlines(this.target, await withExecutions(this.deps.db, due), {
      settings: this.deps.reminders,
      plan: (review, now) => {
        const action = (review.onTimeout ?? "remind") as TimeoutAction;
        // The crew's setting; a crew no longer configured: the time the review had.
        const withinMs = this.deps.deadlineOf?.(review.execution.crewName)?.withinMs ?? Math.max(0, (review.decideBy ?? now).getTime() - review.createdAt.getTime());
        if (action === "remind") return { kind: "remind", withinMs, detail: (claimed) => ({ decideBy: review.decideBy?.toISOString(), remindersSent: claimed.remindersSent }) };
        return {
          kind: "decide",
          action,
          withinMs,
          // Reviews.decide records the decision with its audit row; a decision that did not reach the crew is
          // not retried by the deadline: a person decides it now (the thread says so).
          decide: async (feedback) => {
            const outcome = await this.deps.decide({ reviewId: review.id, userId: DEADLINE_ACTOR, approve: action === "approve", feedback, byDeadline: true });
            if (outcome.kind === "already_decided") return { beaten: true };
            return outcome.kind === "resume_failed" ? { notice: deadlineNoticeEffect(review, { kind: "not_delivered", action, message: outcome.message }) } : {};
          },
        };
      },
      who: (r) => this.who(r),
      afterReminder: (r, sent) => this.escalate(r, sent),
    });
  }
}
