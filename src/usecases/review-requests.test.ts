// A review's deadline remind, its escalation and its reassignment are each one transaction: the claim
// on the review, its audit record and its Slack effects commit together, or not at all (and a deadline
// is taken later).
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { prismaOf } from "../../test/support/prisma.js";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { silentLogger } from "../log/log.js";
import { DurableOutbox } from "../outbox/index.js";
import { insertExecution, updateExecutionReturning } from "../store/executions.js";
import { insertReview } from "../store/reviews.js";
import { Audit } from "./audit.js";
import { DEADLINE_ACTOR, DEADLINE_AFTER_FAILED_DECISION_MS } from "./decisions/core.js";
import type { Execution, Review } from "./ports.js";
import { ReviewRequests } from "./review-requests.js";

let db: TestDatabase;
let execution: Execution;
let review: Review;
const T0 = new Date("2026-05-01T10:00:00.000Z");
const clock = { now: () => new Date(T0.getTime() + 31 * 60_000) };

/** An audit trail whose writes fail: the transaction it is part of must roll back. */
class FailingAudit extends Audit {
  override async record(): Promise<undefined> {
    throw new Error("audit write failed");
  }
}

function requests(audit: Audit, remindersMax = 3, more: Partial<ConstructorParameters<typeof ReviewRequests>[0]> = {}): ReviewRequests {
  return new ReviewRequests({
    db: db.database.sql,
    outbox: new DurableOutbox(db.database.sql, clock),
    audit,
    log: silentLogger,
    clock,
    reminders: { afterMs: 60 * 60_000, max: remindersMax },
    rulesOf: () => ({ users: ["U9"], usergroups: [] }),
    escalateToOf: () => ({ users: ["U9"], usergroups: ["S1"] }),
    deadlineOf: () => ({ withinMs: 30 * 60_000, onTimeout: "remind" }),
    decide: async () => ({ kind: "unknown_review" }),
    ...more,
  });
}

async function state() {
  const prisma = prismaOf(db.database);
  return {
    review: await prisma.review.findUniqueOrThrow({ where: { id: review.id } }),
    audit: await prisma.auditRecord.findMany({ where: { executionId: execution.id } }),
    effects: (await prisma.slackEffect.findMany({ orderBy: { kind: "asc" } })).map((e) => ({ kind: e.kind, subjectId: e.subjectId })),
  };
}

describe("a review as a decision request", () => {
  beforeEach(async () => {
    db = await createTestDatabase();
    const sql = db.database.sql;
    execution = await insertExecution(
      sql,
      { crewName: "research", teamId: "T", channelId: "C", userId: "U1", inputs: {}, webhooks: false, state: "waiting", requestId: "r", webhookSecret: "s", humanInputToken: "t" },
      T0,
    );
    execution = (await updateExecutionReturning(sql, execution.id, { threadTs: "100.0", kickoffId: "k-1" }, {}, T0)) ?? execution;
    review = (await insertReview(
      sql,
      { executionId: execution.id, taskKey: "t1", taskName: "research_task", agent: null, round: 1, output: "o", outputHash: "h", state: "pending", resumeTaskId: null },
      T0,
    ))!;
  });
  afterEach(async () => db.drop());

  it("a deadline's remind claims, audits and enqueues its notices in one transaction, once; a failure leaves none of it", async () => {
    await prismaOf(db.database).review.update({ where: { id: review.id }, data: { messageTs: "100.1", decideBy: new Date(T0.getTime() + 30 * 60_000), onTimeout: "remind" } });
    const prisma = prismaOf(db.database);
    expect(await requests(new FailingAudit({ db: db.database.sql, log: silentLogger, clock })).deadlinesDue()).toBe(0);
    expect(await prisma.review.findUniqueOrThrow({ where: { id: review.id } })).toMatchObject({ remindersSent: 0, deadlineHandledAt: null, deadlineDoneAt: null });
    expect(await prisma.auditRecord.count()).toBe(0);
    expect(await prisma.slackEffect.count()).toBe(0);

    const ok = requests(new Audit({ db: db.database.sql, log: silentLogger, clock }));
    expect(await ok.deadlinesDue()).toBe(1);
    expect(await ok.deadlinesDue()).toBe(0); // taken already
    expect(await prisma.review.findUniqueOrThrow({ where: { id: review.id } })).toMatchObject({ remindersSent: 1, deadlineHandledAt: clock.now(), deadlineDoneAt: clock.now() });
    expect(await prisma.auditRecord.findMany()).toEqual([
      expect.objectContaining({ kind: "deadline", actor: DEADLINE_ACTOR, detail: expect.objectContaining({ remindersSent: 1 }) }),
    ]);
    expect((await prisma.slackEffect.findMany({ orderBy: { kind: "asc" } })).map((e) => [e.kind, e.payload])).toEqual([
      ["review.deadline", { kind: "reminder", who: "<@U9>", withinMs: 30 * 60_000 }],
      ["review.show", null],
    ]);
  });

  it("a deadline's decision beaten by a person's is given back, and taken again a while after that decision did not arrive; one settled meanwhile leaves it done", async () => {
    const prisma = prismaOf(db.database);
    await prisma.review.update({ where: { id: review.id }, data: { messageTs: "100.1", decideBy: new Date(T0.getTime() + 30 * 60_000), onTimeout: "reject" } });
    const at = { ms: clock.now().getTime() };
    const moving = { now: () => new Date(at.ms) };
    const decisions: unknown[] = [];
    const rejecting = requests(new Audit({ db: db.database.sql, log: silentLogger, clock: moving }), 3, {
      clock: moving,
      deadlineOf: () => ({ withinMs: 30 * 60_000, onTimeout: "reject" }),
      decide: async (decision) => {
        decisions.push(decision);
        if (decisions.length > 1) return { kind: "decided", review, resume: {} };
        // A person's click has the review: their /resume is under way.
        await prisma.review.update({ where: { id: review.id }, data: { state: "deciding" } });
        return { kind: "already_decided", review };
      },
    });
    expect(await rejecting.deadlinesDue()).toBe(1);
    expect((await state()).review).toMatchObject({ deadlineHandledAt: null, deadlineDoneAt: null, decideBy: new Date(at.ms + DEADLINE_AFTER_FAILED_DECISION_MS) });

    // Their decision did not arrive: the review waits again, and the deadline acts once the person had time to decide again.
    await prisma.review.update({ where: { id: review.id }, data: { state: "pending" } });
    expect(await rejecting.deadlinesDue()).toBe(0);
    at.ms += DEADLINE_AFTER_FAILED_DECISION_MS;
    expect(await rejecting.deadlinesDue()).toBe(1);
    expect(decisions).toEqual([expect.objectContaining({ byDeadline: true, approve: false }), expect.objectContaining({ byDeadline: true, approve: false })]);
    expect((await state()).review.deadlineDoneAt).not.toBeNull();
    expect(await rejecting.deadlinesDue()).toBe(0);
  });

  it("a deadline beaten by a person's decision that settled already is done, not given back", async () => {
    const prisma = prismaOf(db.database);
    await prisma.review.update({ where: { id: review.id }, data: { messageTs: "100.1", decideBy: new Date(T0.getTime() + 30 * 60_000), onTimeout: "reject" } });
    const rejecting = requests(new Audit({ db: db.database.sql, log: silentLogger, clock }), 3, {
      deadlineOf: () => ({ withinMs: 30 * 60_000, onTimeout: "reject" }),
      decide: async () => {
        await prisma.review.update({ where: { id: review.id }, data: { state: "approved" } });
        return { kind: "already_decided", review };
      },
    });
    expect(await rejecting.deadlinesDue()).toBe(1);
    expect((await state()).review).toMatchObject({ state: "approved", deadlineHandledAt: clock.now(), deadlineDoneAt: clock.now() });
  });

  describe("reminders in turn", () => {
    const at = { minutes: 0 };
    const moving = { now: () => new Date(T0.getTime() + at.minutes * 60_000) };
    const reminders = async () => (await prismaOf(db.database).slackEffect.findMany({ where: { kind: { in: ["review.reminder", "review.deadline"] } } })).length;
    const escalated = async () => (await prismaOf(db.database).review.findUniqueOrThrow({ where: { id: review.id } })).escalatedAt;
    beforeEach(async () => {
      at.minutes = 0;
      await prismaOf(db.database).review.update({ where: { id: review.id }, data: { messageTs: "100.1" } });
    });

    it("a deadline's remind before the first reminder is followed by the others, each twice as late, and the escalation after the last", async () => {
      await prismaOf(db.database).review.update({ where: { id: review.id }, data: { decideBy: new Date(T0.getTime() + 30 * 60_000), onTimeout: "remind" } });
      const r = requests(new Audit({ db: db.database.sql, log: silentLogger, clock: moving }), 3, { clock: moving });
      at.minutes = 31;
      expect(await r.deadlinesDue()).toBe(1); // reminder 1 of 3, at 31 min: the next is due 2 × 60 min later
      at.minutes = 150;
      expect(await r.remindDue()).toBe(0);
      at.minutes = 152;
      expect(await r.remindDue()).toBe(1); // reminder 2; the next 4 × 60 min later
      at.minutes = 390;
      expect(await r.remindDue()).toBe(0);
      expect(await escalated()).toBeNull();
      at.minutes = 393;
      expect(await r.remindDue()).toBe(1); // reminder 3, the last: it escalates
      expect(await reminders()).toBe(3);
      expect(await escalated()).not.toBeNull();
    });

    it("reminders a stopped bot missed are not posted all at once on its return: the next waits its turn", async () => {
      const r = requests(new Audit({ db: db.database.sql, log: silentLogger, clock: moving }), 3, { clock: moving });
      at.minutes = 600; // ten hours later: three reminders' time has passed
      expect(await r.remindDue()).toBe(1);
      at.minutes = 601;
      expect(await r.remindDue()).toBe(0);
      at.minutes = 721;
      expect(await r.remindDue()).toBe(1);
      expect(await escalated()).toBeNull();
    });

    it("a review whose reminder cannot be worded does not hold back the others' (it is tried again next pass)", async () => {
      const sql = db.database.sql;
      // An older review of another crew, whose reviewer rules cannot be read.
      const other = await insertExecution(
        sql,
        { crewName: "broken", teamId: "T", channelId: "C", userId: "U1", inputs: {}, webhooks: false, state: "waiting", requestId: "r2", webhookSecret: "s", humanInputToken: "t" },
        new Date(T0.getTime() - 60_000),
      );
      await updateExecutionReturning(sql, other.id, { threadTs: "200.0", kickoffId: "k-2" }, {}, T0);
      await insertReview(
        sql,
        { executionId: other.id, taskKey: "t1", taskName: "t", agent: null, round: 1, output: "o", outputHash: "h2", state: "pending", resumeTaskId: null },
        new Date(T0.getTime() - 60_000),
      );
      await prismaOf(db.database).review.updateMany({ data: { messageTs: "100.1" } });
      const r = requests(new Audit({ db: sql, log: silentLogger, clock: moving }), 3, {
        clock: moving,
        rulesOf: (crew) => {
          if (crew === "broken") throw new Error("rules unreadable");
          return { users: ["U9"], usergroups: [] };
        },
      });
      at.minutes = 61;
      expect(await r.remindDue()).toBe(1);
      const sent = await prismaOf(db.database).review.findMany({ select: { executionId: true, remindersSent: true } });
      expect(sent).toEqual(
        expect.arrayContaining([
          { executionId: execution.id, remindersSent: 1 },
          { executionId: other.id, remindersSent: 0 },
        ]),
      );
    });

    it("mentions whoever the review was handed to, besides the crew's reviewers", async () => {
      const r = requests(new Audit({ db: db.database.sql, log: silentLogger, clock: moving }), 3, { clock: moving });
      expect((await r.reassign({ reviewId: review.id, by: "U9", to: "U7", reason: "on leave" })).kind).toBe("reassigned");
      at.minutes = 61;
      expect(await r.remindDue()).toBe(1);
      const reminder = await prismaOf(db.database).slackEffect.findFirstOrThrow({ where: { kind: "review.reminder" } });
      expect(reminder.payload).toMatchObject({ who: "<@U9>, <@U7>" });
    });
  });

  it("a deadline's remind that is the review's last reminder escalates it", async () => {
    await prismaOf(db.database).review.update({ where: { id: review.id }, data: { messageTs: "100.1", decideBy: new Date(T0.getTime() + 30 * 60_000), onTimeout: "remind" } });
    expect(await requests(new Audit({ db: db.database.sql, log: silentLogger, clock }), 1).deadlinesDue()).toBe(1);
    const now = await state();
    expect(now.review).toMatchObject({ remindersSent: 1, escalatedAt: clock.now(), escalatedTo: "U9,S1" });
    expect(now.audit.map((a) => a.kind).sort()).toEqual(["deadline", "escalation"]);
  });

  it("reassigns with its audit record and its thread reply in one transaction, and rolls all of it back when one fails", async () => {
    const failed = requests(new FailingAudit({ db: db.database.sql, log: silentLogger, clock }));
    await expect(failed.reassign({ reviewId: review.id, by: "U1", to: "U7", reason: "on leave" })).rejects.toThrow(/audit write failed/);
    let now = await state();
    expect(now.review.reassignedTo).toBeNull();
    expect(now.audit).toEqual([]);
    expect(now.effects).toEqual([]);

    const outcome = await requests(new Audit({ db: db.database.sql, log: silentLogger, clock })).reassign({ reviewId: review.id, by: "U1", to: "U7", reason: "on leave" });
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
    const found = { ...review, execution };
    const failed = requests(new FailingAudit({ db: db.database.sql, log: silentLogger, clock }), 2);
    await expect(failed.escalate(found, 2)).rejects.toThrow(/audit write failed/);
    let now = await state();
    expect(now.review.escalatedAt).toBeNull();
    expect(now.audit).toEqual([]);
    expect(now.effects).toEqual([]);

    const ok = requests(new Audit({ db: db.database.sql, log: silentLogger, clock }), 2);
    expect(await ok.escalate(found, 1)).toBe(false); // not the last reminder yet
    expect(await ok.escalate(found, 2)).toBe(true);
    expect(await ok.escalate(found, 2)).toBe(false); // claimed already
    now = await state();
    expect(now.review).toMatchObject({ escalatedAt: clock.now(), escalatedTo: "U9,S1" });
    expect(now.audit).toEqual([expect.objectContaining({ kind: "escalation", actor: "crewline:escalation", detail: expect.objectContaining({ escalatedTo: ["U9", "S1"] }) })]);
    expect(now.effects).toEqual([
      { kind: "review.show", subjectId: review.id },
      { kind: "run.message", subjectId: execution.id },
    ]);
  });
});
