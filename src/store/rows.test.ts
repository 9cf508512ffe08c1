// The store's rows, on the embedded database and (CREWLINE_TEST_DATABASE=postgres) on PostgreSQL:
// what it writes reads back the same through Prisma's model API (same shapes, UTC timestamps, JSON),
// every time it writes is the one its caller passes (the injected clock), and writes happen only
// under their conditions.
import crypto from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { prismaOf } from "../../test/support/prisma.js";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { auditOfExecution, insertAudit } from "./audit.js";
import { addApproval, approvalsOf, approvedBy, claimDeadline } from "./decision-requests.js";
import { findExecution, insertExecution, leaseDueExecutions, updateExecution, updateExecutionReturning } from "./executions.js";
import {
  findReviewWithApprovals,
  findReviewWithExecution,
  insertReview,
  latestReviewForTask,
  latestReviewWithOutput,
  latestWithOutputAndForTask,
  moveReview,
  moveReviewsOf,
  stampDeadline,
} from "./reviews.js";
import type { Sql } from "./sql.js";
import {
  insertWebhookEvent,
  markWebhookEventFailed,
  markWebhookEventProcessed,
  startWebhookEventAttempt,
  unprocessedWebhookEvents,
  webhookEventPayload,
} from "./webhook-events.js";

let db: TestDatabase;
let sql: Sql;
const T0 = new Date("2026-03-29T01:30:00.123Z"); // a daylight-saving night in many zones
const at = (ms: number) => new Date(T0.getTime() + ms);
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

describe("store rows", () => {
  beforeEach(async () => {
    db = await createTestDatabase();
    sql = db.database.sql;
  });
  afterEach(async () => db.drop());

  it("inserts and finds executions as the model API reads them back, defaults included, times from the caller", async () => {
    const inserted = await insertExecution(sql, newRun, T0);
    const viaModel = await prismaOf(db.database).execution.findUniqueOrThrow({ where: { id: inserted.id } });
    expect(inserted).toEqual(viaModel);
    expect(await findExecution(sql, inserted.id)).toEqual(viaModel);
    expect(viaModel).toMatchObject({ inputs: { topic: "tides" }, pollBackoffMs: 2000, kickoffId: null, threadTs: null });
    expect(viaModel.createdAt).toEqual(T0);
    expect(viaModel.updatedAt).toEqual(T0);
    expect(viaModel.nextPollAt).toEqual(T0);
    expect(await findExecution(sql, "not-a-uuid")).toBeNull();
    expect(await findExecution(sql, "00000000-0000-4000-8000-000000000000")).toBeNull();
  });

  it("patches executions only under their condition, keeps timestamps exact and sets updatedAt from the caller", async () => {
    const run = await insertExecution(sql, newRun, T0);
    const finishedAt = new Date("2026-11-22T03:04:05.678Z");
    expect(await updateExecution(sql, run.id, { state: "completed", finishedAt, output: null }, { states: ["running"] }, at(1000))).toBe(0);
    expect(await updateExecution(sql, run.id, { state: "completed", finishedAt, output: "done" }, { states: ["starting", "running"] }, at(2000))).toBe(1);
    expect(await updateExecution(sql, run.id, { state: "x" }, { states: [] }, at(2500))).toBe(0);
    const after = await prismaOf(db.database).execution.findUniqueOrThrow({ where: { id: run.id } });
    expect(after).toMatchObject({ state: "completed", finishedAt, output: "done", updatedAt: at(2000) });

    expect(await updateExecution(sql, run.id, { leaseOwner: null }, { leaseOwner: "someone-else" }, at(3000))).toBe(0);
    expect(await updateExecutionReturning(sql, run.id, { threadTs: "100.1" }, {}, at(4000))).toMatchObject({ id: run.id, threadTs: "100.1", updatedAt: at(4000) });
    await expect(updateExecution(sql, run.id, { webhookSecret: "x" } as never, {}, at(5000))).rejects.toThrow(/cannot be patched/);
  });

  it("leases due, unleased or expired runs once, and skips finished, future, un-kicked-off and live-leased ones", async () => {
    const now = new Date();
    const make = async (data: Record<string, unknown>) => {
      const run = await insertExecution(sql, { ...newRun, requestId: crypto.randomUUID() }, at(-1000));
      await prismaOf(db.database).execution.update({
        where: { id: run.id },
        data: { state: "running", kickoffId: crypto.randomUUID(), nextPollAt: new Date(now.getTime() - 1000), ...data },
      });
      return run;
    };
    const due = await make({});
    const waiting = await make({ state: "waiting" });
    const expired = await make({ leaseOwner: "dead", leaseExpiresAt: new Date(now.getTime() - 5000) });
    await make({ state: "completed" });
    await make({ nextPollAt: new Date(now.getTime() + 60_000) });
    await make({ state: "starting", kickoffId: null });
    await make({ leaseOwner: "alive", leaseExpiresAt: new Date(now.getTime() + 60_000) });

    const lease = (owner: string, limit: number) => leaseDueExecutions(sql, { owner, states: ["starting", "running", "waiting"], leaseMs: 30_000, limit, now });
    const a = await lease("a", 10);
    expect(a.map((r) => r.id).sort()).toEqual([due.id, waiting.id, expired.id].sort());
    expect(a.every((r) => r.leaseOwner === "a")).toBe(true);
    // Another replica finds nothing: every due row is leased by a live owner.
    expect(await lease("b", 10)).toHaveLength(0);
    // The owner itself may take its rows again; the limit applies.
    expect(await lease("a", 2)).toHaveLength(2);
    const stored = await prismaOf(db.database).execution.findUniqueOrThrow({ where: { id: due.id } });
    expect(stored.leaseExpiresAt).toEqual(new Date(now.getTime() + 30_000));
  });

  it("stores a callback once per delivery, counts its attempts and finds it unprocessed", async () => {
    const run = await insertExecution(sql, newRun, T0);
    const event = { executionId: run.id, kind: "crew", dedupeKey: "key-1", payloadJson: JSON.stringify({ state: "SUCCESS", result: "ok" }) };
    const id = await insertWebhookEvent(sql, event, T0);
    expect(id).toBeTruthy();
    expect(await insertWebhookEvent(sql, event, at(1))).toBeUndefined();
    expect((await unprocessedWebhookEvents(sql, { receivedBy: at(-1), maxAttempts: 5, limit: 10 })).length).toBe(0);
    expect((await unprocessedWebhookEvents(sql, { receivedBy: T0, maxAttempts: 5, limit: 10 })).map((e) => e.id)).toEqual([id]);
    expect(await startWebhookEventAttempt(sql, id!)).toEqual({
      id,
      executionId: run.id,
      kind: "crew",
      attempts: 1,
      processedAt: null,
      execution: await findExecution(sql, run.id),
    });
    expect(await webhookEventPayload(sql, id!)).toEqual({ state: "SUCCESS", result: "ok" });
    await markWebhookEventFailed(sql, id!, "boom");
    await markWebhookEventProcessed(sql, id!, at(5000));
    const stored = await prismaOf(db.database).webhookEvent.findUniqueOrThrow({ where: { id: id! } });
    expect(stored).toMatchObject({ attempts: 1, lastError: null, kind: "crew", processedAt: at(5000) });
    expect(await unprocessedWebhookEvents(sql, { receivedBy: at(10_000), maxAttempts: 5, limit: 10 })).toEqual([]);
  });

  it("writes audit rows the model API reads back, nulls and detail included, oldest first", async () => {
    const run = await insertExecution(sql, newRun, T0);
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
    const b = await insertAudit(sql, { ...base, kind: "completion", detail: null }, at(2000));
    const a = await insertAudit(
      sql,
      { ...base, kind: "decision", taskKey: "t1", round: 2, actor: "U2", decision: "approve", msToDecision: 1500, detail: { note: "ok" } },
      at(1000),
    );
    const read = await prismaOf(db.database).auditRecord.findMany({ where: { executionId: run.id }, orderBy: { createdAt: "asc" } });
    expect(read).toEqual([a, b]);
    expect(await auditOfExecution(sql, run.id)).toEqual([a, b]);
    expect(a).toMatchObject({ round: 2, msToDecision: 1500, detail: { note: "ok" }, createdAt: at(1000) });
    expect(b.detail).toBeNull();
  });

  it("stores a review round once, finds the latest by output and by task, and moves it only from the states given", async () => {
    const run = await insertExecution(sql, newRun, T0);
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
    const first = await insertReview(sql, round(1, "h1"), T0);
    expect(first).toEqual(await prismaOf(db.database).review.findUniqueOrThrow({ where: { id: first!.id } }));
    expect(first).toMatchObject({ state: "pending", messageTs: null, fileAttached: false, remindersSent: 0, createdAt: T0, updatedAt: T0 });
    expect(await insertReview(sql, round(1, "h1-again"), at(1))).toBeUndefined(); // same round stored by someone else
    const second = await insertReview(sql, round(2, "h2"), at(2));
    expect(await latestReviewForTask(sql, run.id, "t1")).toMatchObject({ id: second!.id, round: 2 });
    expect(await latestReviewForTask(sql, run.id, "t9")).toBeNull();
    expect(await latestReviewWithOutput(sql, run.id, "h1")).toMatchObject({ id: first!.id });
    expect(await latestReviewWithOutput(sql, run.id, "h3")).toBeNull();
    // Both in one statement, each row exactly as its own read gives it.
    expect(await latestWithOutputAndForTask(sql, run.id, "h1", "t1")).toEqual({
      withOutput: await latestReviewWithOutput(sql, run.id, "h1"),
      forTask: await latestReviewForTask(sql, run.id, "t1"),
    });
    expect(await latestWithOutputAndForTask(sql, run.id, "h3", "t9")).toEqual({ withOutput: null, forTask: null });
    expect(await latestWithOutputAndForTask(sql, run.id, "h3", "t1")).toEqual({ withOutput: null, forTask: second });
    // One statement reads the review and its run, every column of each as their own reads give it.
    expect(await findReviewWithExecution(sql, first!.id)).toEqual({ ...first, execution: await findExecution(sql, run.id) });
    expect(await findReviewWithExecution(sql, "00000000-0000-4000-8000-000000000000")).toBeNull();
    // The same with its approvals, in recording order, as approvalsOf reads them (none, then two).
    expect(await findReviewWithApprovals(sql, first!.id)).toEqual({ ...first, execution: await findExecution(sql, run.id), approvals: [] });
    await addApproval(sql, "Review", { requestId: first!.id, userId: "U2", note: "ok ✓", editedOutput: null }, at(20));
    await addApproval(sql, "Review", { requestId: first!.id, userId: "U1", note: null, editedOutput: "edited 漢字" }, at(21));
    const approvals = await approvalsOf(sql, "Review", first!.id);
    expect(approvals.map((a) => a.userId)).toEqual(["U2", "U1"]);
    expect(await findReviewWithApprovals(sql, first!.id)).toEqual({ ...first, execution: await findExecution(sql, run.id), approvals });
    expect(await findReviewWithApprovals(sql, "00000000-0000-4000-8000-000000000000")).toBeNull();
    // Decision columns move with the state, only from the states given.
    expect(await moveReview(sql, first!.id, { from: ["deciding"], to: "approved" }, at(3), { decidedBy: "U1" })).toBeNull();
    expect(await moveReview(sql, first!.id, { from: ["pending"], to: "deciding" }, at(4), { decidedBy: "U1", decision: "approve" })).toMatchObject({
      state: "deciding",
      decidedBy: "U1",
      decision: "approve",
      updatedAt: at(4),
    });
    await expect(moveReview(sql, first!.id, { from: ["deciding"], to: "approved" }, at(5), { output: "x" } as never)).rejects.toThrow(/cannot be patched/);
    // A finished run closes what still waits.
    expect(await moveReviewsOf(sql, run.id, { from: ["pending", "deciding", "posted"], to: "closed" }, at(6))).toHaveLength(2);
  });

  it("stamps a deadline once and claims its action once per read of the claim", async () => {
    const run = await insertExecution(sql, newRun, T0);
    const review = (await insertReview(
      sql,
      { executionId: run.id, taskKey: "t1", taskName: "t", agent: null, round: 1, output: "o", outputHash: "h", state: "pending", resumeTaskId: null },
      T0,
    ))!;
    const stamped = await stampDeadline(sql, review.id, { decideBy: at(60_000), onTimeout: "remind" }, at(1));
    expect(stamped).toMatchObject({ decideBy: at(60_000), onTimeout: "remind" });
    expect(await stampDeadline(sql, review.id, { decideBy: at(99_000), onTimeout: "reject" }, at(2))).toMatchObject({ decideBy: at(60_000), onTimeout: "remind" });
    const claimed = await claimDeadline(sql, "Review", review.id, { handledAt: null, now: at(61_000), remind: { nextReminderAt: at(90_000) }, done: true });
    expect(claimed).toMatchObject({ deadlineHandledAt: at(61_000), deadlineDoneAt: at(61_000), remindersSent: 1, nextReminderAt: at(90_000) });
    expect(await claimDeadline(sql, "Review", review.id, { handledAt: null, now: at(62_000), remind: { nextReminderAt: null }, done: true })).toBeNull();
  });

  it("stores one approval per person; a later note or edit replaces the earlier one", async () => {
    const run = await insertExecution(sql, newRun, T0);
    const review = (await insertReview(
      sql,
      { executionId: run.id, taskKey: "t1", taskName: "t", agent: null, round: 1, output: "o", outputHash: "h", state: "pending", resumeTaskId: null },
      T0,
    ))!;
    expect(await addApproval(sql, "Review", { requestId: review.id, userId: "U1", note: null, editedOutput: null }, at(1))).toBe("added");
    expect(await addApproval(sql, "Review", { requestId: review.id, userId: "U2", note: "fine", editedOutput: null }, at(2))).toBe("added");
    expect(await addApproval(sql, "Review", { requestId: review.id, userId: "U2", note: null, editedOutput: null }, at(2))).toBe("unchanged");
    expect(await addApproval(sql, "Review", { requestId: review.id, userId: "U2", note: "fine", editedOutput: null }, at(2))).toBe("unchanged");
    expect(await addApproval(sql, "Review", { requestId: review.id, userId: "U1", note: "ok", editedOutput: "edited" }, at(3))).toBe("updated");
    expect(await addApproval(sql, "Review", { requestId: review.id, userId: "U1", note: "ok", editedOutput: "edited" }, at(4))).toBe("unchanged");
    expect(await approvalsOf(sql, "Review", review.id)).toEqual([
      { userId: "U2", note: "fine", editedOutput: null, createdAt: at(2) },
      { userId: "U1", note: "ok", editedOutput: "edited", createdAt: at(3) },
    ]);
    expect([...(await approvedBy(sql, "Review", "U1", [review.id]))]).toEqual([review.id]);
  });
});
