// Review deadlines (issue #14): a crew may say how long its reviews may wait (decideWithin) and what
// happens then (onTimeout: reject, approve or remind). The deadline is stamped on the Review row when
// the round becomes a review, so the message can show it and restarts keep it. At the deadline the
// action is claimed with a conditional write on the row (deadlineHandledAt), so with several replicas
// and across restarts it is taken once: reject and approve go to the crew through Reviews.decide (the
// same claim → resume → settle path as a click, without the reviewer gate); remind posts a reminder
// in the thread, which counts as one of the review's reminders: its claim, its audit record and its
// Slack effects are one transaction.
import type { TimeoutAction } from "../config/config.js";
import { LIVE_STATES } from "../domain/states.js";
import type { Logger } from "../log/log.js";
import type { Db } from "../store/db/database.js";
import type { SqlRunner } from "../store/db/sql.js";
import { claimDeadline, deadlineDone, reviewsPastDeadline, stampDeadline } from "../store/reviews.js";
import { inTransaction, runnerOf, type Sql, sqlOf } from "../store/sql.js";
import { describeDuration } from "../text/duration.js";
import type { Audit } from "./audit.js";
import { type Clock, type DeadlineNotice, type Execution, type Outbox, type Review, systemClock } from "./ports.js";
import type { Decision, DecisionOutcome } from "./reviews.js";

/** The actor recorded for decisions taken by a deadline (never a Slack user id). */
export const DEADLINE_ACTOR = "crewline:deadline";

/** The feedback the crew (or flow) receives when the deadline decides: "No decision within 30 minutes: rejected automatically by Crewline". */
export function timeoutFeedback(action: "reject" | "approve", withinMs: number): string {
  return `No decision within ${describeDuration(withinMs)}: ${action === "reject" ? "rejected" : "approved"} automatically by Crewline`;
}

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

export interface DeadlineDeps {
  db: Db;
  /** Where the Slack effects it asks for are enqueued. */
  outbox: Outbox;
  audit: Audit;
  log: Logger;
  clock?: Clock;
  policy?: DeadlinePolicy;
  /** Reviews.decide (looked up at call time, so instrumentation applies). */
  decide: (decision: Decision) => Promise<DecisionOutcome>;
  /** Called after a reminder was posted for a review, with the number of reminders it has had (escalation hooks in here). */
  afterReminder?: (execution: Execution, review: Review, remindersSent: number) => Promise<void>;
  /** A claim whose action never finished (the process died) is retaken after this long (CLAIM_STALE_MS). */
  claimStaleMs?: number;
}

export class ReviewDeadlines {
  private readonly clock: Clock;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;

  constructor(private readonly deps: DeadlineDeps) {
    this.clock = deps.clock ?? systemClock;
  }

  /**
   * The review became pending: stamps its deadline (once; a later promotion keeps the first) and
   * returns the row to show. No write when the crew has no deadline.
   */
  readonly stamp = async (execution: Execution, review: Review, tx: Sql | SqlRunner | Db = this.deps.db): Promise<Review> => {
    const deadline = this.deps.policy?.deadlineOf(execution.crewName);
    if (!deadline || review.decideBy) return review;
    const now = this.clock.now();
    const decideBy = new Date(now.getTime() + deadline.withinMs);
    return (await stampDeadline(tx, review.id, { decideBy, onTimeout: deadline.onTimeout }, now)) ?? review;
  };

  /** Takes every deadline that has passed; returns how many actions were taken. Overlapping calls share one pass. */
  tick(): Promise<number> {
    this.running ??= this.takeDue().finally(() => (this.running = undefined));
    return this.running;
  }

  start(intervalMs = 10_000): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick().catch((err) => this.deps.log.warn("review deadlines failed", { err })), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private async takeDue(): Promise<number> {
    const sql = sqlOf(this.deps.db);
    const now = this.clock.now();
    // Not claimed yet, or claimed by a process that died before the action finished.
    const due = await reviewsPastDeadline(sql, {
      now,
      staleBefore: new Date(now.getTime() - (this.deps.claimStaleMs ?? 60_000)),
      liveStates: LIVE_STATES,
      limit: 50,
    });
    let taken = 0;
    for (const { execution, ...review } of due) {
      const action = (review.onTimeout ?? "remind") as TimeoutAction;
      try {
        if (await (action === "remind" ? this.remind(sql, execution, review, now) : this.decide(sql, execution, review, action, now))) taken++;
      } catch (err) {
        this.deps.log.warn("could not take a review's deadline action", { reviewId: review.id, action, err });
      }
    }
    return taken;
  }

  /** The crew's setting as words ("30 minutes"); a crew no longer configured: the time the review had. */
  private within(execution: Execution, review: Review, now: Date): number {
    return this.deps.policy?.deadlineOf(execution.crewName)?.withinMs ?? Math.max(0, (review.decideBy ?? now).getTime() - review.createdAt.getTime());
  }

  /**
   * Remind, in one transaction: the claim (which counts as one of the review's reminders and finishes
   * the action), its audit record, the reminder in the thread and the message that stops announcing
   * the deadline. Then escalation may follow (afterReminder). Whether this process took it.
   */
  private async remind(sql: Sql, execution: Execution, review: Review, now: Date): Promise<boolean> {
    // Read before the transaction: who to mention may take other reads.
    const who = (await this.deps.policy?.reviewersOf(execution.crewName, review.id)) ?? `<@${execution.userId}>`;
    const { outbox } = this.deps;
    const current = await inTransaction(sql, async (tx) => {
      const claimed = await claimDeadline(tx, review.id, { handledAt: review.deadlineHandledAt, now, remind: true, done: true });
      if (!claimed) return null;
      await this.deps.audit.record(
        {
          executionId: execution.id,
          kind: "deadline",
          taskKey: review.taskKey,
          round: review.round,
          actor: DEADLINE_ACTOR,
          outputHash: review.outputHash,
          msToDecision: Math.max(0, now.getTime() - review.createdAt.getTime()),
          detail: { action: "remind", reviewId: review.id, decideBy: review.decideBy?.toISOString(), remindersSent: claimed.remindersSent },
        },
        tx,
      );
      await outbox.add(runnerOf(tx), deadlineNoticeEffect(review, { kind: "reminder", who, withinMs: this.within(execution, review, now) }));
      // The message stops announcing a deadline that has passed.
      await outbox.add(runnerOf(tx), { kind: "review.show", subjectId: review.id });
      return claimed;
    });
    if (!current) return false;
    outbox.nudge();
    await this.deps.afterReminder?.(execution, current, current.remindersSent);
    return true;
  }

  /**
   * Reject or approve: claimed, then decided through Reviews.decide (which records the decision with
   * its audit row); the action is marked finished, in one transaction with the notice that the
   * decision did not reach the crew when it did not. Whether this process took it.
   */
  private async decide(sql: Sql, execution: Execution, review: Review, action: "reject" | "approve", now: Date): Promise<boolean> {
    if (!(await claimDeadline(sql, review.id, { handledAt: review.deadlineHandledAt, now, remind: false, done: false }))) return false;
    const feedback = timeoutFeedback(action, this.within(execution, review, now));
    const outcome = await this.deps.decide({ reviewId: review.id, userId: DEADLINE_ACTOR, approve: action === "approve", feedback, byDeadline: true });
    await inTransaction(sql, async (tx) => {
      // Not retried by the deadline: a person decides it now (the thread says so).
      if (outcome.kind === "resume_failed") await this.deps.outbox.add(runnerOf(tx), deadlineNoticeEffect(review, { kind: "not_delivered", action, message: outcome.message }));
      await deadlineDone(tx, review.id, this.clock.now());
    });
    if (outcome.kind === "resume_failed") this.deps.outbox.nudge();
    return true;
  }
}
