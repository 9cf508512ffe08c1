// A run's channel shared with another organisation (Slack Connect): its people see the run, as every
// member of the channel does, but do not decide its reviews, reply them decided or stop it. Slack
// names the clicker's own team in the payload (user.team_id, team.id), and the author's team of a
// message (user_team); the bot itself is installed in its own workspace only (one bot token).
import { afterEach, describe, expect, it } from "vitest";
import {
  APPROVE_ACTION,
  FEEDBACK_ACTION,
  FEEDBACK_BLOCK,
  FLOW_ACTIONS_BLOCK,
  FLOW_FEEDBACK_ACTION,
  FLOW_FEEDBACK_BLOCK,
  RUN_ACTIONS_BLOCK,
  RUN_ON_MESSAGE_SHORTCUT,
  STOP_ACTION,
} from "../../src/adapters/slack/blocks/index.js";
import { clickFlow, type FlowHarness, flowRow, pendingFlowRequest, startFlowHarness } from "../support/flows.js";
import { CHANNEL, eventually, type Harness, startHarness, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { pendingReview, resumeCalls, startRunViaSlack } from "../support/reviews.js";

let h: Harness;
let f: FlowHarness | undefined;
afterEach(async () => {
  await (f ? f.close() : h?.close());
  f = undefined;
});

/** Someone of a partner organisation in the shared channel. */
const GUEST = { user: "U0GUEST", team: "T0PARTNER" };
const ephemeralsFor = (user: string) => h.slack.callsTo("chat.postEphemeral").filter((c) => (c.args as { user?: string }).user === user);
const stopCalls = () => h.crew.requests.filter((r) => r.method === "POST" && r.path.startsWith("/stop/"));

describe("a channel shared with another organisation", () => {
  it("its people may not decide, reply-decide or stop a run of this workspace; the run's own people may", async () => {
    h = await startHarness();
    const execution = await startRunViaSlack(h);
    const review = await pendingReview(h);

    // Approve, as the guest clicks it (their own team in the payload).
    await h.requests.blockAction({
      user_id: GUEST.user,
      team_id: GUEST.team,
      channel_id: CHANNEL,
      message_ts: review.msg.ts,
      thread_ts: review.msg.thread_ts,
      action: { action_id: APPROVE_ACTION, block_id: review.blockId, value: review.reviewId },
      stateValues: { [FEEDBACK_BLOCK]: { [FEEDBACK_ACTION]: { type: "plain_text_input", value: "" } } },
    });
    const refusal = await eventually(() => ephemeralsFor(GUEST.user)[0], { what: "the guest's refusal" });
    expect(refusal.args.text).toMatch(/another organisation's workspace: only its own people may decide it, so nothing was sent to the crew/);

    // "approve" in the thread, written by the guest.
    const run = await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } });
    const reply = { type: "message", channel: CHANNEL, user: GUEST.user, user_team: GUEST.team, text: "approve", ts: `${Date.now() / 1000}`, thread_ts: run.threadTs };
    expect((await h.requests.event(reply)).status).toBe(200);
    await eventually(() => ephemeralsFor(GUEST.user).length === 2, { what: "the guest's reply refusal" });
    expect(ephemeralsFor(GUEST.user)[1]!.args.text).toBe(refusal.args.text);

    // Stop, on the run's announcement.
    const announcement = await eventually(() => h.slack.messages(CHANNEL).find((m) => m.ts === run.threadTs && JSON.stringify(m.blocks ?? []).includes(STOP_ACTION)), {
      what: "the announcement's Stop button",
    });
    const stopValue = (announcement.blocks as { elements?: { action_id?: string; value?: string }[] }[]).flatMap((b) => b.elements ?? []).find((e) => e.action_id === STOP_ACTION)!
      .value!;
    await h.requests.blockAction({
      user_id: GUEST.user,
      team_id: GUEST.team,
      channel_id: CHANNEL,
      message_ts: announcement.ts,
      action: { action_id: STOP_ACTION, block_id: RUN_ACTIONS_BLOCK, value: stopValue },
    });
    await eventually(() => ephemeralsFor(GUEST.user).length === 3, { what: "the guest's stop refusal" });
    expect(ephemeralsFor(GUEST.user)[2]!.args.text).toMatch(/may stop it, so nothing was sent to the crew/);

    await h.settled();
    expect(resumeCalls(h)).toHaveLength(0);
    expect(stopCalls()).toHaveLength(0);
    const db = prismaOf(h.bot.database);
    expect((await db.review.findUniqueOrThrow({ where: { id: review.reviewId } })).state).toBe("pending");
    expect((await db.execution.findUniqueOrThrow({ where: { id: execution.id } })).state).not.toBe("stopped");
    expect(await db.auditRecord.count({ where: { kind: "decision" } })).toBe(0);

    // Someone of the run's own workspace decides it.
    await h.requests.blockAction({
      user_id: USER,
      channel_id: CHANNEL,
      message_ts: review.msg.ts,
      thread_ts: review.msg.thread_ts,
      action: { action_id: APPROVE_ACTION, block_id: review.blockId, value: review.reviewId },
      stateValues: { [FEEDBACK_BLOCK]: { [FEEDBACK_ACTION]: { type: "plain_text_input", value: "" } } },
    });
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    expect(resumeCalls(h)[0]!.body).toMatchObject({ is_approve: true });
    expect(h.slack.violations).toEqual([]);
  });

  it("its people may not start this workspace's crews, by /crew or on a message; the workspace's own people may", async () => {
    h = await startHarness();
    const guestCommand = await h.requests.command({ text: "", user_id: GUEST.user, channel_id: CHANNEL, team_id: GUEST.team, trigger_id: h.slack.issueTrigger(GUEST.user) });
    expect(guestCommand.status).toBe(200);
    expect(JSON.parse(guestCommand.body).text).toMatch(/another organisation's workspace: only its own people may start them/);
    const message = { ts: "1700000000.000100", text: "Summarise the partner's brief", user: GUEST.user };
    await h.requests.messageShortcut({ callback_id: RUN_ON_MESSAGE_SHORTCUT, user_id: GUEST.user, channel_id: CHANNEL, team_id: GUEST.team, message });
    const answer = await eventually(() => h.slack.callsTo("response_url")[0], { what: "the shortcut's answer" });
    expect(answer.args.text).toMatch(/only its own people may start them/);
    await h.settled();
    expect(h.slack.callsTo("views.open")).toHaveLength(0);
    expect(h.crew.requests.filter((r) => r.path === "/inputs" || r.path === "/kickoff")).toHaveLength(0);

    // Someone of the workspace gets the form.
    const own = await h.requests.command({ text: "", user_id: USER, channel_id: CHANNEL, trigger_id: h.slack.issueTrigger(USER) });
    expect(own.status).toBe(200);
    await eventually(() => h.slack.callsTo("views.open").length === 1, { what: "the kickoff form" });
  });

  it("its people may not answer a flow's request that names no workspace (one bot token): it is the installation's", async () => {
    f = await startFlowHarness();
    h = f.h;
    await f.flow.send({ output: "Draft for the partner" });
    const req = await pendingFlowRequest(h);
    const button = req.buttons.find((b) => b.text === "approved")!;
    await h.requests.blockAction({
      user_id: GUEST.user,
      team_id: GUEST.team,
      channel_id: req.msg.channel,
      message_ts: req.msg.ts,
      action: { action_id: button.action_id, block_id: FLOW_ACTIONS_BLOCK, value: req.id },
      stateValues: { [FLOW_FEEDBACK_BLOCK]: { [FLOW_FEEDBACK_ACTION]: { type: "plain_text_input", value: "" } } },
    });
    const refusal = await eventually(() => ephemeralsFor(GUEST.user)[0], { what: "the guest's refusal" });
    expect(refusal.args.text).toMatch(/another organisation's workspace: only its own people may answer it, so nothing was sent to the flow/);
    await h.settled();
    expect(f.flow.calls).toHaveLength(0);
    expect((await flowRow(h, req.id)).state).toBe("pending");

    await clickFlow(h, req, "approved");
    await eventually(() => f!.flow.calls.length === 1, { what: "the answer at the flow" });
  });
});
