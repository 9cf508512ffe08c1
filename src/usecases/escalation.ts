// Escalation and reassignment of a pending review (issue #14). Both are stored on the Review row
// (claimed with conditional writes, so replicas and restarts agree), audited, announced in the run's
// thread (an outbox run.message in the same transaction), and shown on the review message. Who they let decide is read back
// by the reviewer gate (reviewer-rules.ts reviewGrants).
import crypto from "node:crypto";
import type { ReviewerRules as RulesConfig } from "../config/config.js";
import type { Logger } from "../log/log.js";
import type { Db } from "../store/db/database.js";
import { claimEscalation, claimReassignment, findReviewWithExecution } from "../store/reviews.js";
import { inTransaction, runnerOf, type Sql, sqlOf } from "../store/sql.js";
import type { Audit } from "./audit.js";
import { type Clock, type Execution, type Outbox, type Review, type RunNotice, systemClock } from "./ports.js";

export interface EscalationDeps {
  db: Db;
  /** Where the Slack effects it asks for are enqueued (in the transaction of the claim). */
  outbox: Outbox;
  audit: Audit;
  log: Logger;
  clock?: Clock;
  /** The crew's escalation list (escalateTo / CREW_ESCALATE_TO); undefined: none. */
  escalateToOf: (crewName: string) => RulesConfig | undefined;
  /** REVIEW_REMINDER_MAX: escalation follows the reminder that reaches it. */
  reminderMax: number;
}

export type ReassignOutcome = { kind: "reassigned"; review: Review } | { kind: "not_pending" } | { kind: "unknown_review" } | { kind: "same_person" };

export class ReviewEscalations {
  private readonly clock: Clock;
  private readonly sql: Sql;

  constructor(private readonly deps: EscalationDeps) {
    this.clock = deps.clock ?? systemClock;
    this.sql = sqlOf(deps.db);
  }

  /**
   * After a reminder: the last one (the count reached REVIEW_REMINDER_MAX) escalates the review, once.
   * The claim, its audit record and its Slack effects are one transaction.
   */
  async afterReminder(execution: Execution, review: Review, remindersSent: number): Promise<boolean> {
    if (remindersSent < this.deps.reminderMax) return false;
    const rules = this.deps.escalateToOf(execution.crewName);
    const ids = rules ? [...rules.users, ...rules.usergroups] : [];
    if (ids.length === 0) return false;
    const now = this.clock.now();
    const escalated = await inTransaction(this.sql, async (tx) => {
      const claimed = await claimEscalation(tx, review.id, { to: ids.join(","), now });
      if (!claimed) return null;
      await this.deps.audit.record(
        {
          executionId: execution.id,
          kind: "escalation",
          taskKey: review.taskKey,
          round: review.round,
          actor: "crewline:escalation",
          outputHash: review.outputHash,
          msToDecision: Math.max(0, now.getTime() - review.createdAt.getTime()),
          detail: { reviewId: review.id, escalatedTo: ids, remindersSent },
        },
        tx,
      );
      await this.announce(tx, execution, claimed, { kind: "escalation", ids, taskName: review.taskName, round: review.round, reminders: remindersSent });
      return claimed;
    });
    if (!escalated) return false;
    this.deps.outbox.nudge();
    return true;
  }

  /**
   * Hands a pending review to `to` (the caller checked that `by` may decide it). The claim, its audit
   * record and its Slack effects are one transaction.
   */
  async reassign(p: { reviewId: string; by: string; to: string; reason: string }): Promise<ReassignOutcome> {
    const found = await findReviewWithExecution(this.sql, p.reviewId);
    if (!found) return { kind: "unknown_review" };
    const { execution, ...review } = found;
    if (review.state !== "pending") return { kind: "not_pending" };
    if (review.reassignedTo === p.to) return { kind: "same_person" };
    const now = this.clock.now();
    const reason = p.reason.trim().slice(0, 500);
    const reassigned = await inTransaction(this.sql, async (tx) => {
      const claimed = await claimReassignment(tx, review.id, { to: p.to, by: p.by, reason: reason || null, now });
      if (!claimed) return null;
      await this.deps.audit.record(
        {
          executionId: execution.id,
          kind: "reassignment",
          taskKey: review.taskKey,
          round: review.round,
          actor: p.by,
          feedback: reason || null,
          outputHash: review.outputHash,
          detail: { reviewId: review.id, reassignedTo: p.to, previously: review.reassignedTo ?? null },
        },
        tx,
      );
      await this.announce(tx, execution, claimed, { kind: "reassignment", to: p.to, by: p.by, taskName: review.taskName, round: review.round, ...(reason ? { reason } : {}) });
      return claimed;
    });
    if (!reassigned) return { kind: "not_pending" };
    this.deps.outbox.nudge();
    return { kind: "reassigned", review: reassigned };
  }

  /** The thread reply, then the review message showing it (both outbox effects, retried until done). */
  private async announce(tx: Sql, execution: Execution, review: Review, notice: RunNotice): Promise<void> {
    await this.deps.outbox.add(runnerOf(tx), threadNoticeEffect(execution, notice));
    await this.deps.outbox.add(runnerOf(tx), { kind: "review.show", subjectId: review.id });
  }
}

/** The outbox effect of a reply in a run's thread: each one is its own message (its caller claimed the event that calls for it). */
export function threadNoticeEffect(execution: Execution, notice: RunNotice) {
  return { kind: "run.message", subjectId: execution.id, part: crypto.randomUUID(), payload: { notice } } as const;
}
