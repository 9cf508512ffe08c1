// The figures that describe the shared database, read when /metrics is scraped (never per event), so
// that any replica reports the same numbers. Each read is a few counts on indexed columns.
import type { SqlRunner } from "../db/sql.js";
import { countPendingEffects } from "../store/effects.js";
import type { PendingEffects, SharedFigures } from "./metrics.js";

export function sharedFiguresReader(sql: SqlRunner): () => Promise<SharedFigures> {
  return async () => {
    const [row] = await sql.query<Record<keyof SharedFigures, number>>(
      `SELECT
        (SELECT count(*) FROM "Review" WHERE state = 'pending')::int AS "reviewsWaiting",
        (SELECT count(*) FROM "Review" WHERE state = 'deciding')::int AS "decisionsInFlight",
        (SELECT count(*) FROM "FlowRequest" WHERE state = 'pending')::int AS "flowRequestsWaiting",
        (SELECT count(*) FROM "Execution" WHERE "leaseOwner" IS NOT NULL AND "leaseExpiresAt" > (now() AT TIME ZONE 'UTC'))::int AS "pollLeasesHeld",
        (SELECT count(*) FROM "WebhookEvent" WHERE "processedAt" IS NULL AND attempts < 5)::int AS "callbacksQueued",
        (SELECT count(*) FROM "WebhookEvent" WHERE "processedAt" IS NULL AND attempts >= 5)::int AS "callbacksGivenUp"`,
      [],
    );
    return {
      reviewsWaiting: Number(row?.reviewsWaiting ?? 0),
      decisionsInFlight: Number(row?.decisionsInFlight ?? 0),
      flowRequestsWaiting: Number(row?.flowRequestsWaiting ?? 0),
      pollLeasesHeld: Number(row?.pollLeasesHeld ?? 0),
      callbacksQueued: Number(row?.callbacksQueued ?? 0),
      callbacksGivenUp: Number(row?.callbacksGivenUp ?? 0),
    };
  };
}

/** Slack effects due in the outbox (not done, not given up), and the age of the oldest, all replicas. */
export function pendingEffectsReader(sql: SqlRunner, now: () => Date = () => new Date()): () => Promise<PendingEffects> {
  return async () => {
    const { count, oldest } = await countPendingEffects(sql);
    return { count, oldestAgeSeconds: count && oldest ? Math.max(0, (now().getTime() - oldest.getTime()) / 1000) : 0 };
  };
}
