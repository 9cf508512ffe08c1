// A workspace that removed the app (app_uninstalled, tokens_revoked): its unfinished runs end as
// "uninstalled" (the watcher polls only unfinished runs, reminders only live ones, callbacks skip
// finished ones), its open reviews and flow requests close, so nothing more is posted or polled for
// it. Other workspaces' rows are not touched. Database only; the Slack side is src/slack/uninstall.ts.
import type { Db } from "../db/database.js";
import type { Prisma } from "../generated/prisma/client.js";
import { executionTransition, flowRequestTransition, reviewTransition } from "./states.js";

export const UNINSTALLED_NOTE = "Crewline was removed from this workspace";

/** Which workspace: one team, or every team of a Grid org that has no install of its own. */
export type WorkspaceMatch = { teamId: string } | { enterpriseId: string; exceptTeams: string[] };

export async function stopWorkspace(db: Db, match: WorkspaceMatch, now: Date): Promise<{ runs: number; reviews: number; flowRequests: number }> {
  const executionWhere: Prisma.ExecutionWhereInput = "teamId" in match ? { teamId: match.teamId } : { enterpriseId: match.enterpriseId, teamId: { notIn: match.exceptTeams } };
  const closing = reviewTransition("workspace_removed");
  const reviews = await db.review.updateMany({
    where: { state: { in: [...closing.from] }, execution: executionWhere },
    // shownState too: the message cannot be updated any more (its effects are given up below).
    data: { state: closing.to, shownState: closing.to, nextReminderAt: null },
  });
  const { from, to } = executionTransition("uninstalled");
  const runs = await db.execution.updateMany({
    where: { ...executionWhere, state: { in: [...from] } },
    data: { state: to, finishedAt: now, error: UNINSTALLED_NOTE, leaseOwner: null, leaseExpiresAt: null },
  });
  const flowRequests =
    "teamId" in match
      ? await db.flowRequest.updateMany({
          where: { teamId: match.teamId, state: { in: [...flowRequestTransition("workspace_removed").from] } },
          data: { state: flowRequestTransition("workspace_removed").to, answerMessage: UNINSTALLED_NOTE, nextReminderAt: null },
        })
      : { count: 0 };
  // Its Slack effects still due can never be performed (no token any more): given up now rather than
  // retried for an hour.
  const runIds = (await db.execution.findMany({ where: executionWhere, select: { id: true } })).map((r) => r.id);
  const reviewIds = (await db.review.findMany({ where: { executionId: { in: runIds } }, select: { id: true } })).map((r) => r.id);
  const flowIds = "teamId" in match ? (await db.flowRequest.findMany({ where: { teamId: match.teamId }, select: { id: true } })).map((r) => r.id) : [];
  await db.slackEffect.updateMany({
    where: { state: "due", subjectId: { in: [...runIds, ...reviewIds, ...flowIds] } },
    data: { state: "dead", lastError: "the app was removed from this workspace", leaseOwner: null, leaseExpiresAt: null },
  });
  return { runs: runs.count, reviews: reviews.count, flowRequests: flowRequests.count };
}
