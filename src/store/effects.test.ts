// The outbox's statements on a real database (embedded, and PostgreSQL in the second pass): what an
// enqueue does to a row that is there already, and the times it writes (the caller's, in UTC).
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { claimEffects, completeEffect, countPendingEffects, enqueueEffect } from "./effects.js";
import type { Sql } from "./sql.js";

let db: TestDatabase;
let sql: Sql;
const t0 = new Date("2026-11-23T10:00:00.000Z");
const at = (ms: number) => new Date(t0.getTime() + ms);
const run = "00000000-0000-4000-8000-0000000000c1";

beforeEach(async () => {
  db = await createTestDatabase();
  sql = db.database.sql;
});
afterEach(async () => db.drop());

const row = (key: string) => sql.selectFrom("SlackEffect").selectAll().where("key", "=", key).executeTakeFirstOrThrow();
const claimAll = (now: Date) => claimEffects(sql, { now, limit: 10, owner: "r1", leaseUntil: at(60_000), inFlightMark: "(in flight)", exclude: [] });

describe("store: outbox effects", () => {
  it("enqueues a one-time effect once per key, with the caller's times and its thread", async () => {
    expect(await enqueueEffect(sql, { kind: "run.message", subjectId: run, part: "a", payload: { text: "hi" } }, t0)).toBe(true);
    expect(await enqueueEffect(sql, { kind: "run.message", subjectId: run, part: "a", payload: { text: "again" } }, at(5))).toBe(false);
    expect(await row(`run.message:${run}:a`)).toMatchObject({ state: "due", runAt: t0, createdAt: t0, updatedAt: t0, payload: { text: "hi" }, threadId: run, generation: 0 });
    expect(await countPendingEffects(sql)).toEqual({ count: 1, oldest: t0 });
  });

  it("re-arms a repeatable effect: a new generation, due again once done, and no thread", async () => {
    await enqueueEffect(sql, { kind: "run.announcement", subjectId: run }, t0);
    const [job] = await claimAll(t0);
    expect(job).toMatchObject({ kind: "run.announcement", attempts: 1, generation: 0, previousError: null });
    // Re-armed while it runs: completing the old generation leaves it due.
    await enqueueEffect(sql, { kind: "run.announcement", subjectId: run }, at(10));
    expect(await completeEffect(sql, { id: job!.id, generation: 0, owner: "r1", now: at(20) })).toBe(true);
    expect(await row(`run.announcement:${run}`)).toMatchObject({ state: "due", generation: 1, attempts: 0, threadId: null, updatedAt: at(20) });
    const [again] = await claimAll(at(30));
    await completeEffect(sql, { id: again!.id, generation: 1, owner: "r1", now: at(40) });
    expect(await row(`run.announcement:${run}`)).toMatchObject({ state: "done", doneAt: at(40) });
    await enqueueEffect(sql, { kind: "run.announcement", subjectId: run }, at(50));
    expect(await row(`run.announcement:${run}`)).toMatchObject({ state: "due", generation: 2, runAt: at(50), updatedAt: at(50) });
  });

  it("adds up progress steps, keeps the latest text, and spaces an update from the last one", async () => {
    await enqueueEffect(sql, { kind: "run.progress", subjectId: run, payload: { steps: 2, latest: "one" } }, t0);
    await enqueueEffect(sql, { kind: "run.progress", subjectId: run, payload: { steps: 3, latest: "" } }, at(1));
    expect((await row(`run.progress:${run}`)).payload).toEqual({ steps: 5, latest: "one", latestAt: 0, task: "", taskAt: 0, done: false });
    const [job] = await claimAll(at(2));
    await completeEffect(sql, { id: job!.id, generation: job!.generation, owner: "r1", now: at(100) });
    await enqueueEffect(sql, { kind: "run.progress", subjectId: run, payload: { steps: 1, latest: "two", done: true } }, at(200));
    expect(await row(`run.progress:${run}`)).toMatchObject({ state: "due", runAt: at(1100), payload: { steps: 6, latest: "two", done: true } });
    expect(await claimAll(at(1099))).toEqual([]);
    expect(await claimAll(at(1100))).toHaveLength(1);
  });

  it("spaces progress re-armed while it was being shown from that update, as it does progress re-armed after", async () => {
    await enqueueEffect(sql, { kind: "run.progress", subjectId: run, payload: { steps: 1, latest: "one" } }, t0);
    const [job] = await claimAll(at(0));
    await enqueueEffect(sql, { kind: "run.progress", subjectId: run, payload: { steps: 1, latest: "two" } }, at(100));
    await completeEffect(sql, { id: job!.id, generation: job!.generation, owner: "r1", now: at(200) });
    expect(await row(`run.progress:${run}`)).toMatchObject({ state: "due", runAt: at(1200) });
    expect(await claimAll(at(1199))).toEqual([]);
    expect(await claimAll(at(1200))).toHaveLength(1);
  });

  it("keeps the task a task_started event named last, whichever replica hands it over last", async () => {
    await enqueueEffect(sql, { kind: "run.progress", subjectId: run, payload: { steps: 1, latest: "x", latestAt: 5, task: "second", taskAt: 5 } }, t0);
    await enqueueEffect(sql, { kind: "run.progress", subjectId: run, payload: { steps: 1, latest: "y", latestAt: 3, task: "first", taskAt: 3 } }, at(1));
    await enqueueEffect(sql, { kind: "run.progress", subjectId: run, payload: { steps: 1, latest: "z", latestAt: 6, task: "", taskAt: 0 } }, at(2));
    expect((await row(`run.progress:${run}`)).payload).toMatchObject({ steps: 3, latest: "z", task: "second", taskAt: 5 });
  });
});
