// WebhookEvent rows: the durable inbox of crew callbacks, recorded before the HTTP answer and
// processed after (a delivery received twice is stored once).
import crypto from "node:crypto";
import type { Selectable } from "kysely";
import { FINISHED_STATES } from "../domain/states.js";
import type { Db } from "./db/database.js";
import type { SqlRunner } from "./db/sql.js";
import { type DB, type Sql, sqlOf } from "./sql.js";

export type WebhookEventRow = Selectable<DB["WebhookEvent"]>;

type Handle = Sql | SqlRunner | Db;

/** Stores a callback unless the same delivery was stored before; returns its id when new. */
export async function insertWebhookEvent(db: Handle, e: { executionId: string; kind: string; dedupeKey: string; payload: unknown }, now: Date): Promise<string | undefined> {
  const row = await sqlOf(db)
    .insertInto("WebhookEvent")
    .values({ id: crypto.randomUUID(), executionId: e.executionId, kind: e.kind, dedupeKey: e.dedupeKey, payload: JSON.stringify(e.payload), receivedAt: now })
    .onConflict((oc) => oc.columns(["executionId", "dedupeKey"]).doNothing())
    .returning("id")
    .executeTakeFirst();
  return row?.id;
}

/** A recorded event without its body (which may be megabytes: read it only when it is not at hand). */
export type WebhookEventHead = Pick<WebhookEventRow, "id" | "executionId" | "kind" | "processedAt" | "attempts">;

/** Counts a processing attempt and returns the event, without its body. */
export async function startWebhookEventAttempt(db: Handle, id: string): Promise<WebhookEventHead | null> {
  return (
    (await sqlOf(db)
      .updateTable("WebhookEvent")
      .set((eb) => ({ attempts: eb("attempts", "+", 1) }))
      .where("id", "=", id)
      .returning(["id", "executionId", "kind", "processedAt", "attempts"])
      .executeTakeFirst()) ?? null
  );
}

/** A recorded event's body. */
export async function webhookEventPayload(db: Handle, id: string): Promise<unknown> {
  const row = await sqlOf(db).selectFrom("WebhookEvent").select("payload").where("id", "=", id).executeTakeFirst();
  return row?.payload;
}

export async function markWebhookEventProcessed(db: Handle, id: string, now: Date): Promise<void> {
  await sqlOf(db).updateTable("WebhookEvent").set({ processedAt: now, lastError: null }).where("id", "=", id).execute();
}

export async function markWebhookEventFailed(db: Handle, id: string, error: string): Promise<void> {
  await sqlOf(db).updateTable("WebhookEvent").set({ lastError: error }).where("id", "=", id).execute();
}

/** Events recorded at or before `receivedBy` and not processed, with attempts left; oldest first. */
export function unprocessedWebhookEvents(db: Handle, p: { receivedBy: Date; maxAttempts: number; limit: number }): Promise<Pick<WebhookEventRow, "id">[]> {
  return sqlOf(db)
    .selectFrom("WebhookEvent")
    .select("id")
    .where("processedAt", "is", null)
    .where("attempts", "<", p.maxAttempts)
    .where("receivedAt", "<=", p.receivedBy)
    .orderBy("receivedAt")
    .limit(p.limit)
    .execute();
}

/**
 * Deletes the events of runs that have ended (every later callback is refused with 410, so their
 * dedupe keys are no longer needed): processed ones processed before `before`, given-up ones
 * (`maxAttempts` used) received before it. Events of live runs are kept: they stop a redelivery from
 * being applied twice.
 */
export async function pruneWebhookEvents(db: Handle, p: { before: Date; maxAttempts: number }): Promise<number> {
  const result = await sqlOf(db)
    .deleteFrom("WebhookEvent")
    .where((eb) => eb.or([eb("processedAt", "<", p.before), eb.and([eb("processedAt", "is", null), eb("attempts", ">=", p.maxAttempts), eb("receivedAt", "<", p.before)])]))
    .where("executionId", "in", (eb) =>
      eb
        .selectFrom("Execution")
        .select("id")
        .where("state", "in", [...FINISHED_STATES]),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
