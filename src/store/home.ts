// What App Home reads (usecases/home-for.ts): the pending reviews that may be listed, which of them the
// user approved already, and the user's recent runs. Typed rows, read with Kysely (store/sql.ts).
import type { Selectable } from "kysely";
import { LIVE_STATES } from "../domain/states.js";
import type { DB, Sql } from "./sql.js";

export type ReviewRow = Selectable<DB["Review"]>;
export type ExecutionRow = Selectable<DB["Execution"]>;
/** A pending review with its run. */
export type PendingReview = ReviewRow & { execution: ExecutionRow };

/** How many pending reviews App Home looks at, at most. */
export const HOME_PENDING_LIMIT = 500;

export class HomeStore {
  private readonly sql: Sql;

  constructor(db: Sql) {
    this.sql = db;
  }

  /** Reviews waiting for a decision, shown in Slack, of live runs (of one workspace when given), oldest first. */
  async pendingReviews(opts: { teamId?: string; limit?: number } = {}): Promise<PendingReview[]> {
    let query = this.sql
      .selectFrom("Review")
      .innerJoin("Execution", "Execution.id", "Review.executionId")
      .selectAll("Review")
      .where("Review.state", "=", "pending")
      .where("Review.messageTs", "is not", null)
      .where("Execution.state", "in", [...LIVE_STATES]);
    if (opts.teamId) query = query.where("Execution.teamId", "=", opts.teamId);
    const reviews = await query
      .orderBy("Review.createdAt", "asc")
      .limit(opts.limit ?? HOME_PENDING_LIMIT)
      .execute();
    if (reviews.length === 0) return [];
    const ids = [...new Set(reviews.map((r) => r.executionId))];
    const executions = new Map((await this.sql.selectFrom("Execution").selectAll().where("id", "in", ids).execute()).map((e) => [e.id, e]));
    const pending: PendingReview[] = [];
    for (const review of reviews) {
      const execution = executions.get(review.executionId);
      if (execution) pending.push({ ...review, execution });
    }
    return pending;
  }

  /** Which of these reviews the user approved already (a review may wait for more approvals). */
  async approvedBy(userId: string, reviewIds: string[]): Promise<Set<string>> {
    if (reviewIds.length === 0) return new Set();
    const rows = await this.sql.selectFrom("ReviewApproval").select("reviewId").where("userId", "=", userId).where("reviewId", "in", reviewIds).execute();
    return new Set(rows.map((r) => r.reviewId));
  }

  /** The user's most recent runs (of one workspace when given), newest first. */
  recentRuns(userId: string, opts: { teamId?: string; limit: number }): Promise<ExecutionRow[]> {
    let query = this.sql.selectFrom("Execution").selectAll().where("userId", "=", userId);
    if (opts.teamId) query = query.where("teamId", "=", opts.teamId);
    return query.orderBy("createdAt", "desc").limit(opts.limit).execute();
  }
}
