// Reminders for reviews nobody has decided: after REVIEW_REMINDER_MINUTES the run's thread gets a
// reply mentioning who may decide (or the run's starter when the crew has no reviewer rules), then
// again after twice as long, and so on up to REVIEW_REMINDER_MAX. The schedule lives on the Review
// row (remindersSent, nextReminderAt) and each reminder is claimed once by the decision core
// (decisions/core.ts), as a flow request's are.
import type { ReviewerRules as RulesConfig } from "../config/config.js";
import { LIVE_STATES } from "../domain/states.js";
import type { Logger } from "../log/log.js";
import { approvalsOf, remindersDue } from "../store/decision-requests.js";
import { withExecutions } from "../store/reviews.js";
import type { Sql } from "../store/sql.js";
import { DecisionCore } from "./decisions/core.js";
import { crewReviewTarget } from "./decisions/crew-review.js";
import { type Clock, type Execution, type Outbox, type Review, systemClock } from "./ports.js";
import { describeWaitingReviewers } from "./reviewer-rules.js";

export interface ReminderSettings {
  /** Wait before the first reminder. */
  afterMs: number;
  /** Reminders per review at most; 0 disables them. */
  max: number;
}

export interface ReminderDeps {
  db: Sql;
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

export class ReviewReminders {
  private readonly clock: Clock;
  private running: Promise<number> | undefined;

  constructor(
    private readonly deps: ReminderDeps,
    private readonly settings: ReminderSettings,
  ) {
    this.clock = deps.clock ?? systemClock;
  }

  /** Sends every reminder that is due (DecisionLoops calls it); returns how many were sent. Overlapping calls share one pass. */
  tick(): Promise<number> {
    this.running ??= this.sendDue().finally(() => (this.running = undefined));
    return this.running;
  }

  private async sendDue(): Promise<number> {
    const { afterMs, max } = this.settings;
    if (max <= 0) return 0;
    const due = await remindersDue(this.deps.db, "Review", { now: this.clock.now(), afterMs, max, liveRuns: { states: LIVE_STATES }, limit: 50 });
    return new DecisionCore(this.deps).remind(crewReviewTarget(), await withExecutions(this.deps.db, due), {
      settings: this.settings,
      who: async ({ execution, id }) =>
        (await reviewersStillWaited(this.deps.db, this.deps.rulesOf?.(execution.crewName), id)) ?? this.deps.reviewersOf(execution.crewName) ?? `<@${execution.userId}>`,
      // The last reminder may escalate the review (escalation.ts): its mention follows the reminder.
      afterReminder: async ({ execution, ...review }, sent) => this.deps.afterReminder?.(execution, review, sent),
    });
  }
}

/** A review's named reviewers who have not approved it yet (groups stay), as mentions; undefined when nobody approved or the rules name no user. */
export async function reviewersStillWaited(db: Sql, rules: RulesConfig | undefined, reviewId: string): Promise<string | undefined> {
  if (!rules?.users.length) return undefined;
  const approvers = (await approvalsOf(db, "Review", reviewId)).map((a) => a.userId);
  return approvers.length ? describeWaitingReviewers(rules, approvers) : undefined;
}
