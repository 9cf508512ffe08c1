// A deadline's remind is one transaction: the claim (counted as one of the review's reminders), its
// audit record and its Slack effects commit together, or not at all (and the deadline is taken later).
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { prismaOf } from "../../test/support/prisma.js";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { silentLogger } from "../log/log.js";
import { DurableOutbox } from "../outbox/index.js";
import { insertExecution, updateExecution } from "../store/executions.js";
import { insertReview } from "../store/reviews.js";
import { Audit } from "./audit.js";
import { DEADLINE_ACTOR, ReviewDeadlines } from "./deadlines.js";
import type { Review } from "./ports.js";

let db: TestDatabase;
let review: Review;
const T0 = new Date("2026-05-01T10:00:00.000Z");
const clock = { now: () => new Date(T0.getTime() + 31 * 60_000) };

class FailingAudit extends Audit {
  override async record(): Promise<undefined> {
    throw new Error("audit write failed");
  }
}

function deadlines(audit: Audit, reminded: number[] = []): ReviewDeadlines {
  return new ReviewDeadlines({
    db: db.database.sql,
    outbox: new DurableOutbox(db.database.sql, clock),
    audit,
    log: silentLogger,
    clock,
    policy: { deadlineOf: () => ({ withinMs: 30 * 60_000, onTimeout: "remind" }), reviewersOf: () => "<@U9>" },
    decide: async () => ({ kind: "unknown_review" }),
    afterReminder: async (_e, _r, sent) => void reminded.push(sent),
  });
}

describe("a deadline's remind", () => {
  beforeEach(async () => {
    db = await createTestDatabase();
    const sql = db.database.sql;
    const run = await insertExecution(
      sql,
      { crewName: "research", teamId: "T", channelId: "C", userId: "U1", inputs: {}, webhooks: false, state: "waiting", requestId: "r", webhookSecret: "s", humanInputToken: "t" },
      T0,
    );
    await updateExecution(sql, run.id, { threadTs: "100.0", kickoffId: "k-1" }, {}, T0);
    review = (await insertReview(
      sql,
      { executionId: run.id, taskKey: "t1", taskName: "research_task", agent: null, round: 1, output: "o", outputHash: "h", state: "pending", resumeTaskId: null },
      T0,
    ))!;
    await prismaOf(db.database).review.update({ where: { id: review.id }, data: { messageTs: "100.1", decideBy: new Date(T0.getTime() + 30 * 60_000), onTimeout: "remind" } });
  });
  afterEach(async () => db.drop());

  it("claims, audits and enqueues its notices in one transaction, once; a failure leaves none of it", async () => {
    const prisma = prismaOf(db.database);
    expect(await deadlines(new FailingAudit(db.database.sql, silentLogger, clock)).tick()).toBe(0);
    expect(await prisma.review.findUniqueOrThrow({ where: { id: review.id } })).toMatchObject({ remindersSent: 0, deadlineHandledAt: null, deadlineDoneAt: null });
    expect(await prisma.auditRecord.count()).toBe(0);
    expect(await prisma.slackEffect.count()).toBe(0);

    const reminded: number[] = [];
    const ok = deadlines(new Audit(db.database.sql, silentLogger, clock), reminded);
    expect(await ok.tick()).toBe(1);
    expect(await ok.tick()).toBe(0); // taken already
    expect(await prisma.review.findUniqueOrThrow({ where: { id: review.id } })).toMatchObject({ remindersSent: 1, deadlineHandledAt: clock.now(), deadlineDoneAt: clock.now() });
    expect(await prisma.auditRecord.findMany()).toEqual([
      expect.objectContaining({ kind: "deadline", actor: DEADLINE_ACTOR, detail: expect.objectContaining({ remindersSent: 1 }) }),
    ]);
    expect((await prisma.slackEffect.findMany({ orderBy: { kind: "asc" } })).map((e) => [e.kind, e.payload])).toEqual([
      ["review.deadline", { kind: "reminder", who: "<@U9>", withinMs: 30 * 60_000 }],
      ["review.show", null],
    ]);
    expect(reminded).toEqual([1]);
  });
});
