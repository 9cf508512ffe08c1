// "Run a crew on this message": a message shortcut opens the kickoff form with the message's text in
// it, and the run is announced (and reviewed) in that message's thread.
import { afterEach, describe, expect, it } from "vitest";
import {
  APPROVE_ACTION,
  CREW_SELECT_ACTION,
  INPUT_ACTION,
  inputBlockId,
  KICKOFF_VIEW_CALLBACK,
  RUN_ON_MESSAGE_SHORTCUT,
  SOURCE_TEXT_BLOCK,
} from "../../src/adapters/slack/blocks/index.js";
import { CHANNEL, eventually, type Harness, SIGNING_SECRET, startHarness, submitKickoffForm, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { signSlackBody } from "../support/slack-requests.js";

let h: Harness;
afterEach(async () => h?.close());

const MESSAGE_TS = "1700000000.000100";

/** The latest view the bot showed that has a submit button (the form, or the picker). */
async function shownView(what: string, match: (view: any) => boolean) {
  return eventually(
    () =>
      h.slack
        .callsTo("views.update")
        .map((c) => c.args.view as any)
        .filter((v) => v?.submit && match(v))
        .at(-1),
    { what },
  );
}
const isForm = (v: any) => v.callback_id === KICKOFF_VIEW_CALLBACK;
const inputOf = (form: any, name: string) => form.blocks.find((b: any) => b.block_id === inputBlockId(name));

async function useShortcut(message: Record<string, unknown> & { ts: string }, user = USER) {
  const res = await h.requests.messageShortcut({ callback_id: RUN_ON_MESSAGE_SHORTCUT, user_id: user, channel_id: CHANNEL, message });
  expect(res.status).toBe(200);
}

describe("Run a crew on this message (message shortcut)", () => {
  it("puts the message's text in the crew's text input, its permalink in the kickoff's meta, and runs the crew in its thread", async () => {
    h = await startHarness({ crew: { inputs: ["audience", "topic"] } });
    // As Slack sends it: the mention a token, "&" escaped.
    await useShortcut({ ts: MESSAGE_TS, user: "U0BOB", text: "Write about *solar sails* for <@U0BOB> &amp; friends" });
    const text = "Write about *solar sails* for @U0BOB & friends";

    const [opened] = await h.slack.waitForCalls("views.open", 1);
    expect(JSON.stringify(opened!.args.view)).toContain("Loading");
    const form = await shownView("the kickoff form", isForm);
    // "topic" says it takes the text; "audience" (the first input) does not.
    expect(inputOf(form, "topic").element.initial_value).toBe(text);
    expect(inputOf(form, "audience").element.initial_value).toBeUndefined();

    await submitKickoffForm(h, form, { audience: "engineers", topic: text });
    const kickoff = await eventually(() => h.crew.requests.find((r) => r.path === "/kickoff"), { what: "POST /kickoff" });
    expect((kickoff.body as any).inputs).toEqual({ audience: "engineers", topic: text });
    expect((kickoff.body as any).meta).toMatchObject({ source: "slack", permalink: `https://example.slack.com/archives/${CHANNEL}/p1700000000000100` });

    const execution = await eventually(async () => {
      const e = await prismaOf(h.bot.database).execution.findFirst();
      return e?.kickoffId ? e : undefined;
    });
    // The run's thread is the message's; its announcement is a reply there.
    expect(execution.threadTs).toBe(MESSAGE_TS);
    const announcement = h.slack.messages(CHANNEL).find((m) => m.ts === execution.announcementTs);
    expect(announcement?.thread_ts).toBe(MESSAGE_TS);
    // Once started, the announcement (not the user's message) is updated with the kickoff id.
    await eventually(() => h.slack.callsTo("chat.update").some((c) => c.args.ts === execution.announcementTs && JSON.stringify(c.args.blocks).includes(execution.kickoffId!)), {
      what: "the announcement updated with its kickoff id",
    });
    expect(h.slack.callsTo("chat.update").filter((c) => c.args.ts === MESSAGE_TS)).toEqual([]);

    // The crew's review lands in the same thread, with its buttons.
    const review = await eventually(
      () => h.slack.messages(CHANNEL).find((m) => m.thread_ts === MESSAGE_TS && m.ts !== execution.announcementTs && JSON.stringify(m.blocks ?? []).includes(APPROVE_ACTION)),
      { what: "the review in the message's thread" },
    );
    expect(review).toBeTruthy();
  });

  it("fills the form, and so the crew's input, with the message as Slack shows it, not its escaped wire text", async () => {
    h = await startHarness({ crew: { inputs: ["topic"] } });
    const wire =
      "Q&amp;A: is 1 &lt; 2 &amp;&amp; 3 &gt; 2? Write `&amp;lt;` as is. " +
      "Ask <@U0ANN|ann>, <@U0BOB>, <!subteam^S0OPS|@ops> and <!here> in <#C0GEN|general>; " +
      "read <https://example.com/a?b=1&amp;c=2|the brief>, <https://example.com/raw> and <https://x.y|https://x.y>, " +
      "write to <mailto:ann@example.com|ann@example.com> by <!date^1700000000^{date_short}|Nov 14, 2023>. 😀";
    await useShortcut({ ts: MESSAGE_TS, user: "U0BOB", text: wire });

    const shown =
      "Q&A: is 1 < 2 && 3 > 2? Write `&lt;` as is. " +
      "Ask @ann, @U0BOB, @ops and @here in #general; " +
      "read the brief (https://example.com/a?b=1&c=2), https://example.com/raw and https://x.y, " +
      "write to ann@example.com by Nov 14, 2023. 😀";
    const form = await shownView("the kickoff form", isForm);
    expect(inputOf(form, "topic").element.initial_value).toBe(shown);
    expect(h.slack.violations).toEqual([]);

    // Submitted as it was filled in, the crew gets the readable text.
    await submitKickoffForm(h, form, { topic: inputOf(form, "topic").element.initial_value });
    const kickoff = await eventually(() => h.crew.requests.find((r) => r.path === "/kickoff"), { what: "POST /kickoff" });
    expect((kickoff.body as any).inputs).toEqual({ topic: shown });
  });

  it("runs a crew started from a reply in the thread that reply is in", async () => {
    h = await startHarness();
    await useShortcut({ ts: "1700000000.000200", thread_ts: MESSAGE_TS, user: "U0BOB", text: "please dig into tides" });
    const form = await shownView("the kickoff form", isForm);
    expect(inputOf(form, "topic").element.initial_value).toBe("please dig into tides");
    await submitKickoffForm(h, form, { topic: "tides" });

    const kickoff = await eventually(() => h.crew.requests.find((r) => r.path === "/kickoff"), { what: "POST /kickoff" });
    expect((kickoff.body as any).meta.permalink).toContain("p1700000000000200");
    const execution = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { kickoffId: { not: null } } }));
    expect(execution.threadTs).toBe(MESSAGE_TS);
  });

  it("asks which crew first when there are several, and carries the message's text, as changed there, into the form", async () => {
    h = await startHarness({ crews: [{ name: "writer" }] });
    await useShortcut({ ts: MESSAGE_TS, user: "U0BOB", text: "first draft" });
    const picker = await shownView("the crew picker", (v) => JSON.stringify(v).includes(CREW_SELECT_ACTION));
    const source = picker.blocks.find((b: any) => b.block_id === SOURCE_TEXT_BLOCK);
    expect(source.element.initial_value).toBe("first draft");

    const select = picker.blocks.find((b: any) => b.element?.action_id === CREW_SELECT_ACTION);
    const option = select.element.options.find((o: any) => o.text.text === "writer");
    await h.requests.blockAction({
      user_id: USER,
      channel_id: CHANNEL,
      message_ts: "",
      action: { action_id: CREW_SELECT_ACTION, block_id: select.block_id, type: "static_select", selected_option: option },
      view: { id: [...h.slack.views.values()].at(-1)!.id, private_metadata: picker.private_metadata, callback_id: picker.callback_id },
      stateValues: { [SOURCE_TEXT_BLOCK]: { [INPUT_ACTION]: { type: "plain_text_input", value: "second draft" } } },
    });
    const form = await shownView("the writer's form", (v) => isForm(v) && JSON.stringify(v).includes("writer"));
    expect(inputOf(form, "topic").element.initial_value).toBe("second draft");

    await submitKickoffForm(h, form, { topic: "second draft" });
    const execution = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { kickoffId: { not: null } } }));
    expect(execution).toMatchObject({ crewName: "writer", threadTs: MESSAGE_TS });
  });

  it("takes a message of any size and any characters, cut to what a Slack text box holds", async () => {
    h = await startHarness();
    // 2,999 characters, then an emoji across the 3,000 limit, a NUL and far more text.
    const text = `${"a".repeat(2999)}😀\u0000${"b".repeat(50_000)}`;
    await useShortcut({ ts: MESSAGE_TS, user: "U0BOB", text });
    const form = await shownView("the kickoff form", isForm);
    const initial: string = inputOf(form, "topic").element.initial_value;
    expect(initial).toBe("a".repeat(2999));
    expect(h.slack.violations).toEqual([]);
  });

  it("refuses a form whose thread was changed on the way (the thread is sealed with the form)", async () => {
    h = await startHarness();
    await useShortcut({ ts: MESSAGE_TS, user: "U0BOB", text: "tides" });
    const form = await shownView("the kickoff form", isForm);
    const meta = JSON.parse(form.private_metadata);
    const forged = { ...form, private_metadata: JSON.stringify({ ...meta, thread: "1600000000.000001" }) };
    const answer = await submitKickoffForm(h, forged, { topic: "tides" });
    expect(JSON.stringify(answer.json)).toContain("expired or was opened by someone else");
    expect(h.crew.requests.filter((r) => r.path === "/kickoff")).toEqual([]);
    expect(await prismaOf(h.bot.database).execution.count()).toBe(0);
  });
});

describe("Run a crew on this message, in an org-wide (Enterprise Grid) install", () => {
  const ORG = "E0GRID";
  const GRID = { team: "T0GRIDA", channel: "C0GRID", user: "U0GRIDUSER" };

  /** The app installed org-wide, as a browser does it (GET /slack/install, then the redirect with code and state). */
  async function installOrgWide() {
    const page = await fetch(`${h.botUrl}/slack/install`, { redirect: "manual" });
    const cookie = page.headers.get("set-cookie")!.split(";")[0]!;
    const state = new URL(/href="(https:[^"]+)"/.exec(await page.text())![1]!.replace(/&amp;/g, "&")).searchParams.get("state")!;
    const code = h.slack.issueInstallCode({ teamId: ORG, enterpriseId: ORG, isEnterpriseInstall: true });
    const done = await fetch(`${h.botUrl}/slack/oauth_redirect?code=${code}&state=${encodeURIComponent(state)}`, { redirect: "manual", headers: { cookie } });
    expect(done.status).toBe(200);
  }

  /** A message_action as Slack sends it for an org-wide install: `team` is null; the user's team_id names their workspace. */
  function orgWideShortcut(message: { ts: string; text: string; user: string }, userTeam: string) {
    const payload = {
      type: "message_action",
      callback_id: RUN_ON_MESSAGE_SHORTCUT,
      token: "legacy",
      api_app_id: "A0APP",
      action_ts: `${Date.now() / 1000}`,
      trigger_id: h.slack.issueTrigger(GRID.user),
      team: null,
      user: { id: GRID.user, username: "grid", name: "grid", team_id: userTeam },
      channel: { id: GRID.channel, name: "grid" },
      is_enterprise_install: true,
      enterprise: { id: ORG, name: "Grid" },
      message_ts: message.ts,
      message: { type: "message", ...message },
      response_url: h.slack.responseUrlFor({ channel: GRID.channel, user: GRID.user }),
    };
    const body = new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
    return h.requests.raw(body, { "Content-Type": "application/x-www-form-urlencoded", ...signSlackBody(SIGNING_SECRET, body) });
  }

  it("stores the run with the user's workspace (team is null), announces it with the org's token, and lists it on that workspace's App Home", async () => {
    h = await startHarness({ oauth: {}, crew: { inputs: ["topic"] } });
    await installOrgWide();
    const orgToken = h.slack.botTokenOf(ORG)!;
    expect((await orgWideShortcut({ ts: MESSAGE_TS, text: "Summarise the launch plan", user: "U0BOB" }, GRID.team)).status).toBe(200);
    const form = await shownView("the kickoff form", isForm);
    await submitKickoffForm(h, form, { topic: "Summarise the launch plan" }, GRID.user, { team_id: GRID.team, enterprise_id: ORG });

    const execution = await eventually(async () => {
      const e = await prismaOf(h.bot.database).execution.findFirst({ include: { reviews: true } });
      return e?.reviews.some((r) => r.messageTs) ? e : undefined;
    });
    expect(execution).toMatchObject({ teamId: GRID.team, enterpriseId: ORG, channelId: GRID.channel, threadTs: MESSAGE_TS });
    const announced = h.slack.callsTo("chat.postMessage").find((c) => c.args.channel === GRID.channel && c.args.thread_ts === MESSAGE_TS);
    expect(announced?.token).toBe(orgToken);

    // What goes by workspace finds it: the user's App Home, opened in their workspace, lists its review.
    await h.requests.event({ type: "app_home_opened", user: GRID.user, channel: "D0GRIDUSER", tab: "home" }, { team_id: GRID.team, enterprise_id: ORG });
    const home = await eventually(() => h.slack.callsTo("views.publish").find((c) => c.args.user_id === GRID.user), { what: "the App Home" });
    expect(home.token).toBe(orgToken);
    expect(JSON.stringify(home.args.view)).toContain(execution.reviews[0]!.taskName);
  });

  it("refuses, and stores nothing, when the payload names no workspace (the user's team_id is the org's)", async () => {
    h = await startHarness({ oauth: {}, crew: { inputs: ["topic"] } });
    await installOrgWide();
    expect((await orgWideShortcut({ ts: MESSAGE_TS, text: "Summarise the launch plan", user: "U0BOB" }, ORG)).status).toBe(200);
    const answer = await eventually(() => h.slack.callsTo("response_url")[0], { what: "the shortcut's answer" });
    expect(answer.args.text).toMatch(/did not say which workspace you are in, so no crew was started/);
    await h.settled();
    expect(h.slack.callsTo("views.open")).toHaveLength(0);
    expect(await prismaOf(h.bot.database).execution.count()).toBe(0);
  });
});
