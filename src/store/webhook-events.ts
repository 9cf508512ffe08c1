// WebhookEvent rows: the durable inbox of crew callbacks, recorded before the HTTP answer and
// processed after (a delivery received twice is stored once).
import crypto from "node:crypto";
import { type Selectable, sql } from "kysely";
import { FINISHED_STATES } from "../domain/states.js";
import { type ExecutionRow, executionBeside, executionColumnsBeside } from "./executions.js";
import type { DB, Sql } from "./sql.js";

export type WebhookEventRow = Selectable<DB["WebhookEvent"]>;

/**
 * Stores a callback of a run that has not ended, unless the same delivery was stored before; returns
 * its id when stored. The run's state is checked in the same statement, so nothing is stored for a
 * run that ended meanwhile, whatever the caller last read of it. The body comes as JSON text: the
 * caller has it already (a megabyte-sized body is serialised once, not per use).
 */
export async function insertWebhookEvent(db: Sql, e: { executionId: string; kind: string; dedupeKey: string; payloadJson: string }, now: Date): Promise<string | undefined> {
  const row = await db
    .insertInto("WebhookEvent")
    .columns(["id", "executionId", "kind", "dedupeKey", "payload", "receivedAt"])
    .expression(
      db
        .selectFrom("Execution")
        .select([
          sql<string>`${crypto.randomUUID()}::uuid`.as("id"),
          "Execution.id as executionId",
          sql<string>`${e.kind}::text`.as("kind"),
          sql<string>`${e.dedupeKey}::text`.as("dedupeKey"),
          sql<string>`${e.payloadJson}::jsonb`.as("payload"),
          sql<Date>`${now}::timestamp(3)`.as("receivedAt"),
        ])
        .where("Execution.id", "=", e.executionId)
        .where("Execution.state", "not in", FINISHED_STATES),
    )
    .onConflict((oc) => oc.columns(["executionId", "dedupeKey"]).doNothing())
    .returning("id")
    .executeTakeFirst();
  return row?.id;
}

/** How many of these deliveries (by dedupe key) the run has recorded already. */
export async function countRecordedEvents(db: Sql, executionId: string, dedupeKeys: readonly string[]): Promise<number> {
  if (!dedupeKeys.length) return 0;
  const row = await db
    .selectFrom("WebhookEvent")
    .select((eb) => eb.fn.countAll<string>().as("n"))
    .where("executionId", "=", executionId)
    .where("dedupeKey", "in", [...dedupeKeys])
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** A delivery the run has recorded already, and the run's latest rejection of the same output. */
export interface RepeatedDelivery {
  /** When the delivery it repeats was received. */
  receivedAt: Date;
  /** The run's review of the same output most recently rejected (decision reject, in one of the states asked for), if any. */
  lastRejected: Pick<Selectable<DB["Review"]>, "id" | "state" | "decision" | "decidedAt"> | null;
}

/**
 * What tells a repeated task or human-input callback apart (callbacks.ts, roundRepeatedAfterRejection):
 * the recorded delivery under `dedupeKey`, and the run's latest rejection, in `rejectedStates`, of a
 * review of `outputHash`. One statement, read only when a delivery's insert found it recorded
 * already; undefined when it is not recorded.
 */
export async function repeatedDelivery(
  db: Sql,
  p: { executionId: string; dedupeKey: string; outputHash: string; rejectedStates: readonly string[] },
): Promise<RepeatedDelivery | undefined> {
  const rejected = db
    .selectFrom("Review")
    .select(["id", "state", "decision", "decidedAt"])
    .where("executionId", "=", p.executionId)
    .where("outputHash", "=", p.outputHash)
    .where("decision", "=", "reject")
    .where("state", "in", [...p.rejectedStates])
    .where("decidedAt", "is not", null)
    .orderBy("decidedAt", "desc")
    .limit(1);
  const row = await db
    .selectFrom("WebhookEvent")
    .leftJoin(rejected.as("r"), (join) => join.onTrue())
    .select(["WebhookEvent.receivedAt", "r.id", "r.state", "r.decision", "r.decidedAt"])
    .where("WebhookEvent.executionId", "=", p.executionId)
    .where("WebhookEvent.dedupeKey", "=", p.dedupeKey)
    .executeTakeFirst();
  if (!row) return undefined;
  const { receivedAt, id, state, decision, decidedAt } = row;
  return { receivedAt, lastRejected: id && state ? { id, state, decision, decidedAt } : null };
}

/** A recorded event without its body (which may be megabytes: read it only when it is not at hand). */
export type WebhookEventHead = Pick<WebhookEventRow, "id" | "executionId" | "kind" | "processedAt" | "attempts">;

/**
 * Counts a processing attempt and returns the event, without its body, and its run as it is now: one
 * statement, since every task, input and crew callback is processed this way.
 */
export async function startWebhookEventAttempt(db: Sql, id: string): Promise<(WebhookEventHead & { execution: ExecutionRow }) | null> {
  const found = await db
    .updateTable("WebhookEvent")
    .from("Execution")
    .set((eb) => ({ attempts: eb("WebhookEvent.attempts", "+", 1) }))
    .whereRef("Execution.id", "=", "WebhookEvent.executionId")
    .where("WebhookEvent.id", "=", id)
    .returning(["WebhookEvent.id", "WebhookEvent.executionId", "WebhookEvent.kind", "WebhookEvent.processedAt", "WebhookEvent.attempts", ...executionColumnsBeside])
    .executeTakeFirst();
  if (!found) return null;
  const { row, execution } = executionBeside(found);
  return { ...(row as WebhookEventHead), execution };
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

/**
 * Events not processed, with attempts left, oldest first: recorded at or before `receivedBy` (the
 * recovery sweep), or of one run and kinds but `except` (a run's end applying what came before it).
 */
export function unprocessedWebhookEvents(
  db: Sql,
  p: { maxAttempts: number; limit: number; receivedBy?: Date; ofRun?: { executionId: string; kinds: readonly string[]; except?: string } },
): Promise<Pick<WebhookEventRow, "id">[]> {
  let query = db.selectFrom("WebhookEvent").select("id").where("processedAt", "is", null).where("attempts", "<", p.maxAttempts);
  if (p.receivedBy) query = query.where("receivedAt", "<=", p.receivedBy);
  if (p.ofRun)
    query = query
      .where("executionId", "=", p.ofRun.executionId)
      .where("kind", "in", [...p.ofRun.kinds])
      .$if(!!p.ofRun.except, (q) => q.where("id", "!=", p.ofRun!.except!));
  return query.orderBy("receivedAt").limit(p.limit).execute();
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
