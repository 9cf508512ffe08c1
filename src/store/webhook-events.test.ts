// The recorded crew callbacks on a real database: which ones pruning deletes (those of ended runs,
// processed or given up before the cut-off) and which it keeps (live runs' dedupe keys, recent ones).
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { insertExecution, updateExecution } from "./executions.js";
import type { Sql } from "./sql.js";
import { countRecordedEvents, insertWebhookEvent, markWebhookEventProcessed, pruneWebhookEvents, startWebhookEventAttempt } from "./webhook-events.js";

let db: TestDatabase;
let sql: Sql;
const t0 = new Date("2026-11-01T10:00:00.000Z");
const day = 86_400_000;
const at = (ms: number) => new Date(t0.getTime() + ms);

beforeEach(async () => {
  db = await createTestDatabase();
  sql = db.database.sql;
});
afterEach(async () => db.drop());

const run = (state: string, n: number) =>
  insertExecution(
    sql,
    {
      crewName: "research",
      teamId: "T0TEAM",
      channelId: "C0RUNS",
      userId: "U0ALICE",
      inputs: {},
      webhooks: true,
      state,
      requestId: `r${n}`,
      webhookSecret: `s${n}`,
      humanInputToken: `h${n}`,
    },
    t0,
  );

async function event(executionId: string, key: string, opts: { processedAt?: Date; attempts?: number }) {
  const id = await insertWebhookEvent(sql, { executionId, kind: "task", dedupeKey: key, payloadJson: JSON.stringify({ key }) }, t0);
  if (!id) return undefined;
  for (let i = 0; i < (opts.attempts ?? 0); i++) await startWebhookEventAttempt(sql, id);
  if (opts.processedAt) await markWebhookEventProcessed(sql, id, opts.processedAt);
  return id;
}

const keys = async () => (await sql.selectFrom("WebhookEvent").select("dedupeKey").orderBy("dedupeKey").execute()).map((r) => r.dedupeKey);

describe("store: pruning webhook events", () => {
  it("deletes the old processed and given-up events of ended runs, and keeps live runs' and recent ones", async () => {
    const ended = await run("running", 1);
    const failed = await run("running", 2);
    const live = await run("waiting", 3);
    await event(ended.id, "ended-old", { processedAt: at(1 * day) });
    await event(ended.id, "ended-recent", { processedAt: at(6 * day) });
    await event(failed.id, "failed-given-up", { attempts: 5 });
    await event(failed.id, "failed-unprocessed-with-attempts-left", { attempts: 2 });
    await event(live.id, "live-old", { processedAt: at(1 * day) });
    await updateExecution(sql, ended.id, { state: "completed" }, {}, at(7 * day));
    await updateExecution(sql, failed.id, { state: "failed" }, {}, at(7 * day));
    // Once a run has ended, nothing more of it is stored; what it had is still found as recorded.
    expect(await event(ended.id, "after-the-end", {})).toBeUndefined();
    expect(await countRecordedEvents(sql, ended.id, ["ended-old", "ended-recent", "after-the-end"])).toBe(2);

    // Seven days' retention, eight days on: the cut-off is day 1 + a bit.
    expect(await pruneWebhookEvents(sql, { before: at(8 * day - 7 * day + 1), maxAttempts: 5 })).toBe(2);
    expect(await keys()).toEqual(["ended-recent", "failed-unprocessed-with-attempts-left", "live-old"]);
    // Later, the recent one's time comes too.
    expect(await pruneWebhookEvents(sql, { before: at(30 * day), maxAttempts: 5 })).toBe(1);
    expect(await keys()).toEqual(["failed-unprocessed-with-attempts-left", "live-old"]);
  });
});
