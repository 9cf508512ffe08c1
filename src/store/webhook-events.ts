// WebhookEvent rows: the durable inbox of crew callbacks, recorded before the HTTP answer and
// processed after (a delivery received twice is stored once).
import crypto from "node:crypto";
import type { Selectable } from "kysely";
import { FINISHED_STATES } from "../domain/states.js";
import type { DB, Sql } from "./sql.js";

export type WebhookEventRow = Selectable<DB["WebhookEvent"]>;

/**
 * Stores a callback unless the same delivery was stored before; returns its id when new. The body comes
 * as JSON text: the caller has it already (a megabyte-sized body is serialised once, not per use).
 */
export async function insertWebhookEvent(db: Sql, e: { executionId: string; kind: string; dedupeKey: string; payloadJson: string }, now: Date): Promise<string | undefined> {
  const row = await db
    .insertInto("WebhookEvent")
    .values({ id: crypto.randomUUID(), executionId: e.executionId, kind: e.kind, dedupeKey: e.dedupeKey, payload: e.payloadJson, receivedAt: now })
    .onConflict((oc) => oc.columns(["executionId", "dedupeKey"]).doNothing())
    .returning("id")
    .executeTakeFirst();
  return row?.id;
}

/** A recorded event without its body (which may be megabytes: read it only when it is not at hand). */
export type WebhookEventHead = Pick<WebhookEventRow, "id" | "executionId" | "kind" | "processedAt" | "attempts">;

/** Counts a processing attempt and returns the event, without its body. */
export async function startWebhookEventAttempt(db: Sql, id: string): Promise<WebhookEventHead | null> {
  return (
    (await db
      .updateTable("WebhookEvent")
      .set((eb) => ({ attempts: eb("attempts", "+", 1) }))
      .where("id", "=", id)
      .returning(["id", "executionId", "kind", "processedAt", "attempts"])
      .executeTakeFirst()) ?? null
  );
}

/** A recorded event's body. */
export async function webhookEventPayload(db: Sql, id: string): Promise<unknown> {
  const row = await db.selectFrom("WebhookEvent").select("payload").where("id", "=", id).executeTakeFirst();
  return row?.payload;
}

export async function markWebhookEventProcessed(db: Sql, id: string, now: Date): Promise<void> {
  await db.updateTable("WebhookEvent").set({ processedAt: now, lastError: null }).where("id", "=", id).execute();
}

export async function markWebhookEventFailed(db: Sql, id: string, error: string): Promise<void> {
  await db.updateTable("WebhookEvent").set({ lastError: error }).where("id", "=", id).execute();
}

/** Events recorded at or before `receivedBy` and not processed, with attempts left; oldest first. */
export function unprocessedWebhookEvents(db: Sql, p: { receivedBy: Date; maxAttempts: number; limit: number }): Promise<Pick<WebhookEventRow, "id">[]> {
  return db
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
export async function pruneWebhookEvents(db: Sql, p: { before: Date; maxAttempts: number }): Promise<number> {
  const result = await db
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
