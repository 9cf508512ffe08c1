// The approvals of review rounds in the database (ReviewApproval, unique per review and user), and
// what a review message shows beside its own row (ReviewContext). Decisions are a cold path: the
// Prisma model API is used for them; the context is read for every review message the outbox
// renders, so it takes the driver's SQL (db/sql.ts says why). Every write is safe with several replicas: an approval is one
// INSERT … ON CONFLICT DO NOTHING, and whoever counts enough approvals still has to win the review's
// conditional claim (Reviews.decide) before the crew hears anything.
import type { Db } from "../db/database.js";
import { sqlRunnerFor } from "../db/sql.js";
import { type ApprovalPolicy, latestEdit, type StoredApproval } from "./approvals.js";
import type { Review, ReviewContext } from "./ports.js";

export class ApprovalRows {
  constructor(private readonly db: Db) {}

  /**
   * Records one person's approval; false when they had approved this round already. A later edit by
   * the same person replaces their earlier edit (and a new note their earlier note).
   */
  async add(reviewId: string, userId: string, note: string | null, editedOutput: string | null): Promise<boolean> {
    const { count } = await this.db.reviewApproval.createMany({ data: [{ reviewId, userId, note, editedOutput }], skipDuplicates: true });
    if (count === 1) return true;
    if (note !== null || editedOutput !== null) {
      await this.db.reviewApproval.updateMany({
        where: { reviewId, userId },
        data: { ...(note !== null ? { note } : {}), ...(editedOutput !== null ? { editedOutput, createdAt: new Date() } : {}) },
      });
    }
    return false;
  }

  list(reviewId: string): Promise<StoredApproval[]> {
    return sqlRunnerFor(this.db).query<StoredApproval>(
      `SELECT "userId", note, "editedOutput", "createdAt" FROM "ReviewApproval" WHERE "reviewId" = $1::uuid ORDER BY "createdAt", id`,
      [reviewId],
    );
  }

  /** What the review's message shows besides the row: approvals so far, the edit, the previous round. */
  async context(review: Review, policy: ApprovalPolicy): Promise<ReviewContext> {
    const context: ReviewContext = {};
    // A rejected or closed round shows its decision only; approvals given before a reject stay in the audit trail.
    if (review.state === "pending" || review.state === "deciding" || review.state === "approved") {
      const approvals = await this.list(review.id);
      const edit = latestEdit(approvals);
      if (approvals.length && (policy.required > 1 || edit)) {
        context.approvals = {
          required: policy.required,
          by: approvals.map((a) => ({ userId: a.userId, ...(a.note ? { note: a.note } : {}), edited: a.editedOutput !== null })),
        };
      } else if (policy.required > 1 && review.state === "pending") {
        context.approvals = { required: policy.required, by: [] };
      }
      if (edit) context.edit = { by: edit.userId, text: edit.editedOutput };
    }
    if (review.round > 1) {
      const [previous] = await sqlRunnerFor(this.db).query<Pick<Review, "round" | "output" | "feedback" | "decidedBy" | "decision">>(
        `SELECT round, output, feedback, "decidedBy", decision FROM "Review" WHERE "executionId" = $1::uuid AND "taskKey" = $2 AND round = $3`,
        [review.executionId, review.taskKey, review.round - 1],
      );
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
