// ThreadReply rows: a reply in a review's (or flow request's) thread from someone who may decide it,
// recorded once per Slack message (channel, ts), so that a second delivery of the same message does
// nothing; with the reply's text when the replier was asked what to do with it.
import crypto from "node:crypto";
import type { Selectable } from "kysely";
import { isUuid } from "./ids.js";
import type { DB, Sql } from "./sql.js";

export type ThreadReplyRow = Selectable<DB["ThreadReply"]>;

type On = Sql;

export interface NewThreadReply {
  channelId: string;
  ts: string;
  threadTs: string;
  userId: string;
  text: string | null;
  reviewId: string | null;
  round: number | null;
  flowRequestId: string | null;
}

/** Records the reply once; undefined when this message was recorded already (a repeated delivery). */
export async function recordThreadReply(on: On, row: NewThreadReply, now: Date): Promise<ThreadReplyRow | undefined> {
  return on
    .insertInto("ThreadReply")
    .values({ id: crypto.randomUUID(), ...row, createdAt: now })
    .onConflict((oc) => oc.columns(["channelId", "ts"]).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export async function findThreadReply(on: On, id: string): Promise<ThreadReplyRow | undefined> {
  if (!isUuid(id)) return undefined;
  return on.selectFrom("ThreadReply").selectAll().where("id", "=", id).executeTakeFirst();
}

/** Marks the question about the reply answered, once: false when it was answered already. */
export async function claimThreadReplyAnswer(on: On, id: string, now: Date): Promise<boolean> {
  const res = await on.updateTable("ThreadReply").set({ answeredAt: now }).where("id", "=", id).where("answeredAt", "is", null).executeTakeFirst();
  return Number(res.numUpdatedRows) === 1;
}

/** A reply deleted in Slack: its words are forgotten and its question can no longer be answered (the row stays, against a repeated delivery). */
export async function forgetDeletedThreadReply(on: On, p: { channelId: string; ts: string }, now: Date): Promise<void> {
  await on
    .updateTable("ThreadReply")
    .set((eb) => ({ text: null, answeredAt: eb.fn.coalesce("answeredAt", eb.val(now)) }))
    .where("channelId", "=", p.channelId)
    .where("ts", "=", p.ts)
    .execute();
}

/** A reply edited in Slack by its author: a question not yet answered sends the words as they read now. */
export async function editThreadReplyText(on: On, p: { channelId: string; ts: string; userId: string; text: string }): Promise<void> {
  await on
    .updateTable("ThreadReply")
    .set({ text: p.text })
    .where("channelId", "=", p.channelId)
    .where("ts", "=", p.ts)
    .where("userId", "=", p.userId)
    .where("text", "is not", null)
    .where("answeredAt", "is", null)
    .execute();
}

/** Forgets replies recorded before `before` (no delivery is repeated that late, and questions are answered by then). */
export async function deleteThreadRepliesBefore(on: On, before: Date): Promise<number> {
  const res = await on.deleteFrom("ThreadReply").where("createdAt", "<", before).executeTakeFirst();
  return Number(res.numDeletedRows);
}
