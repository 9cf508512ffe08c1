// Which bot processes are alive (table Replica), and the rule that lets one take over the claims of
// another that is gone. A replica writes its heartbeat every few seconds while it runs and marks itself
// stopped when it stops (src/usecases/replicas.ts). A claim (SlackEffect.leaseOwner, Execution.leaseOwner)
// may be taken over when its lease ran out, as always, or at once when its owner is known to be gone:
// its heartbeat is older than the dead-after time, or it stopped. An owner with no row (a process of
// an earlier version, or one whose row was pruned) is judged by its lease alone.
// The same rule holds for the claims of decisions ("deciding", claimedBy), of deadlines
// (deadlineClaimedBy) and of stops (Execution.stopClaimedBy): taken over once stale, or at once when
// their holder is gone.
// Every time written here is handed in by the caller, from its injected clock.
import { type Expression, type SqlBool, sql } from "kysely";
import type { Sql } from "./sql.js";

/** The columns that name a claim's holder (a Replica id). */
export type OwnerColumn = "e.leaseOwner" | "Execution.leaseOwner" | "Execution.stopClaimedBy" | `${"Review" | "FlowRequest"}.${"claimedBy" | "deadlineClaimedBy"}`;

/** This replica is alive now (first call: it started). */
export async function beat(db: Sql, id: string, now: Date): Promise<void> {
  await db
    .insertInto("Replica")
    .values({ id, startedAt: now, heartbeatAt: now, stoppedAt: null })
    .onConflict((oc) => oc.column("id").doUpdateSet({ heartbeatAt: now, stoppedAt: null }))
    .execute();
}

/** This replica stopped: whatever it still holds may be taken over at once. */
export async function retire(db: Sql, id: string, now: Date): Promise<void> {
  await db.updateTable("Replica").set({ stoppedAt: now }).where("id", "=", id).execute();
}

/** Forgets replicas silent since `before` (their claims, if any are left, go by their leases). */
export async function pruneReplicas(db: Sql, before: Date): Promise<number> {
  const result = await db.deleteFrom("Replica").where("heartbeatAt", "<", before).executeTakeFirst();
  return Number(result.numDeletedRows);
}

/**
 * The claim in `ownerColumn` is held by a replica known to be gone: its last heartbeat is older than
 * `deadBefore`, or it stopped. (For the claim SQL of the outbox, status polling, decisions, deadlines and stops.)
 * `self`: the replica asking, which is alive whatever its heartbeat says (late when the database is
 * slow): it never takes over its own claims, one of whose calls may still be under way.
 */
export function ownerGone(ownerColumn: OwnerColumn, deadBefore: Date, self?: string): Expression<SqlBool> {
  const notSelf = self ? sql` AND owner.id <> ${self}` : sql``;
  return sql<SqlBool>`EXISTS (SELECT 1 FROM "Replica" AS owner WHERE owner.id = ${sql.ref(ownerColumn)}${notSelf} AND (owner."heartbeatAt" < ${deadBefore} OR owner."stoppedAt" IS NOT NULL))`;
}

/**
 * Takes back every claim, whoever holds it: for a process that owns its database alone (the embedded
 * one, whose data folder it has locked), every claim there is its earlier incarnation's. Outbox rows
 * keep their in-flight mark, so the next attempt knows it may have been cut short mid-call. A deadline
 * claimed and not finished is due again; a stop claimed and not taken by the crew can be asked again
 * (`stopped` lists the states of a run whose stop was taken: their claim stays, it records who stopped it).
 * Decisions left "deciding" are not released here: their recovery asks the crew first (Reviews.recoverAbandoned).
 * Returns how many claims were taken back.
 */
export async function releaseAllClaims(db: Sql, now: Date, stopped: readonly string[] = []): Promise<{ effects: number; polls: number; deadlines: number; stops: number }> {
  const q = db;
  const effects = await q.updateTable("SlackEffect").set({ leaseOwner: null, leaseExpiresAt: null, updatedAt: now }).where("leaseOwner", "is not", null).executeTakeFirst();
  const polls = await q.updateTable("Execution").set({ leaseOwner: null, leaseExpiresAt: null }).where("leaseOwner", "is not", null).executeTakeFirst();
  let deadlines = 0;
  for (const table of ["Review", "FlowRequest"] as const) {
    const released = await q
      .updateTable(table as "Review")
      .set({ deadlineHandledAt: null, deadlineClaimedBy: null, updatedAt: now })
      .where("deadlineHandledAt", "is not", null)
      .where("deadlineDoneAt", "is", null)
      .executeTakeFirst();
    deadlines += Number(released.numUpdatedRows);
  }
  const stops = await q
    .updateTable("Execution")
    .set({ stoppedBy: null, stopClaimedAt: null, stopClaimedBy: null, updatedAt: now })
    .where("stopClaimedAt", "is not", null)
    .$if(stopped.length > 0, (w) => w.where("state", "not in", [...stopped]))
    .executeTakeFirst();
  return { effects: Number(effects.numUpdatedRows), polls: Number(polls.numUpdatedRows), deadlines, stops: Number(stops.numUpdatedRows) };
}
