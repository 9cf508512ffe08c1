// How an answer reaches a flow's callback when the delivery goes wrong, end to end: a refusal of the
// answer itself (it opens again), a delivery that may have reached the flow (remembered, and recorded
// as the answer once the flow says it has one), and an answer cut off mid-call (said and audited).
import { afterEach, describe, expect, it } from "vitest";
import { clickFlow, FLOW_CHANNEL, type FlowHarness, flowRow, pendingFlowRequest, startFlowGateway, startFlowHarness } from "../support/flows.js";
import { eventually, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";

let f: FlowHarness | undefined;
let gateway: { close(): Promise<void> } | undefined;
afterEach(async () => {
  await f?.close();
  await gateway?.close();
  f = undefined;
  gateway = undefined;
});

const BOB = "U0BOB";
const told = (n: number) => eventually(() => f!.h.slack.callsTo("chat.postEphemeral")[n]?.args.text as string | undefined, { what: `private reply ${n + 1}` });
const audit = async (id: string) =>
  (await prismaOf(f!.h.bot.database).auditRecord.findMany({ where: { flowRequestId: id }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] })).map((a) => ({
    actor: a.actor,
    decision: a.decision,
    detail: a.detail as Record<string, unknown>,
  }));
const shown = (ts: string) => JSON.stringify(f!.h.slack.messages(FLOW_CHANNEL).find((m) => m.ts === ts)?.blocks);

describe("delivering an answer to a flow", () => {
  it.each([400, 413, 422])("a %i about the answer opens the request again with the flow's words, and a shorter answer is taken", async (status) => {
    f = await startFlowHarness();
    await f.flow.send();
    const req = await pendingFlowRequest(f.h);
    f.flow.failNext(status, { message: "feedback must be at most 10000 characters" });
    await clickFlow(f.h, req, "approved", "x".repeat(50), USER);
    expect(await told(0)).toBe(
      `The flow did not take your answer: ${status} feedback must be at most 10000 characters. The request is open again, so it can be answered differently.`,
    );
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "pending", decidedBy: null });

    await clickFlow(f.h, req, "approved", "short", BOB);
    await eventually(() => f!.flow.answers.length === 1);
    expect(f.flow.answers[0]!.feedback).toBe("approved\n\nshort");
    await eventually(async () => (await flowRow(f!.h, req.id)).state === "answered");
    expect((await audit(req.id)).map((a) => [a.actor, a.detail.outcome, a.detail.notTaken])).toEqual([
      [USER, "failed", true],
      [BOB, "answered", undefined],
    ]);
  });

  it("after a refusal of an answer several approvals built, they are counted again from none: the next approval does not send it again", async () => {
    f = await startFlowHarness({ flow: { approvals: 2 } });
    await f.flow.send();
    const req = await pendingFlowRequest(f.h);
    await clickFlow(f.h, req, "approved", "x".repeat(50), USER);
    await told(0);
    f.flow.failNext(413, { message: "feedback must be at most 100 characters" });
    await clickFlow(f.h, req, "approved", "y".repeat(50), BOB);
    expect(await told(1)).toMatch(/^The flow did not take your answer: 413/);
    await clickFlow(f.h, req, "approved", "short", "U0CAROL");
    await told(2);
    await f.h.settled();
    expect(f.flow.answers).toHaveLength(0);
    expect((await flowRow(f.h, req.id)).state).toBe("pending");
    await clickFlow(f.h, req, "approved", "shorter", BOB);
    await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
    expect(f.flow.answers[0]!.feedback).not.toContain("x".repeat(50));
  });

  it("a 410 about the request still closes it", async () => {
    f = await startFlowHarness();
    await f.flow.send();
    const req = await pendingFlowRequest(f.h);
    f.flow.failNext(410, { message: "This request has expired" });
    await clickFlow(f.h, req, "approved", "", USER);
    expect(await told(0)).toBe("The flow did not take the answer: 410 This request has expired. The request is closed.");
    expect((await flowRow(f.h, req.id)).state).toBe("closed");
  });

  it("an answer a gateway timed out on may have reached the flow: a later answer refused as already answered records the request as answered by it", async () => {
    f = await startFlowHarness();
    const gw = await startFlowGateway(f.flow.url, 504);
    gateway = gw;
    await f.flow.send({}, { callbackOrigin: gw.url });
    const req = await pendingFlowRequest(f.h);

    await clickFlow(f.h, req, "approved", "ship it", USER);
    expect(await told(0)).toMatch(/^Your answer may have reached the flow \(the flow answered 504\): Crewline cannot tell whether the flow took it\. The request is open again/);
    // The flow has it; the request waits again, remembering whose answer may be the flow's.
    expect(f.flow.answers.map((a) => a.feedback)).toEqual(["approved\n\nship it"]);
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "pending", decidedBy: USER, outcome: "approved", decidedAt: null });
    await eventually(() => shown(req.msg.ts)?.includes("An earlier answer may have reached the flow (the flow answered 504)."), { what: "the message saying so" });

    await clickFlow(f.h, req, "rejected", "no", BOB);
    expect(await told(1)).toBe(
      `The flow says it already has an answer, so it did not take this one. Most likely that is <@${USER}>'s earlier answer (*approved*), whose delivery Crewline could not confirm: the request is recorded as answered by it.`,
    );
    expect(f.flow.calls.map((c) => c.status)).toEqual([200, 409]);
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "answered", decidedBy: USER, outcome: "approved", feedback: "ship it", answerStatus: 409 });
    await f.h.settled();
    expect(shown(req.msg.ts)).toContain(`Answered by <@${USER}> — *approved*`);
    expect((await audit(req.id)).map((a) => [a.actor, a.decision, a.detail.outcome, a.detail.maybeTaken ?? a.detail.refusedAnswer])).toEqual([
      [USER, "approved", "failed", true],
      [USER, "approved", "answered", { by: BOB, decision: "rejected" }],
    ]);
  });

  it("of two answers in a row a gateway timed out on, the first is kept as the one the flow most likely took", async () => {
    f = await startFlowHarness();
    const gw = await startFlowGateway(f.flow.url, 504, 504);
    gateway = gw;
    await f.flow.send({}, { callbackOrigin: gw.url });
    const req = await pendingFlowRequest(f.h);
    await clickFlow(f.h, req, "approved", "ship it", USER);
    await told(0);
    await clickFlow(f.h, req, "rejected", "no", BOB);
    await told(1);
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "pending", decidedBy: USER, outcome: "approved" });
    await clickFlow(f.h, req, "approved", "", "U0CAROL");
    expect(await told(2)).toContain(`Most likely that is <@${USER}>'s earlier answer (*approved*)`);
    expect(f.flow.calls.map((c) => c.status)).toEqual([200, 409, 409]);
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "answered", decidedBy: USER, outcome: "approved" });
  });

  it("an answer cut off mid-call (its process died) opens again with a notice, an audit row and its message shown, and is recorded once the flow says it has it", async () => {
    f = await startFlowHarness();
    const sent = await f.flow.send();
    const req = await pendingFlowRequest(f.h);
    await f.h.settled();
    const updates = f.h.slack.callsTo("chat.update").length;
    // A claim whose sender died after the flow took its answer.
    f.flow.answerElsewhere(String(sent.body.id));
    await prismaOf(f.h.bot.database).flowRequest.update({
      where: { id: req.id },
      data: { state: "deciding", decidedBy: USER, outcome: "approved", decidedAt: new Date(Date.now() - 5 * 60_000) },
    });
    await f.h.bot.flows.recover();
    await f.h.settled();
    const notices = f.h.slack.messages(FLOW_CHANNEL).filter((m) => m.thread_ts === req.msg.ts && m.ts !== req.msg.ts);
    expect(notices.map((m) => m.text)).toEqual([expect.stringMatching(new RegExp(`^⚠️ <@${USER}>'s answer may have reached the flow: Crewline stopped while sending it`))]);
    expect((await audit(req.id)).map((a) => [a.actor, a.decision, a.detail.outcome, a.detail.interrupted])).toEqual([[USER, "approved", "failed", true]]);
    expect(f.h.slack.callsTo("chat.update").length).toBeGreaterThan(updates);
    expect(shown(req.msg.ts)).toContain("An earlier answer may have reached the flow");
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "pending", decidedBy: USER, decidedAt: null });

    await clickFlow(f.h, req, "rejected", "no", BOB);
    expect(await told(0)).toMatch(new RegExp(`Most likely that is <@${USER}>'s earlier answer \\(\\*approved\\*\\)`));
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "answered", decidedBy: USER, outcome: "approved" });
  });
});
