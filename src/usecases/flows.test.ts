// The flows use case on a real database (embedded, or PostgreSQL with CREWLINE_TEST_DATABASE=postgres):
// every state change it makes (an approval towards N, a deadline's action, an escalation, a
// reassignment) commits together with its audit row and its Slack effects, or not at all; and an
// answered request's message shows the approvals and the edit only when they built what the flow got.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { flowCallbackClient } from "../adapters/flows/callback-client.js";
import type { FlowConfig } from "../config/config.js";
import { silentLogger } from "../log/log.js";
import { DurableOutbox, type NewEffect } from "../outbox/index.js";
import { findFlowRequest, insertFlowRequest } from "../store/flow-requests.js";
import type { Sql } from "../store/sql.js";
import { Audit } from "./audit.js";
import { DEADLINE_AFTER_FAILED_DECISION_MS } from "./decisions/core.js";
import { approvalsAnswered, FlowRequests, type FlowRules } from "./flows.js";
import type { Clock } from "./ports.js";

const FLOW = "expenses";
const BOB = "U0BOB";
const CAROL = "U0CAROL";

let db: TestDatabase;
let sql: Sql;
let t: number;
const clock: Clock = { now: () => new Date(t) };

/** An outbox that refuses to enqueue one kind of effect: the transaction asking for it fails. */
class FailingOutbox extends DurableOutbox {
  failOn?: NewEffect["kind"];
  override add(tx: Parameters<DurableOutbox["add"]>[0], effect: NewEffect): Promise<boolean> {
    if (effect.kind === this.failOn) return Promise.reject(new Error(`enqueue of ${effect.kind} failed`));
    return super.add(tx, effect);
  }
}

const rules: FlowRules = { rulesFor: () => undefined, mayDecide: async () => true, isGranted: async () => false };

function flowsWith(flow: Partial<FlowConfig>): { flows: FlowRequests; outbox: FailingOutbox } {
  const outbox = new FailingOutbox(db.database.sql, clock);
  const flows = new FlowRequests({
    db: db.database.sql,
    flows: [{ name: FLOW, secret: "s", channel: "C0FLOWS", ...flow }],
    outbox,
    rules,
    audit: new Audit({ db: db.database.sql, log: silentLogger }),
    log: silentLogger,
    clock,
    callback: flowCallbackClient({ timeoutMs: 2000 }),
  });
  return { flows, outbox };
}

/** A request as intake records it, with its message posted. */
async function pendingRequest(p: { emit?: string[]; callbackUrl?: string; decideBy?: Date; onTimeout?: string } = {}): Promise<string> {
  const row = await insertFlowRequest(
    sql,
    {
      flowName: FLOW,
      requestId: crypto.randomUUID(),
      channelId: "C0FLOWS",
      teamId: null,
      enterpriseId: null,
      methodName: "approve_expense",
      message: "Approve?",
      output: "Lunch, 42 EUR",
      emit: p.emit ?? ["Approve", "Reject"],
      deploymentName: null,
      flowId: null,
      assignedEmail: null,
      callbackUrl: p.callbackUrl ?? "http://127.0.0.1:1/unreachable",
      decideBy: p.decideBy ?? null,
      onTimeout: p.decideBy ? (p.onTimeout ?? "remind") : null,
    },
    clock.now(),
  );
  await sql.updateTable("FlowRequest").set({ messageTs: "100.1", updatedAt: clock.now() }).where("id", "=", row!.id).execute();
  return row!.id;
}

const audits = (id: string) => sql.selectFrom("AuditRecord").selectAll().where("flowRequestId", "=", id).orderBy("createdAt").execute();
const effects = async (id: string) => (await sql.selectFrom("SlackEffect").select("key").where("subjectId", "=", id).orderBy("key").execute()).map((e) => e.key.split(":")[0]);
const row = async (id: string) => (await findFlowRequest(sql, id))!;

describe("flow requests on the database: state, audit and effects commit together", () => {
  beforeEach(async () => {
    db = await createTestDatabase();
    sql = db.database.sql;
    t = Date.parse("2026-03-29T01:30:00.000Z");
  });
  afterEach(async () => db.drop());

  it("a reassignment writes the change, its audit row and its Slack effects at once, or none of them", async () => {
    const { flows, outbox } = flowsWith({});
    const id = await pendingRequest();

    outbox.failOn = "flow.show"; // the last statement of the transaction
    await expect(flows.reassign({ requestId: id, by: BOB, to: CAROL, reason: "on holiday" })).rejects.toThrow(/flow.show/);
    expect((await row(id)).reassignedTo).toBeNull();
    expect(await audits(id)).toEqual([]);
    expect(await effects(id)).toEqual([]);

    outbox.failOn = undefined;
    t += 1000;
    const done = await flows.reassign({ requestId: id, by: BOB, to: CAROL, reason: "on holiday" });
    expect(done.kind).toBe("reassigned");
    const after = await row(id);
    expect(after).toMatchObject({ reassignedTo: CAROL, reassignedBy: BOB, reassignReason: "on holiday" });
    expect(after.reassignedAt).toEqual(clock.now());
    expect(after.updatedAt).toEqual(clock.now());
    const [audit, ...more] = await audits(id);
    expect(more).toEqual([]);
    expect(audit).toMatchObject({ kind: "reassignment", actor: BOB, feedback: "on holiday", detail: { reassignedTo: CAROL, previously: null } });
    expect(await effects(id)).toEqual(["flow.reminder", "flow.show"]);
  });

  it("a deadline's remind writes its claim, the reminder count, its audit row and its effects at once, or none of them", async () => {
    const { flows, outbox } = flowsWith({ decideWithinMs: 60_000, onTimeout: "remind" });
    const id = await pendingRequest({ decideBy: new Date(t + 60_000) });
    expect(await flows.deadlinesDue()).toBe(0); // not due yet
    t += 61_000;

    outbox.failOn = "flow.show";
    expect(await flows.deadlinesDue()).toBe(0); // the action failed (logged) and left nothing behind
    expect(await row(id)).toMatchObject({ deadlineHandledAt: null, deadlineDoneAt: null, remindersSent: 0 });
    expect(await audits(id)).toEqual([]);
    expect(await effects(id)).toEqual([]);

    outbox.failOn = undefined;
    expect(await flows.deadlinesDue()).toBe(1);
    const after = await row(id);
    expect(after).toMatchObject({ state: "pending", remindersSent: 1 });
    expect(after.deadlineHandledAt).toEqual(clock.now());
    expect(after.deadlineDoneAt).toEqual(clock.now());
    expect(after.updatedAt).toEqual(clock.now());
    expect((await audits(id)).map((a) => [a.kind, a.actor, a.detail])).toEqual([["deadline", "crewline:deadline", expect.objectContaining({ action: "remind" })]]);
    expect(await effects(id)).toEqual(["flow.reminder", "flow.show"]);
    expect(await flows.deadlinesDue()).toBe(0); // taken once
  });

  it("a deadline's reject that does not reach the flow reopens the request with its audit row and its notice at once, or leaves it claimed", async () => {
    const { flows, outbox } = flowsWith({ decideWithinMs: 60_000, onTimeout: "reject" });
    const id = await pendingRequest({ decideBy: new Date(t + 60_000), onTimeout: "reject" });
    t += 61_000;

    outbox.failOn = "flow.reminder"; // the notice that the automatic answer did not arrive
    expect(await flows.deadlinesDue()).toBe(0);
    // The claim stands (the flow was called); the reopening, its audit row and the notice did not happen.
    expect(await row(id)).toMatchObject({ state: "deciding", decidedBy: "crewline:deadline", deadlineDoneAt: null });
    expect(await audits(id)).toEqual([]);
    expect(await effects(id)).toEqual([]);

    // Long after, the abandoned decision opens again and the deadline is retaken: this time it all commits.
    outbox.failOn = undefined;
    t += 5 * 60_000;
    await flows.recover();
    expect((await row(id)).state).toBe("pending");
    // Cut off mid-call, its answer may have reached the flow: audited, said under the request, shown.
    expect(await effects(id)).toEqual(["flow.reminder", "flow.show"]);
    expect(await flows.deadlinesDue()).toBe(1);
    const after = await row(id);
    // The interrupted answer is still the one that may have reached the flow (this one could not).
    expect(after).toMatchObject({ state: "pending", decidedBy: "crewline:deadline", outcome: "Reject", decidedAt: null });
    expect(after.deadlineDoneAt).toEqual(clock.now());
    expect((await audits(id)).map((a) => [a.kind, a.decision, a.detail])).toEqual([
      ["flow_decision", "Reject", expect.objectContaining({ outcome: "failed", interrupted: true, maybeTaken: true, byDeadline: true })],
      ["flow_decision", "Reject", expect.objectContaining({ outcome: "failed", byDeadline: true })],
    ]);
    expect(await effects(id)).toEqual(["flow.reminder", "flow.reminder", "flow.show"]);
  });

  it("a deadline's answer a gateway timed out on is kept as one the flow may have: said so under the request, and recorded once a person's answer is refused as already answered", async () => {
    const endpoint = await flowEndpoint(504, 409);
    try {
      const { flows } = flowsWith({ decideWithinMs: 60_000, onTimeout: "reject" });
      const id = await pendingRequest({ decideBy: new Date(t + 60_000), onTimeout: "reject", callbackUrl: endpoint.url });
      t += 61_000;
      expect(await flows.deadlinesDue()).toBe(1);
      expect(await row(id)).toMatchObject({ state: "pending", decidedBy: "crewline:deadline", outcome: "Reject", decidedByDeadline: true, answerStatus: 504 });
      const notices = await sql.selectFrom("SlackEffect").select("payload").where("subjectId", "=", id).where("kind", "=", "flow.reminder").execute();
      expect(notices.map((n) => (n.payload as { notice: { text?: string } }).notice.text)).toEqual([
        expect.stringMatching(/^⚠️ The deadline's automatic answer may have reached the flow/),
      ]);

      t += 1000;
      expect(await flows.decide({ requestId: id, userId: BOB, outcomeIndex: 0, feedback: "", fromHome: true })).toMatchObject({
        kind: "taken_earlier",
        by: null,
        outcome: "Reject",
      });
      expect(await row(id)).toMatchObject({ state: "answered", decidedBy: "crewline:deadline", outcome: "Reject", decidedByDeadline: true, answerStatus: 409 });
      expect((await audits(id)).map((a) => [a.actor, a.decision, a.detail])).toEqual([
        ["crewline:deadline", "Reject", expect.objectContaining({ outcome: "failed", maybeTaken: true, byDeadline: true })],
        ["crewline:deadline", "Reject", expect.objectContaining({ outcome: "answered", takenEarlier: true, byDeadline: true, refusedAnswer: { by: BOB, decision: "Approve" } })],
      ]);
    } finally {
      await endpoint.close();
    }
  });

  it("a deadline's answer beaten by a person's is given back, and taken again once that answer did not arrive and the request waits again", async () => {
    const { flows } = flowsWith({ decideWithinMs: 60_000, onTimeout: "reject" });
    const id = await pendingRequest({ decideBy: new Date(t + 60_000), onTimeout: "reject" });
    t += 61_000;
    // Between the deadline's claim and its answer, a person's click claims the request (their answer under way).
    const decide = flows.decide.bind(flows);
    let clicked = false;
    flows.decide = async (d) => {
      if (!clicked) {
        clicked = true;
        await sql.updateTable("FlowRequest").set({ state: "deciding", decidedBy: "U2", decidedAt: clock.now(), updatedAt: clock.now() }).where("id", "=", id).execute();
      }
      return decide(d);
    };
    expect(await flows.deadlinesDue()).toBe(1);
    expect(await row(id)).toMatchObject({ state: "deciding", decidedBy: "U2", deadlineHandledAt: null, deadlineDoneAt: null });

    // The person's answer did not arrive: the request waits again, and its passed deadline is taken once they had time to answer again.
    await sql.updateTable("FlowRequest").set({ state: "pending", decidedBy: null, decidedAt: null, updatedAt: clock.now() }).where("id", "=", id).execute();
    expect(await flows.deadlinesDue()).toBe(0);
    t += DEADLINE_AFTER_FAILED_DECISION_MS;
    expect(await flows.deadlinesDue()).toBe(1);
    expect((await row(id)).deadlineDoneAt).toEqual(clock.now());
    expect((await audits(id)).map((a) => [a.kind, a.decision, (a.detail as { byDeadline?: boolean }).byDeadline])).toEqual([["flow_decision", "Reject", true]]);
  });

  it("a deadline's approve answered by the flow: state, audit row and message update at once", async () => {
    const server = http.createServer((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}'));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const { flows } = flowsWith({ decideWithinMs: 60_000, onTimeout: "approve" });
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/cb`;
      const id = await pendingRequest({ decideBy: new Date(t + 60_000), onTimeout: "approve", callbackUrl: url });
      t += 61_000;
      expect(await flows.deadlinesDue()).toBe(1);
      const after = await row(id);
      expect(after).toMatchObject({ state: "answered", outcome: "Approve", decidedByDeadline: true, answerStatus: 200 });
      expect(after.deadlineDoneAt).toEqual(clock.now());
      expect((await audits(id)).map((a) => [a.kind, a.detail])).toEqual([["flow_decision", expect.objectContaining({ outcome: "answered", byDeadline: true })]]);
      expect(await effects(id)).toEqual(["flow.show"]);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it("an answer the flow took but that could not be stored: the request stays claimed and the answerer hears the flow has it", async () => {
    let answers = 0;
    const server = http.createServer((_req, res) => {
      answers++;
      res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}');
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const { flows, outbox } = flowsWith({});
      const id = await pendingRequest({ callbackUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/cb` });
      // The settle transaction fails after the flow answered 200 (its message update cannot be enqueued).
      outbox.failOn = "flow.show";
      const outcome = await flows.decide({ requestId: id, userId: BOB, outcomeIndex: 0, feedback: "", fromHome: true });
      outbox.failOn = undefined;
      expect(outcome.kind).toBe("unrecorded");
      expect(answers).toBe(1);
      expect((await row(id)).state).toBe("deciding");
      // A second answer meanwhile is told it is under way: the flow is not called again.
      expect(await flows.decide({ requestId: id, userId: CAROL, outcomeIndex: 1, feedback: "", fromHome: true })).toMatchObject({ kind: "already_decided" });
      expect(answers).toBe(1);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it("a refusal from the flow that could not be stored is an error, never told as an answer the flow took", async () => {
    const server = http.createServer((_req, res) => res.writeHead(409, { "content-type": "application/json" }).end('{"error":"already answered"}'));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const { flows, outbox } = flowsWith({});
      const id = await pendingRequest({ callbackUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/cb` });
      outbox.failOn = "flow.show";
      await expect(flows.decide({ requestId: id, userId: BOB, outcomeIndex: 0, feedback: "", fromHome: true })).rejects.toThrow(/flow.show/);
      expect((await row(id)).state).toBe("deciding");
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it("an escalation writes its claim, its audit row and its effects at once, or none of them", async () => {
    const outbox = new FailingOutbox(db.database.sql, clock);
    const flows = new FlowRequests({
      db: db.database.sql,
      flows: [{ name: FLOW, secret: "s", channel: "C0FLOWS", escalateTo: { users: [CAROL], usergroups: [] } }],
      outbox,
      rules,
      audit: new Audit({ db: db.database.sql, log: silentLogger }),
      log: silentLogger,
      clock,
      reminders: { afterMs: 60_000, max: 1 },
      callback: flowCallbackClient({ timeoutMs: 2000 }),
    });
    const failing = await pendingRequest();
    const escalated = await pendingRequest();
    t += 61_000;
    outbox.failOn = "flow.show"; // only the escalation asks for it
    expect(await flows.remindDue()).toBe(2); // both reminders went; both escalations failed (logged)
    for (const id of [failing, escalated]) {
      expect(await row(id)).toMatchObject({ remindersSent: 1, escalatedAt: null, escalatedTo: null });
      expect(await audits(id)).toEqual([]);
      expect(await effects(id)).toEqual(["flow.reminder"]);
    }

    // The escalation on its own (as after the last reminder), now that effects can be enqueued.
    outbox.failOn = undefined;
    await sql.updateTable("FlowRequest").set({ remindersSent: 0, nextReminderAt: null }).where("id", "=", escalated).execute();
    await sql.deleteFrom("SlackEffect").where("subjectId", "=", escalated).execute();
    t += 1000;
    expect(await flows.remindDue()).toBe(1);
    const after = await row(escalated);
    expect(after).toMatchObject({ remindersSent: 1, escalatedTo: CAROL });
    expect(after.escalatedAt).toEqual(clock.now());
    expect((await audits(escalated)).map((a) => [a.kind, a.actor, a.detail])).toEqual([["escalation", "crewline:escalation", expect.objectContaining({ escalatedTo: [CAROL] })]]);
    expect(await effects(escalated)).toEqual(["flow.reminder", "flow.reminder", "flow.show"]);
  });

  it("one person's approval towards two: the approval, its audit row and the message update at once, or none of them", async () => {
    const { flows, outbox } = flowsWith({ approvals: 2 });
    const id = await pendingRequest();
    const approve = (userId: string) => flows.decide({ requestId: id, userId, outcomeIndex: 0, feedback: "", fromHome: true });
    const approvals = () => sql.selectFrom("FlowApproval").select(["userId", "createdAt"]).where("flowRequestId", "=", id).execute();

    outbox.failOn = "flow.show";
    await expect(approve(BOB)).rejects.toThrow(/flow.show/);
    expect(await approvals()).toEqual([]);
    expect(await audits(id)).toEqual([]);

    outbox.failOn = undefined;
    expect(await approve(BOB)).toMatchObject({ kind: "approval_recorded", approvals: 1, required: 2 });
    expect(await approvals()).toEqual([{ userId: BOB, createdAt: clock.now() }]);
    expect((await audits(id)).map((a) => [a.kind, a.actor, a.detail])).toEqual([["flow_approval", BOB, expect.objectContaining({ approvals: 1, required: 2 })]]);
    expect(await effects(id)).toEqual(["flow.show"]);
    expect(await approve(BOB)).toMatchObject({ kind: "already_approved", approvals: 1 });
    expect(await audits(id)).toHaveLength(1);
    expect((await row(id)).state).toBe("pending");
  });
});

/** A flow's callback endpoint answering each call with the next status given (200 once they run out). */
async function flowEndpoint(...statuses: number[]): Promise<{ url: string; calls: () => number; close: () => Promise<void> }> {
  let calls = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    const status = statuses[calls++] ?? 200;
    res.writeHead(status, { "content-type": "application/json" }).end(status < 300 ? '{"status":"ok"}' : '{"error":"down"}');
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/cb`,
    calls: () => calls,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe("what an answered request's message shows beside the answer: the approvals only when they built it", () => {
  let endpoint: Awaited<ReturnType<typeof flowEndpoint>> | undefined;
  beforeEach(async () => {
    db = await createTestDatabase();
    sql = db.database.sql;
    t = Date.parse("2026-03-29T01:30:00.000Z");
  });
  afterEach(async () => {
    await endpoint?.close();
    endpoint = undefined;
    await db.drop();
  });

  const decide = (flows: FlowRequests, id: string, userId: string, d: { outcomeIndex?: number; feedback?: string; editedOutput?: string } = {}) => {
    t += 1000;
    return flows.decide({ requestId: id, userId, feedback: "", fromHome: true, ...d });
  };

  it("two required: an approval, then a reject: the rejection alone (two approvals: both shown)", async () => {
    endpoint = await flowEndpoint();
    const { flows } = flowsWith({ approvals: 2 });
    const rejected = await pendingRequest({ callbackUrl: endpoint.url });
    expect(await decide(flows, rejected, BOB, { outcomeIndex: 0 })).toMatchObject({ kind: "approval_recorded" });
    expect(await flows.context(await row(rejected))).toMatchObject({ approvals: { required: 2, by: [{ userId: BOB }] } });
    expect(await decide(flows, rejected, CAROL, { outcomeIndex: 1, feedback: "Not yet" })).toMatchObject({ kind: "answered" });
    expect(await flows.context(await row(rejected))).toEqual({});

    const approved = await pendingRequest({ callbackUrl: endpoint.url });
    await decide(flows, approved, BOB, { outcomeIndex: 0 });
    expect(await decide(flows, approved, CAROL, { outcomeIndex: 0 })).toMatchObject({ kind: "answered" });
    expect(await flows.context(await row(approved))).toMatchObject({ approvals: { required: 2, by: [{ userId: BOB }, { userId: CAROL }] } });
  });

  it("one required: an edit whose answer did not arrive is not shown beside a plain approve or a reject after it; an edit the flow took is", async () => {
    endpoint = await flowEndpoint(503, 200, 503);
    const { flows } = flowsWith({});
    const plain = await pendingRequest({ callbackUrl: endpoint.url });
    expect(await decide(flows, plain, BOB, { outcomeIndex: 0, editedOutput: "Lunch, 40 EUR" })).toMatchObject({ kind: "failed" });
    expect(await flows.context(await row(plain))).toMatchObject({ edit: { by: BOB, text: "Lunch, 40 EUR" } });
    // The same person's plain approve sends no edit.
    expect(await decide(flows, plain, BOB, { outcomeIndex: 0 })).toMatchObject({ kind: "answered" });
    expect(await flows.context(await row(plain))).toEqual({});

    const rejected = await pendingRequest({ callbackUrl: endpoint.url });
    expect(await decide(flows, rejected, BOB, { outcomeIndex: 0, editedOutput: "Lunch, 40 EUR" })).toMatchObject({ kind: "failed" });
    expect(await decide(flows, rejected, CAROL, { outcomeIndex: 1, feedback: "No" })).toMatchObject({ kind: "answered" });
    expect(await flows.context(await row(rejected))).toEqual({});

    const edited = await pendingRequest({ callbackUrl: endpoint.url });
    expect(await decide(flows, edited, BOB, { outcomeIndex: 0, editedOutput: "Lunch, 40 EUR" })).toMatchObject({ kind: "answered" });
    expect(await flows.context(await row(edited))).toMatchObject({ edit: { by: BOB, text: "Lunch, 40 EUR" } });
    expect(endpoint.calls()).toBe(5);
  });

  it("a free-feedback flow: an edit, then someone's plain feedback: the feedback alone", async () => {
    endpoint = await flowEndpoint();
    const { flows } = flowsWith({ approvals: 2 });
    const id = await pendingRequest({ emit: [], callbackUrl: endpoint.url });
    expect(await decide(flows, id, BOB, { editedOutput: "Lunch, 40 EUR" })).toMatchObject({ kind: "approval_recorded" });
    expect(await decide(flows, id, BOB, { feedback: "Ask finance first" })).toMatchObject({ kind: "answered" });
    expect(await flows.context(await row(id))).toEqual({});
  });

  it("the deadline's approve with two required and an edit recorded: the edit was not sent, so it is not shown", async () => {
    endpoint = await flowEndpoint();
    const { flows } = flowsWith({ approvals: 2, decideWithinMs: 60_000, onTimeout: "approve" });
    const id = await pendingRequest({ decideBy: new Date(t + 60_000), onTimeout: "approve", callbackUrl: endpoint.url });
    expect(await decide(flows, id, BOB, { outcomeIndex: 0, editedOutput: "Lunch, 40 EUR" })).toMatchObject({ kind: "approval_recorded" });
    t += 61_000;
    expect(await flows.deadlinesDue()).toBe(1);
    expect(await row(id)).toMatchObject({ state: "answered", outcome: "Approve", decidedByDeadline: true });
    expect(await flows.context(await row(id))).toEqual({});
  });

  it("the rule on its own: waiting shows them; closed, a deadline's, a reject-like or a neutral answer never", () => {
    const at = new Date(t);
    const edit = [{ userId: BOB, note: null, editedOutput: "x", createdAt: at }];
    const answered = { state: "answered", outcome: "Approve", decidedBy: BOB, decidedAt: at, decidedByDeadline: false };
    expect(approvalsAnswered({ ...answered, state: "pending" }, edit, 1)).toBe(true);
    expect(approvalsAnswered({ ...answered, state: "deciding", outcome: "Reject" }, edit, 1)).toBe(true);
    expect(approvalsAnswered(answered, edit, 1)).toBe(true);
    expect(approvalsAnswered({ ...answered, state: "closed" }, edit, 1)).toBe(false);
    expect(approvalsAnswered({ ...answered, decidedByDeadline: true }, edit, 2)).toBe(false);
    expect(approvalsAnswered({ ...answered, outcome: "Reject" }, edit, 2)).toBe(false);
    expect(approvalsAnswered({ ...answered, outcome: "Escalate to finance" }, edit, 2)).toBe(false);
    // Decided after the edit was recorded: a plain answer.
    expect(approvalsAnswered({ ...answered, decidedAt: new Date(t + 1) }, edit, 1)).toBe(false);
    expect(approvalsAnswered({ ...answered, decidedBy: CAROL }, edit, 1)).toBe(false);
  });
});
