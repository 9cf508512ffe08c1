// Issue #14 for flow feedback requests: escalation after the last reminder, Reassign, Approve from App
// Home; and (crew reviews and flows) Home and reminders leave out whoever already approved. Also what a
// request's body may hold (a long output, odd fields) and which of its outcomes approve. Through
// signed requests to /slack/events, the Slack stand-in, the local flow deployment and crew service,
// with an injected clock.
import { afterEach, describe, expect, it } from "vitest";
import { FLOW_ACTIONS_BLOCK, FLOW_REASSIGN_ACTION, HOME_APPROVE_ACTION, HOME_FLOW_APPROVE_ACTION, REASSIGN_USER_BLOCK } from "../../src/adapters/slack/blocks/index.js";
import { createLogger } from "../../src/log/log.js";
import { clickFlow, FLOW_CHANNEL, type FlowHarness, flowRow, type PendingFlowRequest, pendingFlowRequest, startFlowHarness } from "../support/flows.js";
import { CHANNEL, eventually, type Harness, startHarness } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { clickReview, offsetClock, pendingReview, startRunViaSlack, submitReassign } from "../support/reviews.js";

let f: FlowHarness | undefined;
let h: Harness | undefined;
afterEach(async () => {
  await f?.close();
  await h?.close();
  f = undefined;
  h = undefined;
});

const BOB = "U0BOB";
const CAROL = "U0CAROL";
const DAN = "U0DAN";
/** Waits until the bot has nothing left to do (test/support/harness.ts settled()). */
const settle = () => (f?.h ?? h)!.settled();

const underRequest = (f: FlowHarness, req: PendingFlowRequest, pattern: RegExp) =>
  f.h.slack.messages(FLOW_CHANNEL).filter((m) => m.thread_ts === req.msg.ts && pattern.test(m.text ?? ""));
const requestText = (f: FlowHarness, req: PendingFlowRequest) => JSON.stringify(f.h.slack.messages(FLOW_CHANNEL).find((m) => m.ts === req.msg.ts)?.blocks ?? []);
const ephemeralTo = (h: Harness, user: string, pattern: RegExp) => h.slack.callsTo("chat.postEphemeral").find((c) => c.args.user === user && pattern.test(String(c.args.text)));
/** The request's row once the flow's answer was recorded (the flow hears it before the row says so). */
const answeredRow = (f: FlowHarness, req: PendingFlowRequest) =>
  eventually(
    async () => {
      const r = await flowRow(f.h, req.id);
      return r.state === "answered" ? r : undefined;
    },
    { what: "the request answered" },
  );
const homesOf = (h: Harness, user: string) => h.slack.callsTo("views.publish").filter((c) => c.args.user_id === user);
const homeText = (call: { args: Record<string, unknown> }) => JSON.stringify((call.args.view as any).blocks);

async function openHome(h: Harness, user: string) {
  const before = homesOf(h, user).length;
  await h.requests.appHomeOpened({ user_id: user });
  return eventually(() => homesOf(h, user)[before], { what: `${user}'s Home tab` });
}

function homeClick(h: Harness, user: string, actionId: string, value: string) {
  return h.requests.blockAction({
    user_id: user,
    channel_id: "",
    message_ts: "",
    view: { id: "V0HOME", type: "home" } as any,
    action: { action_id: actionId, block_id: "b", value },
  });
}

describe("flow request escalation", () => {
  it("after the last reminder, mentions escalateTo once under the request; they may answer only from then on", async () => {
    const clock = offsetClock();
    f = await startFlowHarness({
      flow: { reviewers: { users: [BOB], usergroups: [] }, escalateTo: { users: [CAROL], usergroups: [] } },
      config: { reviewReminders: { afterMinutes: 1, max: 1 } },
      crewline: { clock },
    });
    await f.flow.send({ output: "Draft" });
    const req = await pendingFlowRequest(f.h);

    // Before escalation Carol is not a reviewer: refused, nothing sent to the flow.
    await clickFlow(f.h, req, "approved", "", CAROL);
    await eventually(() => ephemeralTo(f!.h, CAROL, new RegExp(`Only <@${BOB}>`)), { what: "Carol's refusal" });
    expect(f.flow.calls).toHaveLength(0);

    clock.offsetMs = 61_000;
    expect(await f.h.bot.flows.remindDue()).toBe(1);
    const escalation = await eventually(() => underRequest(f!, req, /🔺/)[0], { what: "the escalation" });
    expect(escalation.text).toContain(`<@${CAROL}>: flow *content*'s request on \`review_article\` is still waiting for an answer after a reminder`);
    // The reminder too, mentioning the reviewer (the outbox does not promise which of the two is posted first).
    expect((await eventually(() => underRequest(f!, req, /⏰/)[0], { what: "the reminder" })).text).toContain(`<@${BOB}>`);
    const row = await flowRow(f.h, req.id);
    expect(row).toMatchObject({ state: "pending", escalatedTo: CAROL });
    expect(row.escalatedAt).not.toBeNull();
    await eventually(() => requestText(f!, req).includes(`Escalated to <@${CAROL}>`), { what: "the request showing its escalation" });
    const audit = await prismaOf(f.h.bot.database).auditRecord.findFirstOrThrow({ where: { kind: "escalation", flowRequestId: req.id } });
    expect(audit).toMatchObject({ executionId: null, actor: "crewline:escalation" });
    expect(audit.detail).toMatchObject({ escalatedTo: [CAROL], remindersSent: 1 });

    // Once, whatever runs later.
    clock.offsetMs = 60 * 60_000;
    await f.h.bot.flows.remindDue();
    await settle();
    expect(underRequest(f, req, /🔺/)).toHaveLength(1);

    await clickFlow(f.h, req, "approved", "", CAROL);
    await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
    expect(f.flow.answers[0]).toMatchObject({ feedback: "approved" });
    expect(await answeredRow(f, req)).toMatchObject({ decidedBy: CAROL });
  });

  it("a deadline's remind counts as the last reminder and escalates", async () => {
    const clock = offsetClock();
    f = await startFlowHarness({
      flow: { reviewers: { users: [BOB], usergroups: [] }, escalateTo: { users: [CAROL], usergroups: ["S0LEADS"] }, decideWithinMs: 90_000, onTimeout: "remind" },
      config: { reviewReminders: { afterMinutes: 60, max: 1 } },
      crewline: { clock },
    });
    f.h.slack.setUsergroup("S0LEADS", [DAN]);
    await f.flow.send({ output: "Draft" });
    const req = await pendingFlowRequest(f.h);
    // Dan (in the escalation group) may not answer before the escalation.
    await clickFlow(f.h, req, "rejected", "No", DAN);
    await eventually(() => ephemeralTo(f!.h, DAN, new RegExp(`Only <@${BOB}>`)), { what: "Dan's refusal" });
    clock.offsetMs = 2 * 60_000;
    expect(await f.h.bot.flows.deadlinesDue()).toBe(1);
    const escalation = await eventually(() => underRequest(f!, req, /🔺/)[0], { what: "the escalation" });
    expect(escalation.text).toContain(`<@${CAROL}>, <!subteam^S0LEADS>`);
    expect(await flowRow(f.h, req.id)).toMatchObject({ remindersSent: 1, escalatedTo: `${CAROL},S0LEADS` });
    // The regular reminder is not due any more (the count is reached): no second escalation.
    clock.offsetMs = 3 * 60 * 60_000;
    expect(await f.h.bot.flows.remindDue()).toBe(0);
    await settle();
    expect(underRequest(f, req, /🔺/)).toHaveLength(1);
    // A member of the escalation group answers it now.
    await clickFlow(f.h, req, "rejected", "Off brand", DAN);
    await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
    expect(await answeredRow(f, req)).toMatchObject({ decidedBy: DAN, outcome: "rejected" });
  });
});

describe("flow request reassignment", () => {
  function clickReassign(f: FlowHarness, req: PendingFlowRequest, user: string) {
    return f.h.requests.blockAction({
      user_id: user,
      channel_id: FLOW_CHANNEL,
      message_ts: req.msg.ts,
      action: { action_id: FLOW_REASSIGN_ACTION, block_id: FLOW_ACTIONS_BLOCK, value: req.id },
    });
  }

  it("someone who may answer hands it to a named person: mentioned, on their Home at once, and they answer it", async () => {
    f = await startFlowHarness({ flow: { reviewers: { users: [BOB], usergroups: [] } } });
    // Dan is in the request's channel: he could see it.
    f.h.slack.setMembers(FLOW_CHANNEL, [DAN]);
    await f.flow.send({ output: "Draft" });
    const req = await pendingFlowRequest(f.h);
    expect(req.buttons.map((b) => b.text)).toContain("Reassign");

    // Someone who may not answer may not reassign either: no modal.
    await clickReassign(f, req, DAN);
    await eventually(() => ephemeralTo(f!.h, DAN, /may reassign it/), { what: "Dan's refusal" });
    expect(f.h.slack.callsTo("views.open")).toHaveLength(0);

    await clickReassign(f, req, BOB);
    const [opened] = await f.h.slack.waitForCalls("views.open", 1);
    const modal = opened!.args.view as any;
    expect(JSON.stringify(modal.blocks)).toContain("users_select");
    const submitted = await submitReassign(f.h, modal, BOB, DAN, "Dan owns the style guide");
    expect(submitted.status).toBe(200);
    const notice = await eventually(() => underRequest(f!, req, /↪️/)[0], { what: "the reassignment notice" });
    expect(notice.text).toContain(`<@${BOB}> reassigned flow *content*'s request on \`review_article\` to <@${DAN}>, who may now answer it.`);
    expect(notice.text).toContain("Dan owns the style guide");
    expect(await flowRow(f.h, req.id)).toMatchObject({ reassignedTo: DAN, reassignedBy: BOB, reassignReason: "Dan owns the style guide" });
    await eventually(() => requestText(f!, req).includes(`Reassigned to <@${DAN}>`), { what: "the request showing it" });
    const audit = await prismaOf(f.h.bot.database).auditRecord.findFirstOrThrow({ where: { kind: "reassignment", flowRequestId: req.id } });
    expect(audit).toMatchObject({ actor: BOB, feedback: "Dan owns the style guide" });
    expect(audit.detail).toMatchObject({ reassignedTo: DAN });

    // Dan's Home is published at once, listing it.
    const pushed = await eventually(() => homesOf(f!.h, DAN)[0], { what: "Dan's Home" });
    expect(homeText(pushed)).toContain("flow content");
    expect(homeText(pushed)).toContain(`Reassigned to you by <@${BOB}>`);

    await clickFlow(f.h, req, "rejected", "Tone is off", DAN);
    await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
    expect(f.flow.answers[0]).toMatchObject({ feedback: "rejected\n\nTone is off" });
    expect(await answeredRow(f, req)).toMatchObject({ decidedBy: DAN });
  });

  it("refuses, on the modal's person field and saying why, anyone who could not answer it; nothing is handed on", async () => {
    f = await startFlowHarness({ flow: { reviewers: { users: [BOB], usergroups: [] } } });
    const GUEST = "U0GUEST";
    // Carol is not in the request's channel; the guest is, but of another organisation.
    f.h.slack.setMembers(FLOW_CHANNEL, [BOB, DAN, GUEST, f.h.slack.botUserId]);
    f.h.slack.setUser(GUEST, { team_id: "T0PARTNER" });
    await f.flow.send({ output: "Draft" });
    const req = await pendingFlowRequest(f.h);
    await clickReassign(f, req, BOB);
    const [opened] = await f.h.slack.waitForCalls("views.open", 1);
    const modal = opened!.args.view as any;

    // Slack cannot tell who Dan is just now: not handed on blindly.
    f.h.slack.failNext("users.info", "fatal_error");
    const refusals: [string, string][] = [
      [DAN, "Crewline could not check that person just now; try again in a moment."],
      [f.h.slack.botUserId, "That's a bot: reassign to a person."],
      [GUEST, "That person is of another organisation (a guest in a shared channel), who may not decide it: reassign to someone of this workspace."],
      [CAROL, "That person is not in this request's channel, so they could not see it."],
    ];
    for (const [to, text] of refusals) {
      const answer = await submitReassign(f.h, modal, BOB, to, "Over to you");
      expect(answer.json, to).toEqual({ response_action: "errors", errors: { [REASSIGN_USER_BLOCK]: text } });
    }
    await settle();
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "pending", reassignedTo: null });
    expect(await prismaOf(f.h.bot.database).auditRecord.count({ where: { kind: "reassignment" } })).toBe(0);
    expect(underRequest(f, req, /↪️/)).toHaveLength(0);
    expect(f.h.slack.callsTo("views.publish")).toHaveLength(0);
  });
});

describe("flow request approval from App Home", () => {
  it("a reviewer approves from Home: the flow gets its approve outcome once, the message is updated, Home is published again", async () => {
    f = await startFlowHarness({ flow: { reviewers: { users: [BOB], usergroups: [] } } });
    await f.flow.send({ output: "Draft" });
    const req = await pendingFlowRequest(f.h);

    const carolHome = await openHome(f.h, CAROL);
    expect(homeText(carolHome)).not.toContain(HOME_FLOW_APPROVE_ACTION);
    const bobHome = await openHome(f.h, BOB);
    const item = ((bobHome.args.view as any).blocks as any[]).find((b) => b.accessory?.action_id === HOME_FLOW_APPROVE_ACTION);
    expect(item.accessory.value).toBe(req.id);

    // A forged Home click by someone who may not answer: nothing sent.
    await homeClick(f.h, CAROL, HOME_FLOW_APPROVE_ACTION, req.id);
    await eventually(() => homesOf(f!.h, CAROL)[1], { what: "Carol's Home again" });
    expect(f.flow.calls).toHaveLength(0);

    await homeClick(f.h, BOB, HOME_FLOW_APPROVE_ACTION, req.id);
    await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
    expect(f.flow.answers[0]).toMatchObject({ feedback: "approved", source: "slack" });
    expect(await answeredRow(f, req)).toMatchObject({ outcome: "approved", decidedBy: BOB });
    await eventually(() => /Answered/.test(requestText(f!, req)) && !requestText(f!, req).includes(FLOW_ACTIONS_BLOCK), { what: "the request message updated" });
    const republished = await eventually(() => homesOf(f!.h, BOB)[1], { what: "Bob's Home again" });
    expect(homeText(republished)).toContain("You approved *content · review_article*");
    expect(homeText(republished)).not.toContain(`"value":"${req.id}"`);

    // A stale tab's second click sends nothing more.
    await homeClick(f.h, BOB, HOME_FLOW_APPROVE_ACTION, req.id);
    await eventually(() => homesOf(f!.h, BOB)[2], { what: "Bob's Home a third time" });
    expect(f.flow.calls).toHaveLength(1);
  });

  it("a request that needs feedback keeps only its link on Home", async () => {
    f = await startFlowHarness({ flow: { reviewers: { users: [BOB], usergroups: [] } } });
    await f.flow.send({ output: "Draft", emit: null });
    await pendingFlowRequest(f.h);
    const home = await openHome(f.h, BOB);
    expect(homeText(home)).toContain("flow content");
    expect(homeText(home)).not.toContain(HOME_FLOW_APPROVE_ACTION);
  });
});

describe("who already approved is not waited for", () => {
  it("flow requests: Home leaves it out for who approved, and reminders mention only the named reviewers still to approve", async () => {
    const clock = offsetClock();
    f = await startFlowHarness({
      flow: { reviewers: { users: [BOB, CAROL], usergroups: ["S0EDITORS"] }, approvals: 2 },
      config: { reviewReminders: { afterMinutes: 1, max: 3 } },
      crewline: { clock },
    });
    await f.flow.send({ output: "Draft" });
    const req = await pendingFlowRequest(f.h);
    await clickFlow(f.h, req, "approved", "", BOB);
    await eventually(() => ephemeralTo(f!.h, BOB, /1 of 2 approvals/), { what: "Bob's approval" });

    expect(homeText(await openHome(f.h, BOB))).not.toContain("flow content");
    expect(homeText(await openHome(f.h, CAROL))).toContain("flow content");

    clock.offsetMs = 61_000;
    expect(await f.h.bot.flows.remindDue()).toBe(1);
    const reminder = await eventually(() => underRequest(f!, req, /⏰/)[0], { what: "the reminder" });
    expect(reminder.text).toContain(`<@${CAROL}>, <!subteam^S0EDITORS>:`);
    expect(reminder.text).not.toContain(`<@${BOB}>`);
  });

  it("crew reviews: the same on Home and in reminders", async () => {
    const clock = offsetClock();
    h = await startHarness({ config: { reviewReminders: { afterMinutes: 1, max: 3 } }, crewline: { clock } });
    h.bot.crews.config("research")!.reviewers = { users: [BOB, CAROL], usergroups: [] };
    h.bot.crews.config("research")!.approvals = 2;
    const execution = await startRunViaSlack(h);
    const pending = await pendingReview(h);
    await clickReview(h, pending, true, "", BOB);
    await eventually(() => ephemeralTo(h!, BOB, /1 of 2 approvals/), { what: "Bob's approval" });

    expect(homeText(await openHome(h, BOB))).not.toContain(HOME_APPROVE_ACTION);
    expect(homeText(await openHome(h, CAROL))).toContain(`"value":"${pending.reviewId}"`);

    clock.offsetMs = 61_000;
    expect(await h.bot.reviewRequests.remindDue()).toBe(1);
    const reminder = await eventually(() => h!.slack.messages(CHANNEL).find((m) => m.thread_ts === execution.threadTs && /⏰/.test(m.text ?? "")), { what: "the reminder" });
    expect(reminder.text).toContain(`⏰ <@${CAROL}>:`);
    expect(reminder.text).not.toContain(`<@${BOB}>`);
  });

  it("crew reviews: a deadline's remind also mentions only who has still to approve", async () => {
    const clock = offsetClock();
    h = await startHarness({ research: { decideWithinMs: 90_000, onTimeout: "remind", approvals: 2 }, crewline: { clock } });
    h.bot.crews.config("research")!.reviewers = { users: [BOB, CAROL], usergroups: [] };
    const execution = await startRunViaSlack(h);
    const pending = await pendingReview(h);
    await clickReview(h, pending, true, "", CAROL);
    await eventually(() => ephemeralTo(h!, CAROL, /1 of 2 approvals/), { what: "Carol's approval" });
    clock.offsetMs = 2 * 60_000;
    expect(await h.bot.reviewRequests.deadlinesDue()).toBe(1);
    const reminder = await eventually(() => h!.slack.messages(CHANNEL).find((m) => m.thread_ts === execution.threadTs && /⏰/.test(m.text ?? "")), {
      what: "the deadline's reminder",
    });
    expect(reminder.text).toContain(`⏰ <@${BOB}>:`);
    expect(reminder.text).not.toContain(`<@${CAROL}>`);
  });
});

describe("a feedback request's body is read tolerantly", () => {
  it("a 250,000-character output is posted with the whole output attached as a file", async () => {
    f = await startFlowHarness();
    const output = "The article to review. ".repeat(Math.ceil(250_000 / 23)).slice(0, 250_000);
    // Refused with 400 ("output: Too big") before: nothing was posted and the flow waited.
    expect((await f.flow.send({ output })).status).toBe(202);
    const req = await pendingFlowRequest(f.h);
    const file = await eventually(() => f!.h.slack.files.find((x) => x.thread_ts === req.msg.ts), { what: "the output's file" });
    expect(file.content).toBe(output);
    expect((await flowRow(f.h, req.id)).output).toBe(output);
  });

  it("blank outcomes and a numeric deployment name are no reason to refuse; a refused body is logged with its flow and field only", async () => {
    const lines: string[] = [];
    f = await startFlowHarness({ crewline: { log: createLogger("debug", (l) => lines.push(l)) } });
    expect((await f.flow.send({ emit: ["approved", " ", "rejected"], deployment_name: 42, message: "m".repeat(25_000) })).status).toBe(202);
    const req = await pendingFlowRequest(f.h);
    expect(req.buttons.map((b) => b.text).slice(0, 2)).toEqual(["approved", "rejected"]);

    // More outcomes than can be offered: refused rather than answered from some of them; the operator sees why.
    const many = await f.flow.send({ emit: Array.from({ length: 21 }, (_, i) => `route_${i}`) });
    expect(many.status).toBe(400);
    expect(JSON.parse(many.text).error).toContain("21 distinct outcomes, at most 20");
    const logged = await eventually(() => lines.find((l) => l.includes("flow request malformed")), { what: "the warning" });
    expect(JSON.parse(logged)).toMatchObject({ level: "warn", flow: "content", problem: "invalid", field: "emit" });
    const token = new URL(String(many.body.callback_url)).searchParams.get("token")!;
    expect(logged).not.toContain(token);
    expect(logged).not.toContain("route_");
    expect(logged).not.toContain("human_feedback_requests");
  });
});

describe("which outcome approves", () => {
  it("a deadline that approves sends the approve-like outcome, not the first one that starts with an affirming word", async () => {
    const clock = offsetClock();
    f = await startFlowHarness({ flow: { decideWithinMs: 90_000, onTimeout: "approve" }, crewline: { clock } });
    await f.flow.send({ output: "Draft", emit: ["go_back", "publish"] });
    const req = await pendingFlowRequest(f.h);
    expect(req.buttons.map((b) => [b.text, b.style])).toContainEqual(["publish", "primary"]);
    expect(req.buttons.find((b) => b.text === "go_back")?.style).toBeUndefined();
    clock.offsetMs = 2 * 60_000;
    expect(await f.h.bot.flows.deadlinesDue()).toBe(1);
    await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
    expect(f.flow.answers[0]!.feedback).toMatch(/^publish\n\n/);
    expect(await answeredRow(f, req)).toMatchObject({ outcome: "publish", decidedByDeadline: true });
  });

  it("a flow offering no approve-like outcome: the approving deadline reminds, and neither Home nor the message offers an approval", async () => {
    const clock = offsetClock();
    f = await startFlowHarness({ flow: { decideWithinMs: 90_000, onTimeout: "approve", reviewers: { users: [BOB], usergroups: [] } }, crewline: { clock } });
    await f.flow.send({ output: "Draft", emit: ["go_back", "continue_editing"] });
    const req = await pendingFlowRequest(f.h);
    expect(req.buttons.map((b) => b.text)).not.toContain("Edit and approve…");
    expect(homeText(await openHome(f.h, BOB))).not.toContain(HOME_FLOW_APPROVE_ACTION);

    clock.offsetMs = 2 * 60_000;
    expect(await f.h.bot.flows.deadlinesDue()).toBe(1);
    const reminder = await eventually(() => underRequest(f!, req, /⏰/)[0], { what: "the deadline's reminder" });
    expect(reminder.text).toContain("it offers no approve outcome, so nothing was chosen for it");
    await settle();
    expect(f.flow.calls).toHaveLength(0);
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "pending", remindersSent: 1 });
  });
});
