// What a review message shows beside its own row (ReviewContext): the approvals so far, the edit that
// goes to the crew, and the previous round. Read for every review message the outbox renders; the
// rows come from the store (store/decision-requests.ts, store/reviews.ts).

import { type ApprovalPolicy, latestEdit, type StoredApproval } from "../domain/approvals.js";
import { findRound } from "../store/reviews.js";
import type { Sql } from "../store/sql.js";
import type { FlowRequestContext, Review, ReviewContext } from "./ports.js";

/** The approvals so far and the edit a review's or flow request's message shows: when several approvals are needed, or someone edited. */
export function approvalsShown(approvals: readonly StoredApproval[], required: number): FlowRequestContext {
  const edit = latestEdit(approvals);
  return {
    ...(approvals.length && (required > 1 || edit)
      ? {
          approvals: {
            required,
            by: approvals.map((a) => ({ userId: a.userId, ...(a.note ? { note: a.note } : {}), edited: a.editedOutput !== null, ...(a.outcome ? { outcome: a.outcome } : {}) })),
          },
        }
      : {}),
    ...(edit ? { edit: { by: edit.userId, text: edit.editedOutput } } : {}),
  };
}

export class ApprovalRows {
  constructor(private readonly db: Sql) {}

  /**
   * What the review's message shows besides the row: approvals so far, the edit, the previous round.
   * `approvals`: the review's, as the outbox read them with it.
   */
  async context(review: Review, policy: ApprovalPolicy, approvals: readonly StoredApproval[]): Promise<ReviewContext> {
    let context: ReviewContext = {};
    // A rejected or closed round shows its decision only; approvals given before a reject stay in the audit trail.
    if (review.state === "pending" || review.state === "deciding" || review.state === "approved") {
      context = approvalsShown(approvals, policy.required);
      // Several needed and none given yet: "0 of 2 approvals".
      if (!context.approvals && policy.required > 1 && review.state === "pending") context.approvals = { required: policy.required, by: [] };
    }
    if (review.round > 1) {
      const previous = await findRound(this.db, review.executionId, review.taskKey, review.round - 1);
      if (previous) {
        context.previous = {
          round: previous.round,
          output: previous.output,
          ...(previous.decision === "reject" && previous.feedback ? { feedback: previous.feedback } : {}),
          ...(previous.decision === "reject" && previous.decidedBy ? { decidedBy: previous.decidedBy } : {}),
        };
      }
    }
    return context;
  }
}
