// The outbox's Slack budget (table SlackBudget), shared by every replica through the database: one
// token bucket per Web API method and workspace (per channel for a channel-paced method), kept as the
// theoretical arrival time of its next call (tat), and the pause a 429's Retry-After asks for. Taking a
// token is one conditional statement, so two replicas never both spend the last one. The arithmetic is
// src/outbox/tiers.ts's takeCell; the rates and keys come from there (src/outbox/budget.ts).
// Every time written here is handed in by the caller, from its injected clock.
import { sql } from "kysely";
import type { Sql } from "./sql.js";

export interface BudgetTake {
  /** The bucket (src/outbox/tiers.ts, bucketKey). */
  key: string;
  /** Where a Retry-After for the method in this workspace is kept (the same row for a workspace-wide bucket). */
  pauseKey: string;
  now: Date;
  /** One call's worth of time at the sustained rate. */
  intervalMs: number;
  /** How far ahead of now tat may be for a call to go: (burst − 1 − reserve) intervals. */
  toleranceMs: number;
}

const ms = (n: number) => sql`(${n}::float8 * interval '1 millisecond')`;

/**
 * Spends one token of the bucket if it has one and the method is not paused; else says when to try
 * again. One statement either way: a refusal reads the bucket and the pause as they were when the
 * statement began (a later spend by another replica can only push the time on: tried then, the call
 * is refused again with the newer time).
 */
export async function takeBudget(db: Sql, t: BudgetTake): Promise<{ ok: true } | { ok: false; retryAt: Date }> {
  const now = sql`${t.now}::timestamp(3)`;
  const result = await sql<{ taken: number; tat: Date | null; pausedUntil: Date | null }>`
    WITH seen AS (SELECT key, tat, "pausedUntil" FROM "SlackBudget" WHERE key IN (${t.key}, ${t.pauseKey})),
    taken AS (
      INSERT INTO "SlackBudget" (key, tat, "updatedAt")
      SELECT ${t.key}, ${now} + ${ms(t.intervalMs)}, ${now}
      WHERE NOT EXISTS (SELECT 1 FROM "SlackBudget" p WHERE p.key = ${t.pauseKey} AND p."pausedUntil" > ${now})
      ON CONFLICT (key) DO UPDATE SET tat = GREATEST("SlackBudget".tat, ${now}) + ${ms(t.intervalMs)}, "updatedAt" = ${now}
      WHERE GREATEST("SlackBudget".tat, ${now}) <= ${now} + ${ms(t.toleranceMs)}
        AND ("SlackBudget"."pausedUntil" IS NULL OR "SlackBudget"."pausedUntil" <= ${now})
      RETURNING key)
    SELECT (SELECT count(*) FROM taken)::int AS taken,
      (SELECT tat FROM seen WHERE key = ${t.key}) AS tat,
      (SELECT max("pausedUntil") FROM seen) AS "pausedUntil"`.execute(db);
  // The outer SELECT has no FROM: it always returns its one row.
  const row = result.rows[0]!;
  if (row.taken > 0) return { ok: true };
  let retryAt = t.now.getTime() + 1;
  if (row.tat) retryAt = Math.max(retryAt, new Date(row.tat).getTime() - t.toleranceMs);
  if (row.pausedUntil) retryAt = Math.max(retryAt, new Date(row.pausedUntil).getTime());
  return { ok: false, retryAt: new Date(Math.ceil(retryAt)) };
}

/** A Retry-After: no call of the method in the workspace before `until` (a later pause already there stands). */
export async function pauseBudget(db: Sql, p: { pauseKey: string; until: Date; now: Date }): Promise<void> {
  await db
    .insertInto("SlackBudget")
    .values({ key: p.pauseKey, tat: p.now, pausedUntil: p.until, updatedAt: p.now })
    .onConflict((oc) =>
      oc.column("key").doUpdateSet({
        pausedUntil: sql<Date>`GREATEST(COALESCE("SlackBudget"."pausedUntil", EXCLUDED."pausedUntil"), EXCLUDED."pausedUntil")`,
        updatedAt: p.now,
      }),
    )
    .execute();
}

/** Deletes buckets idle since `before` (full again, and not paused): a channel's bucket is not kept forever. */
export async function pruneBudget(db: Sql, before: Date): Promise<number> {
  const result = await db
    .deleteFrom("SlackBudget")
    .where("tat", "<", before)
    .where((eb) => eb.or([eb("pausedUntil", "is", null), eb("pausedUntil", "<", before)]))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
