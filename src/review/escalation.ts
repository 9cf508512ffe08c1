// Escalation and reassignment of a pending review (issue #14). Both are stored on the Review row
// (claimed with conditional writes, so replicas and restarts agree), audited, announced in the run's
// thread through the RunMessages, and shown on the review message. Who they let decide is read back
// by the reviewer gate (rules.ts reviewGrants).
import type { ReviewerRules as RulesConfig } from "../config.js";
import type { Db } from "../db/database.js";
import type { Audit } from "../lifecycle/audit.js";
import { type Clock, type Execution, type Review, type RunMessages, systemClock } from "../lifecycle/ports.js";
import type { Logger } from "../log.js";
import { escalationText, reassignmentText } from "../slack/blocks/deadline.js";

export interface EscalationDeps {
  db: Db;
  /** The Slack effects it asks for (enqueued in the outbox). */
  notifier: RunMessages;
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

  constructor(private readonly deps: EscalationDeps) {
    this.clock = deps.clock ?? systemClock;
  }

  /** After a reminder: the last one (the count reached REVIEW_REMINDER_MAX) escalates the review, once. */
  async afterReminder(execution: Execution, review: Review, remindersSent: number): Promise<boolean> {
    if (remindersSent < this.deps.reminderMax) return false;
    const rules = this.deps.escalateToOf(execution.crewName);
    const ids = rules ? [...rules.users, ...rules.usergroups] : [];
    if (ids.length === 0) return false;
    const now = this.clock.now();
    const { count } = await this.deps.db.review.updateMany({
      where: { id: review.id, state: "pending", escalatedAt: null },
      data: { escalatedAt: now, escalatedTo: ids.join(",") },
    });
    if (count !== 1) return false;
    const escalated = await this.deps.db.review.findUniqueOrThrow({ where: { id: review.id } });
    await this.deps.audit.record({
      executionId: execution.id,
      kind: "escalation",
      taskKey: review.taskKey,
      round: review.round,
      actor: "crewline:escalation",
      outputHash: review.outputHash,
      msToDecision: Math.max(0, now.getTime() - review.createdAt.getTime()),
      detail: { reviewId: review.id, escalatedTo: ids, remindersSent },
    });
    await this.announce(execution, escalated, escalationText({ ids, taskName: review.taskName, round: review.round, reminders: remindersSent }));
    return true;
  }

  /** Hands a pending review to `to` (the caller checked that `by` may decide it). */
  async reassign(p: { reviewId: string; by: string; to: string; reason: string }): Promise<ReassignOutcome> {
    const found = await this.deps.db.review.findUnique({ where: { id: p.reviewId }, include: { execution: true } });
    if (!found) return { kind: "unknown_review" };
    const { execution, ...review } = found;
    if (review.state !== "pending") return { kind: "not_pending" };
    if (review.reassignedTo === p.to) return { kind: "same_person" };
    const now = this.clock.now();
    const reason = p.reason.trim().slice(0, 500);
    const { count } = await this.deps.db.review.updateMany({
      where: { id: review.id, state: "pending" },
      data: { reassignedTo: p.to, reassignedBy: p.by, reassignReason: reason || null, reassignedAt: now },
    });
    if (count !== 1) return { kind: "not_pending" };
    const reassigned = await this.deps.db.review.findUniqueOrThrow({ where: { id: review.id } });
    await this.deps.audit.record({
      executionId: execution.id,
      kind: "reassignment",
      taskKey: review.taskKey,
      round: review.round,
      actor: p.by,
      feedback: reason || null,
      outputHash: review.outputHash,
      detail: { reviewId: review.id, reassignedTo: p.to, previously: review.reassignedTo ?? null },
    });
    await this.announce(execution, reassigned, reassignmentText({ to: p.to, by: p.by, taskName: review.taskName, round: review.round, reason }));
    return { kind: "reassigned", review: reassigned };
  }

  /** The thread reply, then the review message showing it (both outbox effects, retried until done). */
  private async announce(execution: Execution, review: Review, text: string): Promise<void> {
    try {
      await this.deps.notifier.postThreadMessage(execution, text);
    } catch (err) {
      this.deps.log.warn("could not post in the run's thread", { reviewId: review.id, err });
    }
    await this.deps.notifier.updateReview(execution, review).catch((err) => this.deps.log.warn("could not update review message", { reviewId: review.id, err }));
  }
}
