// Review deadlines (issue #14): a crew may say how long its reviews may wait (decideWithin) and what
// happens then (onTimeout: reject, approve or remind). The deadline is stamped on the Review row when
// the round becomes a review, so the message can show it and restarts keep it. At the deadline the
// decision core (decisions/core.ts) takes the action once: reject and approve go to the crew through
// Reviews.decide (the same path as a click, without the reviewer gate); remind posts a reminder in
// the thread, counted as one of the review's reminders.
import type { TimeoutAction } from "../config/config.js";
import { LIVE_STATES } from "../domain/states.js";
import type { Logger } from "../log/log.js";
import { deadlinesDue } from "../store/decision-requests.js";
import { stampDeadline, withExecutions } from "../store/reviews.js";
import type { Sql } from "../store/sql.js";
import type { Audit } from "./audit.js";
import { DEADLINE_ACTOR, DecisionCore, timeoutFeedback } from "./decisions/core.js";
import { crewReviewTarget } from "./decisions/crew-review.js";
import { type ClaimHolder, type Clock, type DeadlineNotice, type Execution, type Outbox, type Review, systemClock } from "./ports.js";
import type { Decision, DecisionOutcome } from "./reviews.js";

export { DEADLINE_ACTOR, timeoutFeedback };

export interface DeadlinePolicy {
  /** The crew's deadline settings; undefined when its reviews have no deadline. */
  deadlineOf(crewName: string): { withinMs: number; onTimeout: TimeoutAction } | undefined;
  /** Who a reminder mentions (the crew's reviewers), undefined when anyone may decide (the starter is mentioned then). */
  reviewersOf(crewName: string, reviewId?: string): string | undefined | Promise<string | undefined>;
}

/** The outbox effect of a deadline notice: one of each kind per deadline, however often a retaken deadline asks again. */
export function deadlineNoticeEffect(review: Review, notice: DeadlineNotice) {
  return { kind: "review.deadline", subjectId: review.id, part: `${notice.kind}:${review.decideBy?.getTime() ?? 0}`, payload: notice } as const;
}

/**
 * The review became pending: stamps its deadline (once; a later promotion keeps the first) and returns
 * the row to show. No write when the crew has no deadline. (Reviews calls it: a function of the policy
 * alone, so Reviews needs no ReviewDeadlines, which needs Reviews.decide.)
 */
export function deadlineStamper(policy: DeadlinePolicy | undefined, clock: Clock = systemClock) {
  return async (execution: Execution, review: Review, tx: Sql): Promise<Review> => {
    const deadline = policy?.deadlineOf(execution.crewName);
    if (!deadline || review.decideBy) return review;
    const now = clock.now();
    const decideBy = new Date(now.getTime() + deadline.withinMs);
    return (await stampDeadline(tx, review.id, { decideBy, onTimeout: deadline.onTimeout }, now)) ?? review;
  };
}

export interface DeadlineDeps {
  db: Sql;
  /** Where the Slack effects it asks for are enqueued. */
  outbox: Outbox;
  audit: Audit;
  log: Logger;
  clock?: Clock;
  policy?: DeadlinePolicy;
  /** Reviews.decide: reject and approve go to the crew like a click. */
  decide: (decision: Decision) => Promise<DecisionOutcome>;
  /** Called after a reminder was posted for a review, with the number of reminders it has had (escalation hooks in here). */
  afterReminder?: (execution: Execution, review: Review, remindersSent: number) => Promise<unknown>;
  /** A claim whose action never finished (the process died) is retaken after this long (CLAIM_STALE_MS), or once its holder is gone. */
  claimStaleMs?: number;
  /** This replica: named in its claims; the claims of a holder gone are taken over at once. */
  holder?: ClaimHolder;
}

export class ReviewDeadlines {
  private readonly clock: Clock;
  private running: Promise<number> | undefined;

  constructor(private readonly deps: DeadlineDeps) {
    this.clock = deps.clock ?? systemClock;
  }

  /** Takes every deadline that has passed (DecisionLoops calls it); returns how many actions were taken. Overlapping calls share one pass. */
  tick(): Promise<number> {
    this.running ??= this.takeDue().finally(() => (this.running = undefined));
    return this.running;
  }

  /** Takes over only the deadline actions whose holder is gone (a dead replica's), at once. */
  takeOver(): Promise<number> {
    return this.takeDue(true);
  }

  private async takeDue(takeoversOnly = false): Promise<number> {
    const now = this.clock.now();
    // Not claimed yet, or claimed by a process that died before the action finished.
    const staleBefore = new Date(now.getTime() - (this.deps.claimStaleMs ?? 60_000));
    const deadBefore = this.deps.holder?.deadBefore(now);
    const due = await deadlinesDue(this.deps.db, "Review", {
      now,
      staleBefore,
      deadBefore,
      self: this.deps.holder?.replicaId,
      takeoversOnly,
      liveRuns: { states: LIVE_STATES, kickoff: true },
      limit: 50,
    });
    if (due.length === 0) return 0;
    return new DecisionCore(this.deps).takeDeadlines(crewReviewTarget(), await withExecutions(this.deps.db, due), {
      plan: (review, now) => {
        const action = (review.onTimeout ?? "remind") as TimeoutAction;
        // The crew's setting; a crew no longer configured: the time the review had.
        const withinMs = this.deps.policy?.deadlineOf(review.execution.crewName)?.withinMs ?? Math.max(0, (review.decideBy ?? now).getTime() - review.createdAt.getTime());
        if (action === "remind") return { kind: "remind", withinMs, detail: (claimed) => ({ decideBy: review.decideBy?.toISOString(), remindersSent: claimed.remindersSent }) };
        return {
          kind: "decide",
          action,
          withinMs,
          // Reviews.decide records the decision with its audit row; a decision that did not reach the crew is
          // not retried by the deadline: a person decides it now (the thread says so).
          decide: async (feedback) => {
            const outcome = await this.deps.decide({ reviewId: review.id, userId: DEADLINE_ACTOR, approve: action === "approve", feedback, byDeadline: true });
            return outcome.kind === "resume_failed" ? deadlineNoticeEffect(review, { kind: "not_delivered", action, message: outcome.message }) : undefined;
          },
        };
      },
      who: async ({ execution, id }) => (await this.deps.policy?.reviewersOf(execution.crewName, id)) ?? `<@${execution.userId}>`,
      afterReminder: async ({ execution, ...review }, sent) => this.deps.afterReminder?.(execution, review, sent),
    });
  }
}
