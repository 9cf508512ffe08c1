// The heartbeat rule on a real database (embedded, and PostgreSQL in the second pass): which claims
// another replica may take over before their lease runs out, and what a restart takes back.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { prismaOf } from "../../test/support/prisma.js";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { abandonedRequests, deadlinesDue } from "./decision-requests.js";
import { claimEffects, enqueueEffect } from "./effects.js";
import { claimStop, leaseDueExecutions } from "./executions.js";
import { beat, pruneReplicas, releaseAllClaims, retire } from "./replicas.js";
import { retakeDecision } from "./reviews.js";
import type { Sql } from "./sql.js";

let db: TestDatabase;
let sql: Sql;
const t0 = new Date("2026-11-23T10:00:00.000Z");
const at = (ms: number) => new Date(t0.getTime() + ms);
const run = "00000000-0000-4000-8000-0000000000c1";
const DEAD_AFTER = 8000;

beforeEach(async () => {
  db = await createTestDatabase();
  sql = db.database.sql;
});
afterEach(async () => db.drop());

/** A claim by `owner` at t0 with a 60 s lease; then `other` looks at `now` with the heartbeat rule. */
async function claimThenLook(owner: string, now: Date) {
  await enqueueEffect(sql, { kind: "run.announcement", subjectId: run }, t0);
  const claim = (who: string, when: Date) =>
    claimEffects(sql, { now: when, limit: 10, owner: who, leaseUntil: at(60_000), inFlightMark: "(in flight)", exclude: [], deadBefore: new Date(when.getTime() - DEAD_AFTER) });
  expect(await claim(owner, t0)).toHaveLength(1);
  return claim("other", now);
}

describe("store: replicas and the heartbeat rule", () => {
  it("leaves a live replica its claim, however long it holds it", async () => {
    await beat(sql, "a", t0);
    await beat(sql, "a", at(20_000));
    expect(await claimThenLook("a", at(25_000))).toEqual([]);
  });

  it("takes over the claim of a replica whose heartbeat is stale, before its lease runs out, still marked in flight", async () => {
    await beat(sql, "a", t0);
    expect(await claimThenLook("a", at(DEAD_AFTER - 1))).toEqual([]);
    const [taken] = await claimEffects(sql, {
      now: at(DEAD_AFTER + 1),
      limit: 10,
      owner: "other",
      leaseUntil: at(70_000),
      inFlightMark: "(in flight)",
      exclude: [],
      deadBefore: at(1),
    });
    expect(taken).toMatchObject({ kind: "run.announcement", attempts: 2, previousError: "(in flight)" });
  });

  it("takes over at once the claim of a replica that stopped", async () => {
    await beat(sql, "a", t0);
    await retire(sql, "a", at(10));
    expect(await claimThenLook("a", at(20))).toHaveLength(1);
    // Announcing itself again (a restart with the same id) makes it alive again.
    await beat(sql, "a", at(30));
    expect(await sql.selectFrom("Replica").select(["stoppedAt", "heartbeatAt"]).where("id", "=", "a").executeTakeFirstOrThrow()).toEqual({ stoppedAt: null, heartbeatAt: at(30) });
  });

  it("judges a holder it has no heartbeat of by the lease alone", async () => {
    expect(await claimThenLook("old-version", at(59_000))).toEqual([]);
    const late = await claimEffects(sql, { now: at(60_001), limit: 10, owner: "other", leaseUntil: at(120_000), inFlightMark: "(in flight)", exclude: [], deadBefore: at(52_001) });
    expect(late).toHaveLength(1);
  });

  it("applies the same rule to status-polling leases", async () => {
    const created = await prismaOf(db.database).execution.create({
      data: { crewName: "c", teamId: "T", channelId: "C", userId: "U", inputs: {}, state: "running", kickoffId: "k", requestId: "req-1", webhookSecret: "s", nextPollAt: t0 },
    });
    await beat(sql, "a", t0);
    const lease = (owner: string, now: Date) =>
      leaseDueExecutions(sql, { owner, states: ["running"], leaseMs: 60_000, limit: 10, now, deadBefore: new Date(now.getTime() - DEAD_AFTER) });
    expect(await lease("a", t0)).toHaveLength(1);
    expect(await lease("b", at(5000))).toEqual([]);
    expect((await lease("b", at(DEAD_AFTER + 1))).map((r) => r.id)).toEqual([created.id]);
  });

  it("takes back every claim at once (a restart that owns its database), and forgets replicas silent for long", async () => {
    await beat(sql, "a", t0);
    expect(await claimThenLook("a", at(1))).toEqual([]);
    expect(await releaseAllClaims(sql, at(2))).toEqual({ effects: 1, polls: 0, deadlines: 0, stops: 0 });
    const effect = await sql.selectFrom("SlackEffect").selectAll().executeTakeFirstOrThrow();
    expect(effect).toMatchObject({ leaseOwner: null, leaseExpiresAt: null, state: "due", lastError: "(in flight)" });
    expect(await pruneReplicas(sql, at(1))).toBe(1);
  });
});

describe("store: the claims of decisions, deadlines and stops follow their holder's heartbeat", () => {
  /** A run, a review and a flow request; the review and the request as `fields` say. */
  async function rows(fields: Record<string, unknown>) {
    const prisma = prismaOf(db.database);
    const execution = await prisma.execution.create({
      data: { crewName: "c", teamId: "T", channelId: "C", userId: "U", inputs: {}, state: "waiting", kickoffId: "k", requestId: "req-1", webhookSecret: "s", threadTs: "1.0" },
    });
    const review = await prisma.review.create({
      data: { executionId: execution.id, taskKey: "draft", taskName: "draft", round: 1, output: "o", outputHash: "h", messageTs: "2.0", ...fields },
    });
    const request = await prisma.flowRequest.create({
      data: { flowName: "f", requestId: "r-1", channelId: "C", output: "o", emit: [], callbackUrl: "http://flow.invalid/cb", messageTs: "3.0", ...fields },
    });
    return { execution, review, request };
  }
  /** What another replica would take over at `now`: decisions, deadline actions (all, and the takeovers only). */
  async function takeable(now: Date, self?: string) {
    const deadBefore = new Date(now.getTime() - DEAD_AFTER);
    const staleBefore = new Date(now.getTime() - 60_000);
    const me = self ? { self } : {};
    return {
      decisions: (await abandonedRequests(sql, "Review", { states: ["deciding"], before: new Date(now.getTime() - 40_000), deadBefore, ...me, limit: 10 })).length,
      flowDecisions: (await abandonedRequests(sql, "FlowRequest", { states: ["deciding"], before: staleBefore, deadBefore, ...me, limit: 10 })).length,
      deadlines: (await deadlinesDue(sql, "Review", { now, staleBefore, deadBefore, ...me, limit: 10 })).length,
      flowDeadlines: (await deadlinesDue(sql, "FlowRequest", { now, staleBefore, deadBefore, ...me, limit: 10 })).length,
      takeovers: (await deadlinesDue(sql, "Review", { now, staleBefore, deadBefore, ...me, takeoversOnly: true, limit: 10 })).length,
    };
  }
  const none = { decisions: 0, flowDecisions: 0, deadlines: 0, flowDeadlines: 0, takeovers: 0 };

  it("decisions under way: a live holder keeps them however long, a gone one loses them at once; the taker names itself", async () => {
    const { review } = await rows({ state: "deciding", decidedAt: t0, claimedBy: "a" });
    await beat(sql, "a", t0);
    await beat(sql, "a", at(20_000));
    // Alive (last beat 5 s ago), 25 s into its call: nobody takes its decisions.
    expect(await takeable(at(25_000))).toEqual(none);
    // Silent since 20 s: gone at 28 s, for the others; the holder itself is alive, its heartbeat late.
    expect(await takeable(at(28_001))).toMatchObject({ decisions: 1, flowDecisions: 1 });
    expect(await takeable(at(28_001), "a")).toMatchObject({ decisions: 0, flowDecisions: 0 });
    expect(await retakeDecision(sql, review.id, { seen: t0, now: at(28_001), owner: "b" })).toBe(true);
    await beat(sql, "b", at(28_001));
    expect(await sql.selectFrom("Review").select(["claimedBy", "decidedAt"]).executeTakeFirstOrThrow()).toEqual({ claimedBy: "b", decidedAt: at(28_001) });
    // Now held by b, alive: not listed again.
    expect((await takeable(at(30_000))).decisions).toBe(0);
  });

  it("deadline actions: a live holder keeps its claim, a gone one loses it (listed as a takeover); a claim with no holder waits for its stale time", async () => {
    await rows({ state: "pending", decideBy: t0, deadlineHandledAt: t0, deadlineClaimedBy: "a" });
    await beat(sql, "a", at(20_000));
    expect(await takeable(at(25_000))).toEqual(none);
    expect(await takeable(at(28_001))).toMatchObject({ deadlines: 1, flowDeadlines: 1, takeovers: 1 });
    expect(await takeable(at(28_001), "a")).toEqual(none);
    await sql.updateTable("Review").set({ deadlineClaimedBy: null }).execute();
    expect(await takeable(at(59_000))).toMatchObject({ deadlines: 0, takeovers: 0 });
    expect(await takeable(at(60_001))).toMatchObject({ deadlines: 1, takeovers: 0 });
  });

  it("stops: a live holder's claim holds, a gone holder's is taken by the next asker, who is named", async () => {
    const { execution } = await rows({});
    await beat(sql, "a", t0);
    const stop = (owner: string, now: Date) =>
      claimStop(sql, execution.id, {
        userId: `U-${owner}`,
        states: ["waiting"],
        staleBefore: new Date(now.getTime() - 60_000),
        now,
        owner,
        deadBefore: new Date(now.getTime() - DEAD_AFTER),
      });
    expect(await stop("a", t0)).toMatchObject({ stopClaimedBy: "a", stoppedBy: "U-a" });
    await beat(sql, "a", at(20_000));
    expect(await stop("b", at(25_000))).toBeNull();
    // Its own claim, its heartbeat late: a second ask of its own does not take it again.
    expect(await stop("a", at(28_001))).toBeNull();
    expect(await stop("b", at(28_001))).toMatchObject({ stopClaimedBy: "b", stoppedBy: "U-b", stopClaimedAt: at(28_001) });
  });
});
