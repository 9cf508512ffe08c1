// The figures that describe the shared database, read when /metrics is scraped (never per event), so
// that any replica reports the same numbers (store/figures.ts reads them).
import { countPendingEffects } from "../store/effects.js";
import { databaseFigures } from "../store/figures.js";
import type { Sql } from "../store/sql.js";
import type { PendingEffects, SharedFigures } from "./metrics.js";

export function sharedFiguresReader(sql: Sql, now: () => Date = () => new Date()): () => Promise<SharedFigures> {
  return () => databaseFigures(sql, now());
}

/** Slack effects due in the outbox (not done, not given up), and the age of the oldest, all replicas. */
export function pendingEffectsReader(sql: Sql, now: () => Date = () => new Date()): () => Promise<PendingEffects> {
  return async () => {
    const { count, oldest } = await countPendingEffects(sql);
    return { count, oldestAgeSeconds: count && oldest ? Math.max(0, (now().getTime() - oldest.getTime()) / 1000) : 0 };
  };
}
