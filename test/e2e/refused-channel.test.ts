// A channel that refuses the bot for good (archived, the bot removed): the review, the completion
// notice and a flow's feedback request reach a person in a direct message anyway, and are decided
// there under the same rules and the same exactly-once decision. Through the real boundaries: the
// Slack stand-in answers is_archived / not_in_channel for the channel, clicks are signed requests.
import { afterEach, describe, expect, it } from "vitest";
import { APPROVE_ACTION, FEEDBACK_ACTION, FEEDBACK_BLOCK, REJECT_ACTION } from "../../src/adapters/slack/blocks/index.js";
import { NOT_THIS_MESSAGE } from "../../src/adapters/slack/decisions/replies.js";
import type { FakeMessage } from "../support/fake-slack.js";
import { clickFlow, FLOW_CHANNEL, type FlowHarness, flowRow, pendingFlowRequest, startFlowHarness } from "../support/flows.js";
import { CHANNEL, eventually, type Harness, startHarness, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { resumeCalls, startRunViaSlack } from "../support/reviews.js";

let h: Harness | undefined;
let f: FlowHarness | undefined;
afterEach(async () => {
  await h?.close();
  await f?.close();
  h = undefined;
  f = undefined;
});

const MALLORY = "U0MALLORY";
const DAN = "U0DAN";
const text = (m: FakeMessage | undefined) => JSON.stringify(m?.blocks ?? []);

/** The open review (its Approve button) in a channel, once the bot has stored its ts. */
function openReviewIn(h: Harness, channel: string, containing: string) {
  return eventually(
    async () => {
      for (const msg of h.slack.messages(channel)) {
        const actions = (msg.blocks ?? []).find((b: any) => b.type === "actions" && b.elements.some((e: any) => e.action_id === APPROVE_ACTION));
        if (!actions || !text(msg).includes(containing)) continue;
        const reviewId = actions.elements.find((e: any) => e.action_id === APPROVE_ACTION).value as string;
        const stored = await prismaOf(h.bot.database).review.findFirst({ where: { id: reviewId, messageTs: msg.ts } });
        if (stored) return { msg, reviewId, blockId: actions.block_id as string };
      }
      return undefined;
    },
    { what: `an open review containing "${containing}" in ${channel}`, timeoutMs: 15_000 },
  );
}

function click(h: Harness, where: { channel: string; ts: string }, review: { reviewId: string; blockId: string }, approve: boolean, user = USER, feedback = "") {
  return h.requests.blockAction({
    user_id: user,
    channel_id: where.channel,
    message_ts: where.ts,
    action: { action_id: approve ? APPROVE_ACTION : REJECT_ACTION, block_id: review.blockId, value: review.reviewId },
    stateValues: { [FEEDBACK_BLOCK]: { [FEEDBACK_ACTION]: { type: "plain_text_input", value: feedback } } },
  });
}

describe("a channel that refuses the bot", () => {
  it("sends the review to the run's starter directly; deciding there resumes the crew once; the completion notice follows", { timeout: 60_000 }, async () => {
    h = await startHarness({
      crew: {
        tasks: [
          { id: "task-research", name: "research_task", agent: "Researcher", humanInput: true, delayMs: 300, output: "Findings about *vents*." },
          { id: "task-write", name: "writing_task", agent: "Writer", delayMs: 50, output: "The final article." },
        ],
      },
    });
    const started = startRunViaSlack(h);
    // Archived once the run is announced (before its first task ends): every later post or update in the channel is refused.
    await eventually(() => h!.slack.messages(CHANNEL).length > 0, { what: "the announcement" });
    h.slack.denyChannel(CHANNEL, "is_archived");
    const execution = await started;

    const dm = await eventually(() => h!.slack.conversationWith(USER), { what: "a direct message with the starter", timeoutMs: 15_000 });
    const review = await openReviewIn(h, dm, "research_task");
    const shown = text(review.msg);
    expect(shown).toContain(`couldn't post in <#${CHANNEL}>`);
    expect(shown).toContain("the channel is archived");
    expect(shown).toContain("*research*");
    expect(shown).toContain(`<@${USER}>`);
    expect(shown).toContain(APPROVE_ACTION);
    expect(shown).toContain(REJECT_ACTION);
    expect(review.msg.text).toContain("the channel is archived");

    // The database records where the run and its review now are.
    const moved = await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } });
    expect(moved).toMatchObject({ movedTo: dm, movedBecause: "is_archived" });
    expect(await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).toMatchObject({
      channelId: dm,
      messageTs: review.msg.ts,
      state: "pending",
    });
    // Slack's refusal was met in the channel (by whichever message tried it first: the run's progress
    // or the review), and the message that met it was given up rather than retried (below, at the end).
    const refusedInChannel = () => h!.slack.calls.filter((c) => c.error === "is_archived").length;
    expect(refusedInChannel()).toBeGreaterThan(0);

    // App Home lists it, with a link to the direct message.
    await h.requests.event({ type: "app_home_opened", user: USER, channel: dm, tab: "home" });
    const home = await eventually(() => h!.slack.callsTo("views.publish").find((c) => (c.args.user_id as string) === USER));
    const homeText = JSON.stringify(home.args.view);
    expect(homeText).toContain("research_task");
    expect(homeText).toContain(`/archives/${dm}/p${review.msg.ts.replace(".", "")}`);

    // A click claiming another message (the channel, or another message of the DM) decides nothing.
    await click(h, { channel: CHANNEL, ts: review.msg.ts }, review, true);
    await click(h, { channel: dm, ts: "1700000000.000100" }, review, true);
    await eventually(() => h!.slack.ephemerals.some((e) => e.channel === dm && e.text === NOT_THIS_MESSAGE), { what: "the refusal of a forged click" });
    expect(resumeCalls(h)).toHaveLength(0);

    // Someone who may not see the run is refused too (crew without reviewers: the starter and the channel's members).
    await click(h, { channel: dm, ts: review.msg.ts }, review, true, MALLORY);
    await eventually(() => h!.slack.ephemerals.filter((e) => e.channel === dm && e.text === NOT_THIS_MESSAGE).length >= 2);
    expect(resumeCalls(h)).toHaveLength(0);

    // The starter approves from the DM message, twice: the crew hears it once, and the DM message shows the decision.
    await click(h, { channel: dm, ts: review.msg.ts }, review, true);
    await click(h, { channel: dm, ts: review.msg.ts }, review, true);
    await eventually(() => resumeCalls(h!).length === 1, { what: "the resume" });
    expect((resumeCalls(h)[0]!.body as any).is_approve).toBe(true);
    const decided = await eventually(() => {
      const m = h!.slack.messages(dm).find((x) => x.ts === review.msg.ts && x.updated);
      return m && !text(m).includes(APPROVE_ACTION) && text(m).includes("Approved") ? m : undefined;
    });
    expect(text(decided)).toContain("the channel is archived");

    // The completion notice goes to the DM too, with the same header.
    const finished = await eventually(
      async () => {
        const e = await prismaOf(h!.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } });
        return e.completionTs ? e : undefined;
      },
      { what: "the completion notice", timeoutMs: 15_000 },
    );
    const completion = h.slack.messages(dm).find((m) => m.ts === finished.completionTs);
    expect(completion?.text).toContain("the channel is archived");
    expect(completion?.text).toMatch(/research/);
    expect(text(completion)).toContain("The final article.");
    expect(resumeCalls(h)).toHaveLength(1);
    // Nothing reached the archived channel after it was archived.
    expect(h.slack.messages(CHANNEL).filter((m) => m.ts !== execution.threadTs && JSON.stringify(m).includes(APPROVE_ACTION))).toHaveLength(0);
    // Nothing tries the channel again: once settled, no refused message waits to be retried.
    await h.settled();
    expect(await prismaOf(h.bot.database).slackEffect.count({ where: { state: "due", lastError: "is_archived" } })).toBe(0);
  });

  it("a review shown in the channel before the bot was removed is posted again in the DM when its reminder is refused; the old message no longer decides", {
    timeout: 60_000,
  }, async () => {
    const clock = { offsetMs: 0, now: () => new Date(Date.now() + clock.offsetMs) };
    h = await startHarness({
      config: { reviewReminders: { afterMinutes: 1, max: 2 } },
      crewline: { clock },
      crew: { tasks: [{ id: "task-research", name: "research_task", agent: "Researcher", humanInput: true, delayMs: 50, output: "Findings." }] },
    });
    const execution = await startRunViaSlack(h);
    const inChannel = await openReviewIn(h, CHANNEL, "research_task");
    h.slack.denyChannel(CHANNEL, "not_in_channel");

    clock.offsetMs = 61_000;
    expect(await h.bot.reviewRequests.remindDue()).toBe(1);
    const dm = await eventually(() => h!.slack.conversationWith(USER), { what: "a direct message with the starter", timeoutMs: 15_000 });
    const again = await openReviewIn(h, dm, "research_task");
    expect(again.reviewId).toBe(inChannel.reviewId);
    expect(text(again.msg)).toContain("Crewline is not a member of the channel any more");
    expect(await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } })).toMatchObject({ movedTo: dm, movedBecause: "not_in_channel" });

    // The button left in the channel names the same review, but not its message any more.
    await click(h, { channel: CHANNEL, ts: inChannel.msg.ts }, inChannel, true);
    await (h ?? f!.h).settled();
    expect(resumeCalls(h)).toHaveLength(0);

    // Later reminders follow the run to the DM.
    clock.offsetMs = 4 * 61_000;
    expect(await h.bot.reviewRequests.remindDue()).toBe(1);
    await eventually(() => h!.slack.messages(dm).find((m) => /⏰/.test(m.text ?? "")), { what: "the next reminder in the DM" });

    await click(h, { channel: dm, ts: again.msg.ts }, again, true);
    await eventually(() => resumeCalls(h!).length === 1, { what: "the resume" });
    await eventually(() => h!.slack.messages(dm).find((m) => m.ts === again.msg.ts && m.updated && !text(m).includes(APPROVE_ACTION)), { what: "the DM message decided" });
  });

  it("sends a flow request the channel refuses to its assignee directly, and answers the flow once from there", { timeout: 60_000 }, async () => {
    f = await startFlowHarness();
    f.h.slack.setUser(DAN, { profile: { email: "dan@example.com" } });
    f.h.slack.denyChannel(FLOW_CHANNEL, "not_in_channel");
    await f.flow.send({ assigned_to_email: "dan@example.com", message: "Check <!channel> this" });

    const dm = await eventually(() => f!.h.slack.conversationWith(DAN), { what: "a direct message with the assignee", timeoutMs: 15_000 });
    const req = await pendingFlowRequest(f.h, "", dm);
    const shown = text(req.msg);
    expect(shown).toContain(`couldn't post in <#${FLOW_CHANNEL}>`);
    expect(shown).toContain("Crewline is not a member of the channel");
    expect(shown).toContain("*content*");
    expect(req.buttons.map((b) => b.text)).toContain("approved");
    expect(await flowRow(f.h, req.id)).toMatchObject({ channelId: dm, movedFrom: FLOW_CHANNEL, movedBecause: "not_in_channel", messageTs: req.msg.ts });

    // A click claiming the refused channel's message is refused; the assignee's click in the DM answers once.
    await clickFlow(f.h, req, "approved", "", DAN, { channel: FLOW_CHANNEL });
    await clickFlow(f.h, req, "approved", "Looks good", DAN);
    await clickFlow(f.h, req, "approved", "Looks good", DAN);
    await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
    await (h ?? f!.h).settled();
    expect(f.flow.calls).toHaveLength(1);
    expect(f.flow.answers[0]).toMatchObject({ feedback: "approved\n\nLooks good", source: "slack" });
    const updated = await eventually(() => f!.h.slack.messages(dm).find((m) => m.ts === req.msg.ts && m.updated && !text(m).includes('"actions"')));
    expect(text(updated)).toContain("Crewline is not a member of the channel");
    expect(text(updated)).toContain(`<@${DAN}>`);
  });

  it("a flow request with neither assignee nor reviewers, refused in its channel, is given up and counted; nothing loops", { timeout: 60_000 }, async () => {
    f = await startFlowHarness({ config: { metricsToken: "metrics-token-0123456789abcdef" } });
    f.h.slack.denyChannel(FLOW_CHANNEL, "is_archived");
    await f.flow.send({});
    const move = await eventually(async () => (await prismaOf(f!.h.bot.database).slackEffect.findFirst({ where: { kind: "flow.move", state: "dead" } })) ?? undefined, {
      what: "the move given up",
    });
    expect(move.lastError).toMatch(/nobody/);
    await f.h.settled();
    expect(await prismaOf(f.h.bot.database).slackEffect.count({ where: { kind: "flow.move" } })).toBe(1);
    expect(f.h.slack.callsTo("conversations.open")).toHaveLength(0);
    const metrics = await fetch(`${f.h.botUrl}/metrics`, { headers: { authorization: "Bearer metrics-token-0123456789abcdef" } }).then((r) => r.text());
    expect(metrics).toMatch(/effect="flow\.move"\} 1/);
  });
});
