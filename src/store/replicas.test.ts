// The heartbeat rule on a real database (embedded, and PostgreSQL in the second pass): which claims
// another replica may take over before their lease runs out, and what a restart takes back.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { claimEffects, enqueueEffect } from "./effects.js";
import { leaseDueExecutions } from "./executions.js";
import { beat, pruneReplicas, releaseAllClaims, retire } from "./replicas.js";
import { type Sql, sqlOf } from "./sql.js";

let db: TestDatabase;
let sql: Sql;
const t0 = new Date("2026-11-23T10:00:00.000Z");
const at = (ms: number) => new Date(t0.getTime() + ms);
const run = "00000000-0000-4000-8000-0000000000c1";
const DEAD_AFTER = 8000;

beforeEach(async () => {
  db = await createTestDatabase();
  sql = sqlOf(db.database.prisma);
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
    const created = await db.database.prisma.execution.create({
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
    expect(await releaseAllClaims(sql, at(2))).toEqual({ effects: 1, polls: 0 });
    const effect = await sql.selectFrom("SlackEffect").selectAll().executeTakeFirstOrThrow();
    expect(effect).toMatchObject({ leaseOwner: null, leaseExpiresAt: null, state: "due", lastError: "(in flight)" });
    expect(await pruneReplicas(sql, at(1))).toBe(1);
  });
});
