// A workspace's rows across aggregates, for when the app is removed from it (src/usecases/workspaces.ts
// says what happens to them; this module writes it): its unfinished runs, its open reviews, its open
// flow requests and its Slack effects still due, all in one transaction.
import { inTransaction, type Sql } from "./sql.js";

/** A database, a runner or a Kysely handle (possibly one transaction's). */
type On = Sql;

/**
 * Which workspace: one team, or every team of a Grid org that has no install of its own. `namedTeams`:
 * teams Slack named as the org's (the uninstall event's), beside those its runs were started in.
 */
export type WorkspaceMatch = { teamId: string } | { enterpriseId: string; exceptTeams: string[]; namedTeams?: string[] };

type Move = { from: readonly string[]; to: string };

export interface WorkspaceClosing {
  runs: Move;
  reviews: Move;
  /** Flow requests belong to a team (a flow's `team:`): an org's closing takes those of the teams known to be the org's. */
  flowRequests: Move;
  /** Why the runs ended and the flow requests closed (the runs' error, the requests' answerMessage). */
  note: string;
  /** Why its Slack effects still due were given up. */
  effectsError: string;
}

/** The ids of the workspace's runs, as a subquery. */
function runsOf(sql: Sql, match: WorkspaceMatch) {
  const runs = sql.selectFrom("Execution").select("Execution.id");
  if ("teamId" in match) return runs.where("Execution.teamId", "=", match.teamId);
  const org = runs.where("Execution.enterpriseId", "=", match.enterpriseId);
  return match.exceptTeams.length ? org.where("Execution.teamId", "not in", match.exceptTeams) : org;
}

/**
 * The ids of the workspace's flow requests, as a subquery. An org's are those stored with its id (a
 * flow's `enterprise:`), and, for a flow that names its team only, those of the teams known to be the
 * org's: its runs' teams, the teams Slack named, and the org's own id; never a team with an install of its own.
 */
function flowRequestsOf(sql: Sql, match: WorkspaceMatch) {
  const requests = sql.selectFrom("FlowRequest").select("FlowRequest.id");
  if ("teamId" in match) return requests.where("FlowRequest.teamId", "=", match.teamId);
  const runTeams = sql.selectFrom("Execution").select("Execution.teamId").where("Execution.enterpriseId", "=", match.enterpriseId);
  const org = requests.where((eb) =>
    eb.or([
      eb("FlowRequest.enterpriseId", "=", match.enterpriseId),
      eb("FlowRequest.teamId", "in", runTeams),
      eb("FlowRequest.teamId", "in", [match.enterpriseId, ...(match.namedTeams ?? [])]),
    ]),
  );
  return match.exceptTeams.length ? org.where("FlowRequest.teamId", "not in", match.exceptTeams) : org;
}

/** Closes what the workspace still had going; returns how many runs, reviews and flow requests it closed. */
export function closeWorkspace(on: On, match: WorkspaceMatch, closing: WorkspaceClosing, now: Date): Promise<{ runs: number; reviews: number; flowRequests: number }> {
  return inTransaction(on, async (tx) => {
    const reviews = await tx
      .updateTable("Review")
      // shownState too: the message cannot be updated any more (its effects are given up below).
      .set({ state: closing.reviews.to, shownState: closing.reviews.to, nextReminderAt: null, updatedAt: now })
      .where("state", "in", closing.reviews.from)
      .where("executionId", "in", runsOf(tx, match))
      .executeTakeFirst();
    const runs = await tx
      .updateTable("Execution")
      .set({ state: closing.runs.to, finishedAt: now, error: closing.note, leaseOwner: null, leaseExpiresAt: null, updatedAt: now })
      .where("id", "in", runsOf(tx, match))
      .where("state", "in", closing.runs.from)
      .executeTakeFirst();
    const flowRequests = await tx
      .updateTable("FlowRequest")
      .set({ state: closing.flowRequests.to, answerMessage: closing.note, nextReminderAt: null, updatedAt: now })
      .where("id", "in", flowRequestsOf(tx, match))
      .where("state", "in", closing.flowRequests.from)
      .executeTakeFirst();
    // A request being answered now keeps its call; should the answer not arrive, it opens again with no
    // deadline or reminder left: nothing may answer the flow on its own for a workspace that removed the app.
    await tx
      .updateTable("FlowRequest")
      .set({ decideBy: null, onTimeout: null, nextReminderAt: null, updatedAt: now })
      .where("id", "in", flowRequestsOf(tx, match))
      .where("state", "=", "deciding")
      .execute();
    // Its Slack effects still due can never be performed (no token any more): given up now rather
    // than retried for an hour.
    await tx
      .updateTable("SlackEffect")
      .set({ state: "dead", lastError: closing.effectsError, leaseOwner: null, leaseExpiresAt: null, updatedAt: now })
      .where("state", "=", "due")
      .where((eb) =>
        eb.or([
          eb("subjectId", "in", runsOf(tx, match)),
          eb("subjectId", "in", eb.selectFrom("Review").select("Review.id").where("Review.executionId", "in", runsOf(tx, match))),
          eb("subjectId", "in", flowRequestsOf(tx, match)),
        ]),
      )
      .execute();
    return { runs: Number(runs.numUpdatedRows), reviews: Number(reviews.numUpdatedRows), flowRequests: Number(flowRequests.numUpdatedRows) };
  });
}
