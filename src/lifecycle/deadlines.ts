// Review deadlines (issue #14): a crew may say how long its reviews may wait (decideWithin) and what
// happens then (onTimeout: reject, approve or remind). The deadline is stamped on the Review row when
// the round becomes a review, so the message can show it and restarts keep it. At the deadline the
// action is claimed with a conditional write on the row (deadlineHandledAt), so with several replicas
// and across restarts it is taken once: reject and approve go to the crew through Reviews.decide (the
// same claim → resume → settle path as a click, without the reviewer gate); remind posts a reminder
// in the thread, which counts as one of the review's reminders.
import type { TimeoutAction } from "../config.js";
import type { Db } from "../db/database.js";
import { type SqlRunner, sqlRunnerFor } from "../db/sql.js";
import type { Logger } from "../log.js";
import { describeDuration } from "../text/duration.js";
import type { Audit } from "./audit.js";
import { type Clock, type Execution, type Review, type RunMessages, systemClock } from "./ports.js";
import type { Decision, DecisionOutcome } from "./reviews.js";
import { LIVE_STATES } from "./states.js";

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

export interface DeadlineDeps {
  db: Db;
  /** The Slack effects it asks for (enqueued in the outbox). */
  notifier: RunMessages;
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
  readonly stamp = async (execution: Execution, review: Review, tx: SqlRunner = sqlRunnerFor(this.deps.db)): Promise<Review> => {
    const deadline = this.deps.policy?.deadlineOf(execution.crewName);
    if (!deadline || review.decideBy) return review;
    const decideBy = new Date(this.clock.now().getTime() + deadline.withinMs);
    const rows = await tx.query<Review>(`UPDATE "Review" SET "decideBy" = $1, "onTimeout" = $2 WHERE id = $3::uuid AND "decideBy" IS NULL RETURNING *`, [
      decideBy,
      deadline.onTimeout,
      review.id,
    ]);
    return rows[0] ?? (await tx.query<Review>(`SELECT * FROM "Review" WHERE id = $1::uuid`, [review.id]))[0] ?? review;
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
    const { db } = this.deps;
    const now = this.clock.now();
    // Not claimed yet, or claimed by a process that died before the action finished.
    const unclaimed = [{ deadlineHandledAt: null }, { deadlineHandledAt: { lt: new Date(now.getTime() - (this.deps.claimStaleMs ?? 60_000)) } }];
    const due = await db.review.findMany({
      where: {
        state: "pending",
        messageTs: { not: null },
        decideBy: { lte: now },
        deadlineDoneAt: null,
        OR: unclaimed,
        execution: { state: { in: [...LIVE_STATES] }, threadTs: { not: null }, kickoffId: { not: null } },
      },
      include: { execution: true },
      orderBy: { decideBy: "asc" },
      take: 50,
    });
    let taken = 0;
    for (const { execution, ...review } of due) {
      const action = (review.onTimeout ?? "remind") as TimeoutAction;
      // The claim: only the replica (or process) that sets deadlineHandledAt takes the action. A remind
      // counts as one of the review's reminders.
      const { count } = await db.review.updateMany({
        where: { id: review.id, state: "pending", deadlineDoneAt: null, deadlineHandledAt: review.deadlineHandledAt },
        data: { deadlineHandledAt: now, ...(action === "remind" ? { remindersSent: { increment: 1 } } : {}) },
      });
      if (count !== 1) continue;
      try {
        await this.take(execution, review, action, now);
        await db.review.updateMany({ where: { id: review.id }, data: { deadlineDoneAt: this.clock.now() } });
        taken++;
      } catch (err) {
        this.deps.log.warn("could not take a review's deadline action", { reviewId: review.id, action, err });
      }
    }
    return taken;
  }

  private async take(execution: Execution, review: Review, action: TimeoutAction, now: Date): Promise<void> {
    // The crew's setting as words ("30 minutes"); a crew no longer configured: the time the review had.
    const within = this.deps.policy?.deadlineOf(execution.crewName)?.withinMs ?? Math.max(0, (review.decideBy ?? now).getTime() - review.createdAt.getTime());
    if (action === "remind") {
      const who = (await this.deps.policy?.reviewersOf(execution.crewName, review.id)) ?? `<@${execution.userId}>`;
      await this.deps.notifier.postDeadlineNotice(execution, review, { kind: "reminder", who, withinMs: within });
      const current = await this.deps.db.review.findUniqueOrThrow({ where: { id: review.id } });
      await this.deps.audit.record({
        executionId: execution.id,
        kind: "deadline",
        taskKey: review.taskKey,
        round: review.round,
        actor: DEADLINE_ACTOR,
        outputHash: review.outputHash,
        msToDecision: Math.max(0, now.getTime() - review.createdAt.getTime()),
        detail: { action: "remind", reviewId: review.id, decideBy: review.decideBy?.toISOString(), remindersSent: current.remindersSent },
      });
      // The message stops announcing a deadline that has passed.
      await this.deps.notifier.updateReview(execution, current).catch((err) => this.deps.log.warn("could not update review message", { reviewId: review.id, err }));
      await this.deps.afterReminder?.(execution, current, current.remindersSent);
      return;
    }
    const feedback = timeoutFeedback(action, within);
    const outcome = await this.deps.decide({ reviewId: review.id, userId: DEADLINE_ACTOR, approve: action === "approve", feedback, byDeadline: true });
    if (outcome.kind === "resume_failed") {
      // Not retried by the deadline: a person decides it now (the thread says so).
      await this.deps.notifier.postDeadlineNotice(execution, review, { kind: "not_delivered", action, message: outcome.message });
    }
  }
}
