// Reminders for reviews nobody has decided: after REVIEW_REMINDER_MINUTES the run's thread gets a
// reply mentioning who may decide (or the run's starter when the crew has no reviewer rules), then
// again after twice as long, and so on up to REVIEW_REMINDER_MAX. The schedule lives on the Review
// row (remindersSent, nextReminderAt), so it survives restarts; each reminder is claimed with a
// conditional update on remindersSent that enqueues the reminder in the outbox in the same
// transaction, so with several replicas it is posted once.

import type { ReviewerRules as RulesConfig } from "../config/config.js";
import { LIVE_STATES } from "../domain/states.js";
import type { Logger } from "../log/log.js";
import { approverIds } from "../store/approvals.js";
import type { Db } from "../store/db/database.js";
import { claimReminder, reviewsDueReminder } from "../store/reviews.js";
import { inTransaction, runnerOf, type Sql, sqlOf } from "../store/sql.js";
import { type Clock, type Execution, type Outbox, type Review, systemClock } from "./ports.js";
import { describeWaitingReviewers } from "./reviewer-rules.js";

export interface ReminderSettings {
  /** Wait before the first reminder. */
  afterMs: number;
  /** Reminders per review at most; 0 disables them. */
  max: number;
}

export interface ReminderDeps {
  db: Db;
  outbox: Outbox;
  /** Who may decide a crew's reviews, as mentions; undefined when anyone may. */
  reviewersOf: (crewName: string) => string | undefined;
  /** The crew's rules: when they name users, a reminder leaves out those who already approved the review. */
  rulesOf?: (crewName: string) => RulesConfig | undefined;
  log: Logger;
  clock?: Clock;
  /** Called after a reminder was posted, with the reminders the review has had (escalation.ts). */
  afterReminder?: (execution: Execution, review: Review, remindersSent: number) => Promise<unknown>;
}

/** When reminder number `sent + 1` is due, for a review created at `createdAt`. */
export function reminderDue(createdAt: Date, sent: number, afterMs: number): Date {
  // afterMs, then 2·afterMs later, then 4·afterMs later…: due at createdAt + afterMs·(2^(sent+1) − 1).
  return new Date(createdAt.getTime() + afterMs * (2 ** (sent + 1) - 1));
}

export class ReviewReminders {
  private readonly clock: Clock;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;

  constructor(
    private readonly deps: ReminderDeps,
    private readonly settings: ReminderSettings,
  ) {
    this.clock = deps.clock ?? systemClock;
  }

  /** Sends every reminder that is due; returns how many were sent. Overlapping calls share one pass. */
  tick(): Promise<number> {
    this.running ??= this.sendDue().finally(() => (this.running = undefined));
    return this.running;
  }

  start(intervalMs = 60_000): void {
    if (this.timer || this.settings.max <= 0) return;
    this.timer = setInterval(() => void this.tick().catch((err) => this.deps.log.warn("review reminders failed", { err })), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private async sendDue(): Promise<number> {
    const sql = sqlOf(this.deps.db);
    const { afterMs, max } = this.settings;
    if (max <= 0) return 0;
    const now = this.clock.now();
    const candidates = await reviewsDueReminder(sql, { now, afterMs, max, liveStates: LIVE_STATES, limit: 50 });
    let sent = 0;
    for (const { execution, ...review } of candidates) {
      const count = review.remindersSent + 1;
      const who =
        (await reviewersStillWaited(this.deps.db, this.deps.rulesOf?.(execution.crewName), review.id)) ?? this.deps.reviewersOf(execution.crewName) ?? `<@${execution.userId}>`;
      const { outbox } = this.deps;
      // The claim: only the replica that moves remindersSent from its value enqueues this reminder.
      const claimed = await inTransaction(sql, async (tx) => {
        if (!(await claimReminder(tx, review.id, { sent: count, nextReminderAt: count < max ? reminderDue(review.createdAt, count, afterMs) : null, now }))) return false;
        await outbox.add(runnerOf(tx), { kind: "review.reminder", subjectId: review.id, part: count, payload: { who, waitedMs: now.getTime() - review.createdAt.getTime() } });
        return true;
      });
      if (!claimed) continue;
      sent++;
      // The last reminder may escalate the review (escalation.ts): its mention follows the reminder.
      await this.deps.afterReminder?.(execution, { ...review, remindersSent: count }, count);
    }
    if (sent) this.deps.outbox.nudge();
    return sent;
  }
}

/** A review's named reviewers who have not approved it yet (groups stay), as mentions; undefined when nobody approved or the rules name no user. */
export async function reviewersStillWaited(db: Db | Sql, rules: RulesConfig | undefined, reviewId: string): Promise<string | undefined> {
  if (!rules?.users.length) return undefined;
  const approvers = await approverIds(db, reviewId);
  return approvers.length ? describeWaitingReviewers(rules, approvers) : undefined;
}
