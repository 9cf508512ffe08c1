// Escalation and reassignment of a pending review (issue #14): the review kind's settings (its
// crew's escalateTo, REVIEW_REMINDER_MAX) over the decision core (decisions/core.ts), which claims,
// audits, announces in the run's thread and shows them. Who they let decide is read back by the
// reviewer gate (reviewer-rules.ts reviewGrants).
import type { ReviewerRules as RulesConfig } from "../config/config.js";
import type { Logger } from "../log/log.js";
import { findReviewWithExecution, type ReviewWithExecution } from "../store/reviews.js";
import type { Sql } from "../store/sql.js";
import type { Audit } from "./audit.js";
import { DecisionCore, type DecisionTarget } from "./decisions/core.js";
import { crewReviewTarget } from "./decisions/crew-review.js";
import type { Clock, Execution, Outbox, Review } from "./ports.js";

export interface EscalationDeps {
  db: Sql;
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
  private readonly sql: Sql;
  private readonly core: DecisionCore;
  private readonly target: DecisionTarget<ReviewWithExecution>;

  constructor(private readonly deps: EscalationDeps) {
    this.sql = deps.db;
    this.core = new DecisionCore(deps);
    this.target = crewReviewTarget(deps.escalateToOf);
  }

  /** After a reminder: the last one (the count reached REVIEW_REMINDER_MAX) escalates the review, once (the decision core). */
  afterReminder(execution: Execution, review: Review, remindersSent: number): Promise<boolean> {
    return this.core.escalate(this.target, { ...review, execution }, remindersSent, this.deps.reminderMax);
  }

  /** Hands a pending review to `to` (the caller checked that `by` may decide it), through the decision core. */
  async reassign(p: { reviewId: string; by: string; to: string; reason: string }): Promise<ReassignOutcome> {
    const found = await findReviewWithExecution(this.sql, p.reviewId);
    if (!found) return { kind: "unknown_review" };
    const outcome = await this.core.reassign(this.target, found, p);
    if (outcome.kind !== "reassigned") return outcome;
    const { execution: _, ...review } = outcome.row;
    return { kind: "reassigned", review };
  }
}
