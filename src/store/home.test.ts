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

  /** Everything U1 may decide: their own runs (no crew with rules) and nothing more. */
  const ownRuns = { userId: "U1", ruledCrews: [], crews: [], escalatedTo: [] };

  it("lists pending, posted reviews of live runs, oldest first, with the columns of them and their runs App Home reads (not the output)", async () => {
    const live = await run({ requestId: "r1" });
    const other = await run({ requestId: "r2", teamId: "T2" });
    const done = await run({ requestId: "r3", state: "completed" });
    const second = await review(live.id, { taskKey: "b", createdAt: at("20:00") });
    const first = await review(other.id, { taskKey: "a", createdAt: at("10:00") });
    await review(live.id, { taskKey: "c", createdAt: at("05:00"), messageTs: null }); // not shown in Slack yet
    await review(live.id, { taskKey: "d", createdAt: at("06:00"), state: "approved" });
    await review(done.id, { taskKey: "e", createdAt: at("07:00") }); // its run is over

    const store = new HomeStore(db.database.sql);
    const pending = await store.pendingReviews({ for: ownRuns });
    expect(pending.map((r) => r.id)).toEqual([first.id, second.id]);
    const viaModel = await prismaOf(db.database).review.findMany({
      where: { id: { in: [first.id, second.id] } },
      include: { execution: true },
      orderBy: { createdAt: "asc" },
    });
    const reviewKeys = Object.keys(pending[0]!).filter((k) => k !== "execution");
    const runKeys = Object.keys(pending[0]!.execution);
    const pick = <T extends object>(row: T, keys: string[]) => Object.fromEntries(keys.map((k) => [k, row[k as keyof T]]));
    expect(pending).toEqual(viaModel.map((r) => ({ ...pick(r, reviewKeys), execution: pick(r.execution, runKeys) })));
    expect(reviewKeys).not.toContain("output");
    expect(runKeys).not.toContain("inputs");
    expect(pending[0]!.createdAt).toEqual(at("10:00"));
    expect(pending[0]!.decideBy).toEqual(at("45:00"));
    expect(pending[0]!.execution).toEqual({ id: other.id, crewName: "research", userId: "U1", channelId: "C1", threadTs: null, teamId: "T2", enterpriseId: null });

    expect((await store.pendingReviews({ for: ownRuns, teamId: "T2" })).map((r) => r.id)).toEqual([first.id]);
    expect((await store.pendingReviews({ for: ownRuns, limit: 1 })).map((r) => r.id)).toEqual([first.id]);
  });

  it("reads only the reviews that may be the user's, however many older ones wait in the workspace", async () => {
    // 600 older reviews of someone else's runs, none of them the user's.
    const others = await Promise.all([1, 2, 3].map((n) => run({ requestId: `o${n}`, userId: "USOMEONE" })));
    await prismaOf(db.database).review.createMany({
      data: Array.from({ length: 600 }, (_, i) => ({
        executionId: others[i % 3]!.id,
        taskKey: `t${i}`,
        taskName: `t${i}`,
        round: 1,
        output: "x".repeat(1000),
        outputHash: "h",
        state: "pending",
        messageTs: `1.${i}`,
        createdAt: new Date(at("00:00").getTime() + i * 1000),
      })),
    });
    const ruled = await prismaOf(db.database).execution.update({ where: { id: others[2]!.id }, data: { crewName: "ruled" } });
    const mine = await run({ requestId: "m1" });
    const own = await review(mine.id, { taskKey: "own", createdAt: at("30:00") });
    const store = new HomeStore(db.database.sql);
    const none = { userId: "U1", ruledCrews: [], crews: [], escalatedTo: [] };

    // Their own run's review, newer than all 600.
    expect((await store.pendingReviews({ for: none })).map((r) => r.id)).toEqual([own.id]);
    // Not by having started it when its crew has rules.
    await prismaOf(db.database).execution.update({ where: { id: mine.id }, data: { crewName: "ruled" } });
    expect(await store.pendingReviews({ for: { ...none, ruledCrews: ["ruled"] } })).toEqual([]);
    await prismaOf(db.database).execution.update({ where: { id: mine.id }, data: { crewName: "research" } });

    // Handed to them, or escalated by a list that names them (or a group of theirs).
    const [handed, escalated, notYet] = await prismaOf(db.database).review.findMany({ where: { executionId: others[0]!.id }, orderBy: { createdAt: "desc" }, take: 3 });
    await prismaOf(db.database).review.update({ where: { id: handed!.id }, data: { reassignedTo: "U1" } });
    await prismaOf(db.database).review.update({ where: { id: escalated!.id }, data: { escalatedAt: at("40:00"), escalatedTo: "U9,S0EDITORS" } });
    await prismaOf(db.database).review.update({ where: { id: notYet!.id }, data: { escalatedTo: "U9,S0EDITORS" } }); // named, not escalated yet
    const grants = await store.pendingReviews({ for: { ...none, escalatedTo: ["U9,S0EDITORS"] } });
    expect(grants.map((r) => r.id)).toEqual([escalated!.id, handed!.id, own.id]);
    expect(grants[0]!.escalatedTo).toBe("U9,S0EDITORS");

    // Every review of a crew whose rules let them decide (200), with the one handed to them and their own, oldest first, within the limit.
    const byRules = await store.pendingReviews({ for: { ...none, ruledCrews: ["ruled"], crews: ["ruled"] } });
    expect(byRules).toHaveLength(202);
    expect(byRules.filter((r) => r.execution.id === ruled.id)).toHaveLength(200);
    expect(byRules.at(-1)!.id).toBe(own.id);
    expect(byRules.map((r) => r.createdAt.getTime())).toEqual(byRules.map((r) => r.createdAt.getTime()).sort((a, b) => a - b));
    expect(await store.pendingReviews({ for: { ...none, crews: ["ruled"] }, limit: 10 })).toHaveLength(10);
  });

  it("names the crews and escalation lists of the pending reviews, with their runs' workspaces", async () => {
    const one = await run({ requestId: "r1" });
    const two = await run({ requestId: "r2", teamId: "T2" });
    const done = await run({ requestId: "r3", state: "completed" });
    await prismaOf(db.database).execution.update({ where: { id: two.id }, data: { crewName: "writer", enterpriseId: "E1" } });
    await review(one.id, { taskKey: "a", createdAt: at("10:00") });
    const escalated = await review(two.id, { taskKey: "b", createdAt: at("11:00") });
    await prismaOf(db.database).review.update({ where: { id: escalated.id }, data: { escalatedAt: at("12:00"), escalatedTo: "U9,S0EDITORS" } });
    const named = await review(one.id, { taskKey: "c", createdAt: at("13:00") });
    await prismaOf(db.database).review.update({ where: { id: named.id }, data: { escalatedTo: "U8" } }); // not escalated
    const over = await review(done.id, { taskKey: "d", createdAt: at("14:00") });
    await prismaOf(db.database).review.update({ where: { id: over.id }, data: { escalatedAt: at("15:00"), escalatedTo: "U7" } }); // its run is over
    const store = new HomeStore(db.database.sql);

    const kinds = await store.pendingKinds();
    const byName = <T extends { crewName?: string; escalatedTo?: string }>(rows: T[]) =>
      [...rows].sort((a, b) => String(a.crewName ?? a.escalatedTo).localeCompare(String(b.crewName ?? b.escalatedTo)));
    expect(byName(kinds.crews)).toEqual([
      { crewName: "research", teamId: "T1", enterpriseId: null },
      { crewName: "writer", teamId: "T2", enterpriseId: "E1" },
    ]);
    expect(kinds.escalations).toEqual([{ escalatedTo: "U9,S0EDITORS", teamId: "T2", enterpriseId: "E1" }]);
    expect(await store.pendingKinds({ teamId: "T1" })).toEqual({ crews: [{ crewName: "research", teamId: "T1", enterpriseId: null }], escalations: [] });
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
