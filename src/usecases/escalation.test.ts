// Escalation and reassignment are each one transaction: the claim on the review, its audit record
// and its Slack effects (the thread reply, the message shown again) commit together or not at all.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { prismaOf } from "../../test/support/prisma.js";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { silentLogger } from "../log/log.js";
import { DurableOutbox } from "../outbox/index.js";
import { insertExecution } from "../store/executions.js";
import { insertReview } from "../store/reviews.js";
import { Audit } from "./audit.js";
import { ReviewEscalations } from "./escalation.js";
import type { Execution, Review } from "./ports.js";

let db: TestDatabase;
let execution: Execution;
let review: Review;
const clock = { now: () => new Date("2026-05-01T10:00:00.000Z") };

function escalations(audit: Audit): ReviewEscalations {
  const outbox = new DurableOutbox(db.database.sql, clock);
  return new ReviewEscalations({
    db: db.database.sql,
    outbox,
    audit,
    log: silentLogger,
    clock,
    escalateToOf: () => ({ users: ["U9"], usergroups: ["S1"] }),
    reminderMax: 2,
  });
}

/** An audit trail whose writes fail: the transaction it is part of must roll back. */
class FailingAudit extends Audit {
  override async record(): Promise<undefined> {
    throw new Error("audit write failed");
  }
}

async function state() {
  const prisma = prismaOf(db.database);
  return {
    review: await prisma.review.findUniqueOrThrow({ where: { id: review.id } }),
    audit: await prisma.auditRecord.findMany({ where: { executionId: execution.id } }),
    effects: (await prisma.slackEffect.findMany({ orderBy: { kind: "asc" } })).map((e) => ({ kind: e.kind, subjectId: e.subjectId })),
  };
}

describe("escalation and reassignment", () => {
  beforeEach(async () => {
    db = await createTestDatabase();
    const sql = db.database.sql;
    const at = clock.now();
    execution = await insertExecution(
      sql,
      { crewName: "research", teamId: "T", channelId: "C", userId: "U1", inputs: {}, webhooks: false, state: "waiting", requestId: "r", webhookSecret: "s", humanInputToken: "t" },
      at,
    );
    review = (await insertReview(
      sql,
      { executionId: execution.id, taskKey: "t1", taskName: "research_task", agent: null, round: 1, output: "o", outputHash: "h", state: "pending", resumeTaskId: null },
      at,
    ))!;
  });
  afterEach(async () => db.drop());

  it("reassigns with its audit record and its thread reply in one transaction, and rolls all of it back when one fails", async () => {
    const failed = escalations(new FailingAudit(db.database.sql, silentLogger, clock));
    await expect(failed.reassign({ reviewId: review.id, by: "U1", to: "U7", reason: "on leave" })).rejects.toThrow(/audit write failed/);
    let now = await state();
    expect(now.review.reassignedTo).toBeNull();
    expect(now.audit).toEqual([]);
    expect(now.effects).toEqual([]);

    const outcome = await escalations(new Audit(db.database.sql, silentLogger, clock)).reassign({ reviewId: review.id, by: "U1", to: "U7", reason: "on leave" });
    expect(outcome).toMatchObject({ kind: "reassigned", review: { reassignedTo: "U7", reassignedBy: "U1", reassignReason: "on leave", reassignedAt: clock.now() } });
    now = await state();
    expect(now.review.reassignedTo).toBe("U7");
    expect(now.audit).toEqual([expect.objectContaining({ kind: "reassignment", actor: "U1", feedback: "on leave", createdAt: clock.now() })]);
    expect(now.effects).toEqual([
      { kind: "review.show", subjectId: review.id },
      { kind: "run.message", subjectId: execution.id },
    ]);
  });

  it("escalates once, with its audit record and its thread reply in one transaction, and rolls all of it back when one fails", async () => {
    const failed = escalations(new FailingAudit(db.database.sql, silentLogger, clock));
    await expect(failed.afterReminder(execution, review, 2)).rejects.toThrow(/audit write failed/);
    let now = await state();
    expect(now.review.escalatedAt).toBeNull();
    expect(now.audit).toEqual([]);
    expect(now.effects).toEqual([]);

    const ok = escalations(new Audit(db.database.sql, silentLogger, clock));
    expect(await ok.afterReminder(execution, review, 1)).toBe(false); // not the last reminder yet
    expect(await ok.afterReminder(execution, review, 2)).toBe(true);
    expect(await ok.afterReminder(execution, review, 2)).toBe(false); // claimed already
    now = await state();
    expect(now.review).toMatchObject({ escalatedAt: clock.now(), escalatedTo: "U9,S1" });
    expect(now.audit).toEqual([expect.objectContaining({ kind: "escalation", actor: "crewline:escalation", detail: expect.objectContaining({ escalatedTo: ["U9", "S1"] }) })]);
    expect(now.effects).toEqual([
      { kind: "review.show", subjectId: review.id },
      { kind: "run.message", subjectId: execution.id },
    ]);
  });
});
