// Which bot processes are alive (table Replica), and the rule that lets one take over the claims of
// another that is gone. A replica writes its heartbeat every few seconds while it runs and marks itself
// stopped when it stops (src/usecases/replicas.ts). A claim (SlackEffect.leaseOwner, Execution.leaseOwner)
// may be taken over when its lease ran out, as always, or at once when its owner is known to be gone:
// its heartbeat is older than the dead-after time, or it stopped. An owner with no row (a process of
// an earlier version, or one whose row was pruned) is judged by its lease alone.
// Every time written here is handed in by the caller, from its injected clock.
import { type Expression, type SqlBool, sql } from "kysely";
import type { Db } from "./db/database.js";
import type { SqlRunner } from "./db/sql.js";
import { type Sql, sqlOf } from "./sql.js";

type SqlLike = Sql | SqlRunner | Db;

/** This replica is alive now (first call: it started). */
export async function beat(db: SqlLike, id: string, now: Date): Promise<void> {
  await sqlOf(db)
    .insertInto("Replica")
    .values({ id, startedAt: now, heartbeatAt: now, stoppedAt: null })
    .onConflict((oc) => oc.column("id").doUpdateSet({ heartbeatAt: now, stoppedAt: null }))
    .execute();
}

/** This replica stopped: whatever it still holds may be taken over at once. */
export async function retire(db: SqlLike, id: string, now: Date): Promise<void> {
  await sqlOf(db).updateTable("Replica").set({ stoppedAt: now }).where("id", "=", id).execute();
}

/** Forgets replicas silent since `before` (their claims, if any are left, go by their leases). */
export async function pruneReplicas(db: SqlLike, before: Date): Promise<number> {
  const result = await sqlOf(db).deleteFrom("Replica").where("heartbeatAt", "<", before).executeTakeFirst();
  return Number(result.numDeletedRows);
}

/**
 * The claim in `ownerColumn` is held by a replica known to be gone: its last heartbeat is older than
 * `deadBefore`, or it stopped. (For the claim SQL of the outbox and of status polling.)
 */
export function ownerGone(ownerColumn: "e.leaseOwner" | "Execution.leaseOwner", deadBefore: Date): Expression<SqlBool> {
  return sql<SqlBool>`EXISTS (SELECT 1 FROM "Replica" AS owner WHERE owner.id = ${sql.ref(ownerColumn)} AND (owner."heartbeatAt" < ${deadBefore} OR owner."stoppedAt" IS NOT NULL))`;
}

/**
 * Takes back every claim, whoever holds it: for a process that owns its database alone (the embedded
 * one, whose data folder it has locked), every claim there is its earlier incarnation's. Outbox rows
 * keep their in-flight mark, so the next attempt knows it may have been cut short mid-call.
 * Returns how many claims were taken back.
 */
export async function releaseAllClaims(db: SqlLike, now: Date): Promise<{ effects: number; polls: number }> {
  const q = sqlOf(db);
  const effects = await q.updateTable("SlackEffect").set({ leaseOwner: null, leaseExpiresAt: null, updatedAt: now }).where("leaseOwner", "is not", null).executeTakeFirst();
  const polls = await q.updateTable("Execution").set({ leaseOwner: null, leaseExpiresAt: null }).where("leaseOwner", "is not", null).executeTakeFirst();
  return { effects: Number(effects.numUpdatedRows), polls: Number(polls.numUpdatedRows) };
}
