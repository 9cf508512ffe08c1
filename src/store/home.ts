// What App Home reads (usecases/home-for.ts): the pending reviews that may be one user's, which of them
// the user approved already, and the user's recent runs. Typed rows, read with Kysely (store/sql.ts).
// The pending reviews are narrowed here to those that may be the user's (homeFor says which crews and
// escalation lists are theirs); the access rules (usecases/access.ts) still decide which are listed.
import type { Selectable } from "kysely";
import { LIVE_STATES } from "../domain/states.js";
import type { DB, Sql } from "./sql.js";

export type ReviewRow = Selectable<DB["Review"]>;
export type ExecutionRow = Selectable<DB["Execution"]>;

/** The columns of a pending review that App Home reads: what the access rules and the Home view need (never its output). */
export type HomeReviewColumns = Pick<
  ReviewRow,
  | "id"
  | "executionId"
  | "taskName"
  | "round"
  | "createdAt"
  | "messageTs"
  | "channelId"
  | "reassignedTo"
  | "reassignedBy"
  | "escalatedAt"
  | "escalatedTo"
  | "decideBy"
  | "onTimeout"
  | "deadlineHandledAt"
>;
/** The columns of its run that App Home reads. */
export type HomeRunColumns = Pick<ExecutionRow, "id" | "crewName" | "userId" | "channelId" | "threadTs" | "teamId" | "enterpriseId">;
/** A pending review with its run, as App Home reads them. */
export type PendingReview = HomeReviewColumns & { execution: HomeRunColumns };

/** How many pending reviews that may be the user's App Home looks at, at most. */
export const HOME_PENDING_LIMIT = 500;

/** Which pending reviews may be one user's: a superset of what the access rules list for them. */
export interface PendingFor {
  userId: string;
  /** Crews with reviewer rules: a run the user started of one of these is not theirs by having started it. */
  ruledCrews: readonly string[];
  /** Crews whose reviewer rules let the user decide. */
  crews: readonly string[];
  /** Escalation lists (escalatedTo) that name the user or a group of theirs. */
  escalatedTo: readonly string[];
}

/** A crew, or an escalation list, of pending reviews, with the workspace of their runs: what the reviewer rules are asked about. */
export interface PendingKinds {
  crews: { crewName: string; teamId: string; enterpriseId: string | null }[];
  escalations: { escalatedTo: string; teamId: string; enterpriseId: string | null }[];
}

export class HomeStore {
  private readonly sql: Sql;

  constructor(db: Sql) {
    this.sql = db;
  }

  /** Reviews waiting for a decision, shown in Slack, of live runs (of one workspace when given). */
  private pending(teamId: string | undefined) {
    let query = this.sql
      .selectFrom("Review")
      .innerJoin("Execution", "Execution.id", "Review.executionId")
      .where("Review.state", "=", "pending")
      .where("Review.messageTs", "is not", null)
      .where("Execution.state", "in", [...LIVE_STATES]);
    if (teamId) query = query.where("Execution.teamId", "=", teamId);
    return query;
  }

  /** The distinct crews and escalation lists (with their runs' workspaces) of the pending reviews (of one workspace when given). */
  async pendingKinds(opts: { teamId?: string } = {}): Promise<PendingKinds> {
    const crews = await this.pending(opts.teamId).select(["Execution.crewName", "Execution.teamId", "Execution.enterpriseId"]).distinct().execute();
    const escalations = await this.pending(opts.teamId)
      .where("Review.escalatedAt", "is not", null)
      .where("Review.escalatedTo", "is not", null)
      .select(["Review.escalatedTo", "Execution.teamId", "Execution.enterpriseId"])
      .distinct()
      .execute();
    return { crews, escalations: escalations.map((e) => ({ ...e, escalatedTo: e.escalatedTo! })) };
  }

  /**
   * Reviews waiting for a decision, shown in Slack, of live runs (of one workspace when given), that may
   * be the user's (`for`): reassigned to them, escalated by one of their lists, of a crew they may decide,
   * or started by them (of a crew without rules); oldest first.
   */
  async pendingReviews(opts: { for: PendingFor; teamId?: string; limit?: number }): Promise<PendingReview[]> {
    const mine = opts.for;
    const rows = await this.pending(opts.teamId)
      .where((eb) => {
        const started = eb("Execution.userId", "=", mine.userId);
        return eb.or([
          eb("Review.reassignedTo", "=", mine.userId),
          mine.ruledCrews.length > 0 ? eb.and([started, eb("Execution.crewName", "not in", [...mine.ruledCrews])]) : started,
          ...(mine.crews.length > 0 ? [eb("Execution.crewName", "in", [...mine.crews])] : []),
          ...(mine.escalatedTo.length > 0 ? [eb.and([eb("Review.escalatedAt", "is not", null), eb("Review.escalatedTo", "in", [...mine.escalatedTo])])] : []),
        ]);
      })
      .select([
        "Review.id",
        "Review.executionId",
        "Review.taskName",
        "Review.round",
        "Review.createdAt",
        "Review.messageTs",
        "Review.channelId",
        "Review.reassignedTo",
        "Review.reassignedBy",
        "Review.escalatedAt",
        "Review.escalatedTo",
        "Review.decideBy",
        "Review.onTimeout",
        "Review.deadlineHandledAt",
        "Execution.crewName as runCrewName",
        "Execution.userId as runUserId",
        "Execution.channelId as runChannelId",
        "Execution.threadTs as runThreadTs",
        "Execution.teamId as runTeamId",
        "Execution.enterpriseId as runEnterpriseId",
      ])
      .orderBy("Review.createdAt", "asc")
      .orderBy("Review.id", "asc")
      .limit(opts.limit ?? HOME_PENDING_LIMIT)
      .execute();
    return rows.map(({ runCrewName, runUserId, runChannelId, runThreadTs, runTeamId, runEnterpriseId, ...review }) => ({
      ...review,
      execution: {
        id: review.executionId,
        crewName: runCrewName,
        userId: runUserId,
        channelId: runChannelId,
        threadTs: runThreadTs,
        teamId: runTeamId,
        enterpriseId: runEnterpriseId,
      },
    }));
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
