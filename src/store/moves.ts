// A run or a flow request moving out of a channel Slack refused (src/outbox/refused.ts): what is
// recorded about the move, and which messages are to be shown again where it moved.
import type { Sql } from "./sql.js";

/** The run's messages go to `movedTo` from now on; once only (false: it had moved already). */
export async function recordRunMoved(db: Sql, move: { id: string; movedTo: string; movedBecause: string; now: Date }): Promise<boolean> {
  const result = await db
    .updateTable("Execution")
    .set({ movedTo: move.movedTo, movedBecause: move.movedBecause, movedAt: move.now, updatedAt: move.now })
    .where("id", "=", move.id)
    .where("movedTo", "is", null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * The reviews of a run that must be posted where it moved: those never posted (their post was
 * refused or is still to come), and those awaiting a decision on a message in the refused channel,
 * which forget that message (a click on it no longer matches). Returns their ids, oldest first.
 */
export async function reviewsToPostAgain(db: Sql, executionId: string): Promise<string[]> {
  const q = db;
  const rows = await q
    .selectFrom("Review")
    .select("id")
    .where("executionId", "=", executionId)
    .where("channelId", "is", null)
    .where((eb) => eb.or([eb("messageTs", "is", null), eb("state", "in", ["pending", "deciding"])]))
    .orderBy("createdAt")
    .orderBy("round")
    .execute();
  const ids = rows.map((r) => r.id);
  if (ids.length) await q.updateTable("Review").set({ messageTs: null, shownState: null, fileAttached: false }).where("id", "in", ids).execute();
  return ids;
}

/** Whether the effect with this key was given up (dead). */
export async function effectGivenUp(db: Sql, key: string): Promise<boolean> {
  const row = await db.selectFrom("SlackEffect").select("state").where("key", "=", key).executeTakeFirst();
  return row?.state === "dead";
}

/**
 * A flow request moves to `to` (a direct message): its channel becomes that one, the refused one is
 * kept in movedFrom, and its message there is forgotten, to be posted again. Once only.
 */
export async function recordFlowMoved(db: Sql, move: { id: string; to: string; because: string; now: Date }): Promise<boolean> {
  const result = await db
    .updateTable("FlowRequest")
    .set((eb) => ({ movedFrom: eb.ref("channelId"), channelId: move.to, messageTs: null, fileAttached: false, movedBecause: move.because, movedAt: move.now, updatedAt: move.now }))
    .where("id", "=", move.id)
    .where("movedFrom", "is", null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** A review awaiting a decision on a message left in the refused channel forgets that message (to be posted where its run moved); false when it has none there. */
export async function forgetMessageInOldChannel(db: Sql, reviewId: string): Promise<boolean> {
  const result = await db
    .updateTable("Review")
    .set({ messageTs: null, shownState: null, fileAttached: false })
    .where("id", "=", reviewId)
    .where("channelId", "is", null)
    .where("messageTs", "is not", null)
    .where("state", "in", ["pending", "deciding"])
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}
