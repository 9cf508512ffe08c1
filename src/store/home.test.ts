// What App Home reads, on the embedded database and (CREWLINE_TEST_DATABASE=postgres) on PostgreSQL:
// the same rows the model API reads, UTC timestamps exact, in the order the Home lists them.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { prismaOf } from "../../test/support/prisma.js";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { HomeStore } from "./home.js";

let db: TestDatabase;

const at = (s: string) => new Date(`2026-03-29T01:${s}.123Z`);

async function run(over: { teamId?: string; userId?: string; state?: string; createdAt?: Date; requestId: string }) {
  return prismaOf(db.database).execution.create({
    data: {
      crewName: "research",
      teamId: over.teamId ?? "T1",
      channelId: "C1",
      userId: over.userId ?? "U1",
      inputs: { topic: "tides" },
      state: over.state ?? "waiting",
      requestId: over.requestId,
      webhookSecret: "s3cret",
      ...(over.createdAt ? { createdAt: over.createdAt } : {}),
    },
  });
}

async function review(executionId: string, over: { taskKey: string; state?: string; messageTs?: string | null; createdAt: Date }) {
  return prismaOf(db.database).review.create({
    data: {
      executionId,
      taskKey: over.taskKey,
      taskName: over.taskKey,
      round: 1,
      output: "out",
      outputHash: "h",
      state: over.state ?? "pending",
      messageTs: over.messageTs === undefined ? "1.1" : over.messageTs,
      createdAt: over.createdAt,
      decideBy: at("45:00"),
    },
  });
}

describe("App Home store", () => {
  beforeEach(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => db.drop());

  it("lists pending, posted reviews of live runs, oldest first, with their runs as the model API reads them", async () => {
    const live = await run({ requestId: "r1" });
    const other = await run({ requestId: "r2", teamId: "T2" });
    const done = await run({ requestId: "r3", state: "completed" });
    const second = await review(live.id, { taskKey: "b", createdAt: at("20:00") });
    const first = await review(other.id, { taskKey: "a", createdAt: at("10:00") });
    await review(live.id, { taskKey: "c", createdAt: at("05:00"), messageTs: null }); // not shown in Slack yet
    await review(live.id, { taskKey: "d", createdAt: at("06:00"), state: "approved" });
    await review(done.id, { taskKey: "e", createdAt: at("07:00") }); // its run is over

    const store = new HomeStore(db.database.sql);
    const pending = await store.pendingReviews();
    expect(pending.map((r) => r.id)).toEqual([first.id, second.id]);
    const viaModel = await prismaOf(db.database).review.findMany({
      where: { id: { in: [first.id, second.id] } },
      include: { execution: true },
      orderBy: { createdAt: "asc" },
    });
    expect(pending).toEqual(viaModel);
    expect(pending[0]!.createdAt).toEqual(at("10:00"));
    expect(pending[0]!.decideBy).toEqual(at("45:00"));
    expect(pending[0]!.execution.inputs).toEqual({ topic: "tides" });

    expect((await store.pendingReviews({ teamId: "T2" })).map((r) => r.id)).toEqual([first.id]);
    expect((await store.pendingReviews({ limit: 1 })).map((r) => r.id)).toEqual([first.id]);
  });

  it("knows which reviews a user approved already", async () => {
    const live = await run({ requestId: "r1" });
    const a = await review(live.id, { taskKey: "a", createdAt: at("10:00") });
    const b = await review(live.id, { taskKey: "b", createdAt: at("11:00") });
    await prismaOf(db.database).reviewApproval.create({ data: { reviewId: a.id, userId: "U7" } });
    const store = new HomeStore(db.database.sql);
    expect([...(await store.approvedBy("U7", [a.id, b.id]))]).toEqual([a.id]);
    expect([...(await store.approvedBy("U8", [a.id, b.id]))]).toEqual([]);
    expect([...(await store.approvedBy("U7", []))]).toEqual([]);
  });

  it("lists a user's recent runs, newest first, of one workspace when asked", async () => {
    const old = await run({ requestId: "r1", createdAt: at("01:00") });
    const mid = await run({ requestId: "r2", createdAt: at("02:00"), teamId: "T2" });
    const last = await run({ requestId: "r3", createdAt: at("03:00"), state: "completed" });
    await run({ requestId: "r4", createdAt: at("04:00"), userId: "USOMEONE" });
    const store = new HomeStore(db.database.sql);
    const runs = await store.recentRuns("U1", { limit: 10 });
    expect(runs.map((r) => r.id)).toEqual([last.id, mid.id, old.id]);
    expect(runs).toEqual(await prismaOf(db.database).execution.findMany({ where: { userId: "U1" }, orderBy: { createdAt: "desc" } }));
    expect((await store.recentRuns("U1", { limit: 2 })).map((r) => r.id)).toEqual([last.id, mid.id]);
    expect((await store.recentRuns("U1", { limit: 10, teamId: "T1" })).map((r) => r.id)).toEqual([last.id, old.id]);
  });
});
