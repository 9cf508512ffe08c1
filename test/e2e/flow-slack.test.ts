// The Slack side of flow feedback requests when Slack is slow or partial: the assignee's look-up
// failing for a while, a click on a request Slack shows before its ts is recorded, and a reassignment
// on an org-wide (Enterprise Grid) install. Through signed requests to /slack/events, the Slack
// stand-in and the local flow deployment.
import { afterEach, describe, expect, it } from "vitest";
import {
  FLOW_ACTIONS_BLOCK,
  FLOW_OUTCOME_ACTION_PREFIX,
  FLOW_REASSIGN_ACTION,
  REASSIGN_REASON_ACTION,
  REASSIGN_REASON_BLOCK,
  REASSIGN_USER_ACTION,
  REASSIGN_USER_BLOCK,
} from "../../src/adapters/slack/blocks/index.js";
import { clickFlow, FLOW_CHANNEL, type FlowHarness, flowRow, pendingFlowRequest, startFlowHarness } from "../support/flows.js";
import { eventually, USER } from "../support/harness.js";

let f: FlowHarness | undefined;
afterEach(async () => {
  await f?.close();
  f = undefined;
});

const BOB = "U0BOB";
const DAN = "U0DAN";
const ephemeralsTo = (f: FlowHarness, user: string) => f.h.slack.callsTo("chat.postEphemeral").filter((c) => c.args.user === user);
const requestPosts = (f: FlowHarness) => f.h.slack.callsTo("chat.postMessage").filter((c) => c.args.channel === FLOW_CHANNEL && !c.args.thread_ts && !c.error);

describe("the assignee named by e-mail", () => {
  it.each([
    ["rate limited", (f: FlowHarness) => f.h.slack.rateLimitNext("users.lookupByEmail", 1, 1)],
    ["answered with Slack's internal_error", (f: FlowHarness) => f.h.slack.failNext("users.lookupByEmail", "internal_error")],
  ])("is looked up again when the first look-up was %s: the request mentions them, and their answer reaches the flow", async (_, fail) => {
    f = await startFlowHarness({ flow: { reviewers: { users: [BOB], usergroups: [] } } });
    f.h.slack.setUser(DAN, { profile: { email: "dan@example.com" } });
    fail(f);

    await f.flow.send({ assigned_to_email: "dan@example.com" });

    // Posted once, after a second look-up, naming Dan (not "no Slack user with this e-mail").
    const req = await pendingFlowRequest(f.h, `<@${DAN}>`);
    expect(f.h.slack.callsTo("users.lookupByEmail")).toHaveLength(2);
    expect(JSON.stringify(req.msg.blocks)).not.toContain("no Slack user");
    expect(await flowRow(f.h, req.id)).toMatchObject({ assigneeUserId: DAN });
    expect(requestPosts(f)).toHaveLength(1);
    // A failed look-up posted nothing: no search for a post before posting.
    expect(f.h.slack.callsTo("conversations.history")).toHaveLength(0);

    await clickFlow(f.h, req, "approved", "", DAN);
    await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
    await f.h.settled();
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "answered", decidedBy: DAN });
    expect(ephemeralsTo(f, DAN)).toHaveLength(0);
  });

  it("is posted without them once the look-up has failed six times, rather than held through Slack's trouble", async () => {
    // The outbox's backoff shortened: six tries take about half a minute at its usual 1 s doubling.
    f = await startFlowHarness({ crewline: { outbox: { minBackoffMs: 20, maxBackoffMs: 100 } } });
    f.h.slack.setUser(DAN, { profile: { email: "dan@example.com" } });
    f.h.slack.failNext("users.lookupByEmail", "internal_error", 8);
    await f.flow.send({ assigned_to_email: "dan@example.com" });
    const req = await pendingFlowRequest(f.h, "dan@example.com");
    expect(f.h.slack.callsTo("users.lookupByEmail")).toHaveLength(6);
    expect(await flowRow(f.h, req.id)).toMatchObject({ assigneeUserId: null });
    expect(requestPosts(f)).toHaveLength(1);
  });
});

describe("a click on a request Slack shows before its ts is recorded", () => {
  /**
   * A click answered first, on a request that does not exist: a fresh process's first click may reach
   * its handler only after the post's answer has come, and the click below must come before it.
   */
  async function warmUp(f: FlowHarness) {
    await f.h.requests.blockAction({
      user_id: "U0WARM",
      channel_id: FLOW_CHANNEL,
      message_ts: "1.000001",
      action: { action_id: `${FLOW_OUTCOME_ACTION_PREFIX}0`, block_id: FLOW_ACTIONS_BLOCK, value: "00000000-0000-4000-8000-000000000000" },
    });
    await eventually(() => ephemeralsTo(f, "U0WARM")[0], { what: "the first click answered" });
  }

  /** The request's message as Slack shows it, before the bot has its ts; clicked by USER. */
  async function clickEarly(f: FlowHarness) {
    const msg = await eventually(() => f.h.slack.messages(FLOW_CHANNEL).find((m) => (m.blocks ?? []).some((b: any) => b.block_id === FLOW_ACTIONS_BLOCK)), {
      what: "the request shown",
    });
    const button = msg.blocks!.find((b: any) => b.block_id === FLOW_ACTIONS_BLOCK).elements[0];
    expect((await flowRow(f.h, button.value)).messageTs).toBeNull();
    await f.h.requests.blockAction({
      user_id: USER,
      channel_id: FLOW_CHANNEL,
      message_ts: msg.ts,
      action: { action_id: button.action_id, block_id: FLOW_ACTIONS_BLOCK, value: button.value },
    });
    return button.value as string;
  }

  it("waits for it while the post's answer is on its way, and the answer reaches the flow", async () => {
    f = await startFlowHarness();
    await warmUp(f);
    // Sooner than the click waits (about 2 s).
    f.h.slack.answerLateNext("chat.postMessage", 1500);
    await f.flow.send();
    const id = await clickEarly(f);
    await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
    await f.h.settled();
    expect(await flowRow(f.h, id)).toMatchObject({ state: "answered", decidedBy: USER });
    expect(ephemeralsTo(f, USER)).toHaveLength(0);
  });

  it("is asked to click again when the post's answer comes later than the click waits, and the next click counts", async () => {
    f = await startFlowHarness();
    await warmUp(f);
    // Later than the click waits (about 2 s), sooner than the call's time-out.
    f.h.slack.answerLateNext("chat.postMessage", 4000);
    await f.flow.send();
    const id = await clickEarly(f);
    const told = await eventually(() => ephemeralsTo(f!, USER)[0], { what: "the click's answer" });
    expect(told.args.text).toBe("This feedback request is still being posted, so nothing was sent to the flow yet. Please click again in a moment.");
    expect(f.flow.answers).toHaveLength(0);

    // Recorded once the answer comes (not posted twice), it takes the next click.
    const req = await pendingFlowRequest(f.h);
    expect(req.id).toBe(id);
    await clickFlow(f.h, req, "approved");
    await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
    await f.h.settled();
    expect(requestPosts(f)).toHaveLength(1);
    expect(await flowRow(f.h, id)).toMatchObject({ state: "answered", decidedBy: USER });
  });
});

describe("on an org-wide (Enterprise Grid) install", () => {
  const ORG = "E0GRID";
  const TEAM = "T0GRIDC";

  /** The app installed org-wide, as a browser does it (GET /slack/install, then the redirect with code and state). */
  async function installOrgWide(f: FlowHarness) {
    const page = await fetch(`${f.h.botUrl}/slack/install`, { redirect: "manual" });
    const cookie = page.headers.get("set-cookie")!.split(";")[0]!;
    const state = new URL(/href="(https:[^"]+)"/.exec(await page.text())![1]!.replace(/&amp;/g, "&")).searchParams.get("state")!;
    const code = f.h.slack.issueInstallCode({ teamId: ORG, enterpriseId: ORG, isEnterpriseInstall: true });
    const done = await fetch(`${f.h.botUrl}/slack/oauth_redirect?code=${code}&state=${encodeURIComponent(state)}`, { redirect: "manual", headers: { cookie } });
    expect(done.status).toBe(200);
  }

  it("a request handed to someone is on their App Home at once, published with the org's token", async () => {
    f = await startFlowHarness({ oauth: {}, flow: { team: TEAM, enterprise: ORG, reviewers: { users: [BOB], usergroups: [] } } });
    await installOrgWide(f);
    const orgToken = f.h.slack.botTokenOf(ORG)!;
    f.h.slack.setUser(BOB, { team_id: TEAM, enterprise_user: { enterprise_id: ORG } });
    f.h.slack.setUser(DAN, { team_id: TEAM, enterprise_user: { enterprise_id: ORG } });
    f.h.slack.setMembers(FLOW_CHANNEL, [DAN]);
    await f.flow.send({ output: "Draft" });
    const req = await pendingFlowRequest(f.h);

    // Bob hands it to Dan.
    await f.h.requests.blockAction({
      user_id: BOB,
      team_id: TEAM,
      enterprise_id: ORG,
      channel_id: FLOW_CHANNEL,
      message_ts: req.msg.ts,
      action: { action_id: FLOW_REASSIGN_ACTION, block_id: FLOW_ACTIONS_BLOCK, value: req.id },
    });
    const [opened] = await f.h.slack.waitForCalls("views.open", 1);
    const modal = opened!.args.view as any;
    const submitted = await f.h.requests.viewSubmission({
      user_id: BOB,
      team_id: TEAM,
      enterprise_id: ORG,
      view: {
        callback_id: modal.callback_id,
        private_metadata: modal.private_metadata,
        state: {
          values: {
            [REASSIGN_USER_BLOCK]: { [REASSIGN_USER_ACTION]: { type: "users_select", selected_user: DAN } },
            [REASSIGN_REASON_BLOCK]: { [REASSIGN_REASON_ACTION]: { type: "plain_text_input", value: "Dan owns the style guide" } },
          },
        },
      },
    });
    expect(submitted.status).toBe(200);
    await eventually(async () => (await flowRow(f!.h, req.id)).reassignedTo === DAN, { what: "the request reassigned" });

    const home = await eventually(() => f!.h.slack.callsTo("views.publish").find((c) => c.args.user_id === DAN), { what: "Dan's Home" });
    expect(home.token).toBe(orgToken);
    expect(home.error).toBeFalsy();
    expect(JSON.stringify(home.args.view)).toContain(`Reassigned to you by <@${BOB}>`);
  });
});
