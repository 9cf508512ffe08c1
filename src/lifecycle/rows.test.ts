// The raw per-run statements must read and write the same rows as Prisma's model API, on the embedded
// database and (CREWLINE_TEST_DATABASE=postgres) on PostgreSQL: same shapes, same UTC timestamps.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { EventRows, ExecutionRows, insertAuditRow, ReviewRows } from "./rows.js";

let db: TestDatabase;
const newRun = {
  crewName: "research",
  teamId: "T1",
  channelId: "C1",
  userId: "U1",
  inputs: { topic: "tides" },
  webhooks: true,
  state: "starting",
  requestId: "req-1",
  webhookSecret: "s3cret",
  humanInputToken: "t0ken",
};

describe("per-run rows", () => {
  beforeEach(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => db.drop());

  it("insert and find return what the model API reads back, defaults included", async () => {
    const rows = new ExecutionRows(db.database.prisma);
    const inserted = await rows.insert(newRun);
    const viaModel = await db.database.prisma.execution.findUniqueOrThrow({ where: { id: inserted.id } });
    expect(inserted).toEqual(viaModel);
    expect(await rows.find(inserted.id)).toEqual(viaModel);
    expect(viaModel).toMatchObject({ inputs: { topic: "tides" }, pollBackoffMs: 2000, kickoffId: null, threadTs: null });
    expect(Math.abs(viaModel.createdAt.getTime() - Date.now())).toBeLessThan(60_000);
    expect(await rows.find("not-a-uuid")).toBeNull();
    expect(await rows.find("00000000-0000-4000-8000-000000000000")).toBeNull();
  });

  it("patches only under its condition, keeps timestamps exact and moves updatedAt", async () => {
    const rows = new ExecutionRows(db.database.prisma);
    const run = await rows.insert(newRun);
    const finishedAt = new Date("2026-11-22T03:04:05.678Z");
    expect(await rows.update(run.id, { state: "completed", finishedAt, output: null }, { states: ["running"] })).toBe(0);
    expect(await rows.update(run.id, { state: "completed", finishedAt, output: "done" }, { states: ["starting", "running"] })).toBe(1);
    const after = await db.database.prisma.execution.findUniqueOrThrow({ where: { id: run.id } });
    expect(after).toMatchObject({ state: "completed", finishedAt, output: "done" });
    expect(after.updatedAt.getTime()).toBeGreaterThanOrEqual(run.updatedAt.getTime());

    expect(await rows.update(run.id, { leaseOwner: null }, { leaseOwner: "someone-else" })).toBe(0);
    expect(await rows.updateReturning(run.id, { threadTs: "100.1" })).toMatchObject({ id: run.id, threadTs: "100.1" });
    expect(() => rows.update(run.id, { webhookSecret: "x" } as never)).toThrow(/cannot be patched/);
  });

  it("stores a callback once per delivery and counts its attempts", async () => {
    const run = await new ExecutionRows(db.database.prisma).insert(newRun);
    const events = new EventRows(db.database.prisma);
    const id = await events.insert(run.id, "crew", "key-1", { state: "SUCCESS", result: "ok" });
    expect(id).toBeTruthy();
    expect(await events.insert(run.id, "crew", "key-1", { state: "SUCCESS", result: "ok" })).toBeUndefined();
    expect(await events.startAttempt(id!)).toMatchObject({ attempts: 1, processedAt: null, payload: { state: "SUCCESS", result: "ok" } });
    await events.markFailed(id!, "boom");
    await events.markProcessed(id!);
    const stored = await db.database.prisma.webhookEvent.findUniqueOrThrow({ where: { id: id! } });
    expect(stored).toMatchObject({ attempts: 1, lastError: null, kind: "crew" });
    expect(stored.processedAt).toBeInstanceOf(Date);
  });

  it("writes audit rows the model API reads back, nulls and detail included", async () => {
    const run = await new ExecutionRows(db.database.prisma).insert(newRun);
    const base = {
      executionId: run.id,
      taskKey: null,
      round: null,
      actor: null,
      decision: null,
      feedback: null,
      outputHash: null,
      msToDecision: null,
      resumeStatus: null,
      resumeMessage: null,
    };
    const a = await insertAuditRow(db.database.prisma, {
      ...base,
      kind: "decision",
      taskKey: "t1",
      round: 2,
      actor: "U2",
      decision: "approve",
      msToDecision: 1500,
      detail: { note: "ok" },
    });
    const b = await insertAuditRow(db.database.prisma, { ...base, kind: "completion", detail: null });
    const read = await db.database.prisma.auditRecord.findMany({ where: { executionId: run.id }, orderBy: { createdAt: "asc" } });
    expect(read).toEqual(expect.arrayContaining([a, b]));
    expect(a).toMatchObject({ round: 2, msToDecision: 1500, detail: { note: "ok" } });
    expect(b.detail).toBeNull();
  });

  it("stores a review round once, finds the latest by output and by task, and records its message", async () => {
    const run = await new ExecutionRows(db.database.prisma).insert(newRun);
    const reviews = new ReviewRows(db.database.prisma);
    const round = (n: number, outputHash: string) => ({
      executionId: run.id,
      taskKey: "t1",
      taskName: "research",
      agent: null,
      round: n,
      output: `output ${n}`,
      outputHash,
      state: "pending",
      resumeTaskId: null,
    });
    const first = await reviews.insert(round(1, "h1"));
    expect(first).toEqual(await db.database.prisma.review.findUniqueOrThrow({ where: { id: first!.id } }));
    expect(first).toMatchObject({ state: "pending", messageTs: null, fileAttached: false, remindersSent: 0 });
    expect(await reviews.insert(round(1, "h1-again"))).toBeUndefined(); // same round stored by someone else
    const second = await reviews.insert(round(2, "h2"));
    expect(await reviews.latestForTask(run.id, "t1")).toMatchObject({ id: second!.id, round: 2 });
    expect(await reviews.latestForTask(run.id, "t9")).toBeNull();
    expect(await reviews.latestWithOutput(run.id, "h1")).toMatchObject({ id: first!.id });
    expect(await reviews.latestWithOutput(run.id, "h3")).toBeNull();
    // Decision columns move with the state, only from the states given.
    expect(await reviews.move(first!.id, { from: ["deciding"], to: "approved" }, { decidedBy: "U1" })).toBeNull();
    expect(await reviews.move(first!.id, { from: ["pending"], to: "deciding" }, { decidedBy: "U1", decision: "approve" })).toMatchObject({
      state: "deciding",
      decidedBy: "U1",
      decision: "approve",
    });
    await expect(reviews.move(first!.id, { from: ["deciding"], to: "approved" }, { output: "x" } as never)).rejects.toThrow(/cannot be patched/);
  });
});
