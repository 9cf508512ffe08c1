// Distribution (OAuth): two workspaces install the app the way a browser does (GET /slack/install,
// then the redirect with the state cookie), each run posts with its own workspace's token, tokens are
// never in the database in plain text, crews are limited per workspace, and an uninstall stops only
// its own workspace.
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  APPROVE_ACTION,
  FLOW_ACTIONS_BLOCK,
  FLOW_FEEDBACK_ACTION,
  FLOW_FEEDBACK_BLOCK,
  REASSIGN_ACTION,
  REASSIGN_REASON_ACTION,
  REASSIGN_REASON_BLOCK,
  REASSIGN_USER_ACTION,
  REASSIGN_USER_BLOCK,
  REVIEW_ACTIONS_BLOCK,
} from "../../src/adapters/slack/blocks/index.js";
import { loadConfig } from "../../src/config/config.js";
import { createLogger } from "../../src/log/log.js";
import type { InstallGrant } from "../../src/playground/slack-standin.js";
import { startFlowService } from "../../src/sim/flow-service.js";
import { LIVE_RUN_RECHECK_MS } from "../../src/usecases/callbacks.js";
import { UNINSTALLED_NOTE } from "../../src/usecases/workspaces.js";
import { eventually, type Harness, kickoffViaSlack, startHarness } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";

let h: Harness;
afterEach(async () => h?.close());

const ONE = { team: "T0ONE", channel: "C0ONE", user: "U0ONEUSER" };
const TWO = { team: "T0TWO", channel: "C0TWO", user: "U0TWOUSER" };
const THREE = { team: "T0THREE", channel: "C0THREE", user: "U0THREEUSER" };

/** What a browser does: open the install page, follow its link to Slack, come back with code and state. */
async function installViaBrowser(h: Harness, teamId: string, grant: Partial<InstallGrant> = {}): Promise<Response> {
  const page = await fetch(`${h.botUrl}/slack/install`, { redirect: "manual" });
  expect(page.status).toBe(200);
  const cookie = page.headers.get("set-cookie")?.split(";")[0];
  expect(cookie).toMatch(/^slack-app-oauth-state=/);
  const link = /href="(https:[^"]+)"/.exec(await page.text())?.[1]?.replace(/&amp;/g, "&");
  expect(link).toBeDefined();
  const authorize = new URL(link!);
  expect(authorize.pathname).toBe("/oauth/v2/authorize");
  expect(authorize.searchParams.get("client_id")).toBe("1111.2222");
  expect(authorize.searchParams.get("scope")).toContain("chat:write");
  const state = authorize.searchParams.get("state")!;
  // The user approves in Slack; Slack sends the browser back with a one-time code.
  const code = h.slack.issueInstallCode({ teamId, teamName: `Team ${teamId}`, ...grant });
  return fetch(`${h.botUrl}/slack/oauth_redirect?code=${encodeURIComponent(code)}&state=${encodeURIComponent(state)}`, {
    redirect: "manual",
    headers: { cookie: cookie! },
  });
}

async function startRunIn(h: Harness, ws: { team: string; channel: string; user: string; enterprise?: string }) {
  const earlier = (await prismaOf(h.bot.database).execution.findMany({ select: { id: true } })).map((e) => e.id);
  const answer = await kickoffViaSlack(h, { topic: `news of ${ws.team}` }, ws.user, ws.channel, { team: ws.team, enterprise: ws.enterprise, crew: "research" });
  expect(answer.status).toBe(200);
  return eventually(
    async () => {
      const e = await prismaOf(h.bot.database).execution.findFirst({
        where: { teamId: ws.team, state: "waiting", id: { notIn: earlier } },
        include: { reviews: true },
        orderBy: { createdAt: "desc" },
      });
      return e?.reviews.some((r) => r.messageTs) ? e : undefined;
    },
    { what: `a run in ${ws.team} waiting with its review posted`, timeoutMs: 30_000 },
  );
}

describe("OAuth distribution", () => {
  it('offers a crew without teams: to no workspace, one with teams: ["*"] to every workspace, and lists a flow only in its own; says which at start-up', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-offers-"));
    const file = path.join(dir, "crews.yaml");
    const entry = (name: string, teams?: string) => `  - name: ${name}\n    baseUrl: https://${name}.example.com\n    token: t\n${teams ? `    teams: ${teams}\n` : ""}`;
    fs.writeFileSync(file, `crews:\n${entry("quiet")}${entry("everyone", '["*"]')}`);
    const parsed = loadConfig({
      SLACK_SIGNING_SECRET: "s",
      SLACK_CLIENT_ID: "1111.2222",
      SLACK_CLIENT_SECRET: "client-secret-value",
      SLACK_STATE_SECRET: "state-secret-0123456789",
      ENCRYPTION_KEY: randomBytes(32).toString("base64"),
      CREWS_FILE: file,
    });
    const lines: string[] = [];
    const flows = [
      { name: "content", secret: "flow-webhook-secret", channel: "C0FLOWS", team: ONE.team },
      { name: "stray", secret: "flow-webhook-secret", channel: "C0STRAY" }, // no workspace (config refuses it; built here)
    ];
    h = await startHarness({ oauth: {}, config: { crews: parsed.crews, flows }, crewline: { log: createLogger("info", (l) => lines.push(l)) } });
    expect(lines.find((l) => l.includes("crews open to every workspace"))).toContain('"everyone"');
    expect(lines.find((l) => l.includes("crews offered to no workspace"))).toContain('"quiet"');
    expect(lines.find((l) => l.includes("flows with no workspace"))).toContain('"stray"');

    expect((await installViaBrowser(h, ONE.team)).status).toBe(200);
    expect((await installViaBrowser(h, TWO.team)).status).toBe(200);
    const helpIn = async (ws: typeof ONE) =>
      JSON.parse((await h.requests.command({ text: "help", user_id: ws.user, channel_id: ws.channel, team_id: ws.team })).body).text as string;
    const help = await helpIn(ONE);
    expect(help).toContain("everyone");
    expect(help).not.toContain("quiet");
    // The flow's name and webhook URL: in its own workspace only; the stray flow nowhere.
    expect(help).toContain(`${h.botUrl}/hooks/flows/content`);
    const other = await helpIn(TWO);
    expect(other).toContain("everyone");
    for (const text of [help, other]) expect(text).not.toContain("stray");
    expect(other).not.toMatch(/content|hooks\/flows/);
    const homeIn = async (ws: typeof ONE) => {
      await h.requests.event({ type: "app_home_opened", user: ws.user, channel: `D${ws.user.slice(1)}`, tab: "home" }, { team_id: ws.team });
      return JSON.stringify((await eventually(() => h.slack.callsTo("views.publish").find((c) => c.args.user_id === ws.user), { what: `${ws.team}'s Home` })).args.view);
    };
    expect(await homeIn(ONE)).toContain("/hooks/flows/content");
    expect(await homeIn(TWO)).not.toMatch(/hooks\/flows|stray/);
    // Named, the quiet crew is not offered either: the kickoff form says there is no such crew.
    await h.requests.command({ text: "quiet", user_id: ONE.user, channel_id: ONE.channel, team_id: ONE.team, trigger_id: h.slack.issueTrigger(ONE.user) });
    const views = () => [...h.slack.callsTo("views.open"), ...h.slack.callsTo("views.update")].map((c) => JSON.stringify(c.args.view));
    const refused = await eventually(() => views().find((v) => /no crew called “quiet”/.test(v)), { what: "the refusal" });
    expect(refused).toContain("“everyone”");
    expect(h.slack.callsTo("chat.postMessage")).toHaveLength(0);
  }, 60_000);

  it("installs in two workspaces; each run posts with its own token; tokens are sealed; uninstall stops only its workspace", async () => {
    const clock = { offsetMs: 0, now: () => new Date(Date.now() + clock.offsetMs) };
    h = await startHarness({
      oauth: {},
      research: { teams: [ONE.team, TWO.team], reviewers: { users: [], usergroups: ["S0EDITORS"] } },
      crews: [{ name: "legal", teams: [ONE.team] }],
      crew: { inputs: ["topic"] },
      config: { reviewReminders: { afterMinutes: 1, max: 1 } },
      crewline: { clock },
    });
    h.slack.setUsergroup("S0EDITORS", [ONE.user, TWO.user]);

    // A redirect without the browser's state cookie is refused, and stores nothing.
    const code = h.slack.issueInstallCode({ teamId: ONE.team });
    const forged = await fetch(`${h.botUrl}/slack/oauth_redirect?code=${code}&state=forged`, { redirect: "manual" });
    expect(forged.status).toBeGreaterThanOrEqual(400);
    expect(await prismaOf(h.bot.database).slackInstallation.count()).toBe(0);

    for (const ws of [ONE, TWO, THREE]) {
      const done = await installViaBrowser(h, ws.team);
      expect(done.status).toBe(200);
      expect(await done.text()).toMatch(/Thank you/i);
    }
    const tokenOne = h.slack.botTokenOf(ONE.team)!;
    const tokenTwo = h.slack.botTokenOf(TWO.team)!;
    expect(tokenOne).toMatch(/^xoxb-/);
    expect(tokenOne).not.toBe(tokenTwo);
    expect(h.slack.callsTo("oauth.v2.access").filter((c) => !c.error)).toHaveLength(3);

    // The raw table holds no token in plain text (nor any part that looks like one).
    const raw = JSON.stringify(await prismaOf(h.bot.database).$queryRawUnsafe(`SELECT * FROM "SlackInstallation"`));
    for (const token of [tokenOne, tokenTwo, h.slack.botTokenOf(THREE.team)!]) expect(raw).not.toContain(token);
    expect(raw).not.toContain("xoxb-");
    const rows = await prismaOf(h.bot.database).slackInstallation.findMany({ orderBy: { teamId: "asc" } });
    expect(rows.map((r) => [r.installKey, r.isEnterpriseInstall, r.botUserId])).toEqual([
      ["T:T0ONE", false, "U0BOT0ONE"],
      ["T:T0THREE", false, "U0BOT0THREE"],
      ["T:T0TWO", false, "U0BOT0TWO"],
    ]);
    expect(rows[0]!.botToken).toMatch(/^v1\.[0-9a-f]{8}\./);

    // One run per workspace: every Web API call for it carries that workspace's token.
    const runOne = await startRunIn(h, ONE);
    const runTwo = await startRunIn(h, TWO);
    const posts = (channel: string) => h.slack.callsTo("chat.postMessage").filter((c) => c.args.channel === channel);
    // Announcement (Bolt's handler) and the review (the background notifier) in each thread.
    expect(posts(ONE.channel).length).toBeGreaterThanOrEqual(2);
    expect(posts(TWO.channel).length).toBeGreaterThanOrEqual(2);
    expect(new Set(posts(ONE.channel).map((c) => c.token))).toEqual(new Set([tokenOne]));
    expect(new Set(posts(TWO.channel).map((c) => c.token))).toEqual(new Set([tokenTwo]));
    const reviewTs = (run: typeof runOne) => run.reviews.find((r) => r.messageTs)!.messageTs;
    // The task output in each thread and its turn into a review (chat.update) come from background work.
    for (const [run, token] of [
      [runOne, tokenOne],
      [runTwo, tokenTwo],
    ] as const) {
      const inThread = h.slack.callsTo("chat.postMessage").filter((c) => c.args.thread_ts === run.threadTs);
      expect(inThread.length).toBeGreaterThan(0);
      expect(inThread.every((c) => c.token === token)).toBe(true);
      expect(h.slack.messages(run.channelId).some((m) => m.ts === reviewTs(run) && m.thread_ts === run.threadTs)).toBe(true);
      // Every call about the run's channel (posts, updates, progress, files) carried its workspace's token.
      const touching = h.slack.calls.filter((c) => c.args.channel === run.channelId || c.args.channel_id === run.channelId);
      expect(new Set(touching.map((c) => c.token))).toEqual(new Set([token]));
    }

    // Reminders (background work) go out with each run's own token.
    clock.offsetMs = 61_000;
    expect(await h.bot.reviewRequests.remindDue()).toBe(2);
    for (const [run, token] of [
      [runOne, tokenOne],
      [runTwo, tokenTwo],
    ] as const) {
      const reminder = await eventually(() => h.slack.callsTo("chat.postMessage").find((c) => c.args.thread_ts === run.threadTs && /⏰/.test(String(c.args.text))), {
        what: "the reminder",
      });
      expect(reminder.token).toBe(token);
    }

    // A decision by a member of the reviewers' user group: the group is read with the run's workspace token.
    const reviewMsg = h.slack.messages(ONE.channel).find((m) => m.ts === reviewTs(runOne))!;
    const actions = reviewMsg.blocks!.find((b: any) => b.type === "actions" && b.elements.some((e: any) => e.action_id === APPROVE_ACTION));
    const click = await h.requests.blockAction({
      user_id: ONE.user,
      team_id: ONE.team,
      channel_id: ONE.channel,
      message_ts: reviewMsg.ts,
      thread_ts: reviewMsg.thread_ts,
      action: { action_id: APPROVE_ACTION, block_id: actions.block_id, value: runOne.reviews.find((r) => r.messageTs)!.id },
    });
    expect(click.status).toBe(200);
    await eventually(() => h.crew.requests.find((r) => r.path === "/resume"), { what: "the approval sent to the crew" });
    const groupReads = h.slack.callsTo("usergroups.users.list");
    expect(groupReads.length).toBeGreaterThan(0);
    expect(new Set(groupReads.map((c) => c.token))).toEqual(new Set([tokenOne]));

    // T0ONE's run goes on to its next review, which S0EDITORS (T0TWO's user among them) may decide.
    await eventually(() => prismaOf(h.bot.database).review.findFirst({ where: { executionId: runOne.id, state: "pending", messageTs: { not: null } } }), {
      what: "the next review of T0ONE's run",
      timeoutMs: 30_000,
    });

    // The Home tab of a workspace is published with its own token.
    await h.requests.event({ type: "app_home_opened", user: ONE.user, channel: "D0ONE", tab: "home" }, { team_id: ONE.team });
    await h.requests.event({ type: "app_home_opened", user: TWO.user, channel: "D0TWO", tab: "home" }, { team_id: TWO.team });
    const publishes = await h.slack.waitForCalls("views.publish", 2);
    expect(publishes.find((c) => c.args.user_id === ONE.user)?.token).toBe(tokenOne);
    const homeTwo = publishes.find((c) => c.args.user_id === TWO.user)!;
    expect(homeTwo.token).toBe(tokenTwo);
    // Its links point at its own workspace, and it lists only the crews it may use.
    expect(JSON.stringify(homeTwo.args.view)).toContain("t0two.example.slack.com");
    expect(JSON.stringify(homeTwo.args.view)).not.toContain("legal");
    // Nothing from the other workspace: T0ONE's review is not offered in T0TWO's Home.
    expect(JSON.stringify(homeTwo.args.view)).toContain(TWO.channel);
    expect(JSON.stringify(homeTwo.args.view)).not.toContain(ONE.channel);

    // A review reassigned in T0ONE: the reassignee's Home is published at once with T0ONE's token (not the app-level client's).
    const next = (await prismaOf(h.bot.database).review.findFirst({ where: { executionId: runOne.id, state: "pending", messageTs: { not: null } } }))!;
    const nextMsg = h.slack.messages(ONE.channel).find((m) => m.ts === next.messageTs)!;
    const opensBefore = h.slack.callsTo("views.open").length;
    await h.requests.blockAction({
      user_id: ONE.user,
      team_id: ONE.team,
      channel_id: ONE.channel,
      message_ts: nextMsg.ts,
      thread_ts: nextMsg.thread_ts,
      action: { action_id: REASSIGN_ACTION, block_id: REVIEW_ACTIONS_BLOCK, value: next.id },
    });
    const reassignModal = (await h.slack.waitForCalls("views.open", opensBefore + 1)).at(-1)!;
    expect(reassignModal.token).toBe(tokenOne);
    const handedTo = "U0ONEDAN";
    // A person of T0ONE, in the run's channel (anyone else is refused: reviewers.test.ts).
    h.slack.setUser(handedTo, { team_id: ONE.team });
    h.slack.setMembers(ONE.channel, [handedTo]);
    const submitted = await h.requests.viewSubmission({
      user_id: ONE.user,
      team_id: ONE.team,
      view: {
        callback_id: (reassignModal.args.view as any).callback_id,
        private_metadata: (reassignModal.args.view as any).private_metadata,
        state: {
          values: {
            [REASSIGN_USER_BLOCK]: { [REASSIGN_USER_ACTION]: { type: "users_select", selected_user: handedTo } },
            [REASSIGN_REASON_BLOCK]: { [REASSIGN_REASON_ACTION]: { type: "plain_text_input", value: "Dan knows the sources" } },
          },
        },
      },
    });
    expect(submitted.status).toBe(200);
    const handedHome = await eventually(() => h.slack.callsTo("views.publish").find((c) => c.args.user_id === handedTo), { what: "the reassignee's Home" });
    expect(handedHome.token).toBe(tokenOne);
    expect(handedHome.error).toBeFalsy();
    // It lists the review handed to them, and nothing from the other workspace.
    expect(JSON.stringify(handedHome.args.view)).toContain("Reassigned to you");
    expect(JSON.stringify(handedHome.args.view)).not.toContain(TWO.channel);

    // Crews per workspace: "legal" is T0ONE's only; T0THREE may use none.
    const before = h.slack.callsTo("views.update").length;
    await h.requests.command({ text: "legal", user_id: TWO.user, channel_id: TWO.channel, team_id: TWO.team });
    const refused = await eventually(() =>
      h.slack
        .callsTo("views.update")
        .slice(before)
        .find((c) => /no crew called/i.test(JSON.stringify(c.args.view))),
    );
    expect(refused.token).toBe(tokenTwo);
    expect(JSON.stringify(refused.args.view)).not.toMatch(/may not be started/);
    const none = await h.requests.command({ text: "", user_id: THREE.user, channel_id: THREE.channel, team_id: THREE.team });
    expect(none.status).toBe(200);
    expect(JSON.parse(none.body)).toMatchObject({ response_type: "ephemeral", text: expect.stringMatching(/No crew may be used in this workspace/) });
    const help = await h.requests.command({ text: "help", user_id: TWO.user, channel_id: TWO.channel, team_id: TWO.team });
    expect(JSON.parse(help.body).text).toContain("research");
    expect(JSON.parse(help.body).text).not.toContain("legal");

    // T0TWO uninstalls (Slack revokes its tokens and sends a signed app_uninstalled).
    h.slack.revokeTeam(TWO.team);
    const uninstalled = await h.requests.event({ type: "app_uninstalled" }, { team_id: TWO.team });
    expect(uninstalled.status).toBe(200);
    await eventually(async () => (await prismaOf(h.bot.database).slackInstallation.count({ where: { teamId: TWO.team } })) === 0, { what: "T0TWO's installation deleted" });
    expect((await prismaOf(h.bot.database).slackInstallation.findMany()).map((r) => r.teamId).sort()).toEqual([ONE.team, THREE.team]);
    const stoppedTwo = await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: runTwo.id }, include: { reviews: true } });
    expect(stoppedTwo.state).toBe("uninstalled");
    expect(stoppedTwo.reviews.every((r) => r.state === "closed")).toBe(true);
    // The other workspace's run is untouched, its review still waiting.
    const stillOne = await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: runOne.id }, include: { reviews: true } });
    expect(["running", "waiting"]).toContain(stillOne.state);
    expect(stillOne.reviews.some((r) => r.state === "approved")).toBe(true);
    expect(stillOne.reviews.every((r) => r.state !== "closed")).toBe(true);

    // T0ONE keeps working: a new run posts with its token; nothing more is sent with T0TWO's.
    const twoCallsBefore = h.slack.calls.filter((c) => c.token === tokenTwo).length;
    const again = await startRunIn(h, ONE);
    expect(again.id).not.toBe(runOne.id);
    expect(new Set(posts(ONE.channel).map((c) => c.token))).toEqual(new Set([tokenOne]));
    await h.bot.watcher.tick();
    expect(h.slack.calls.filter((c) => c.token === tokenTwo).length).toBe(twoCallsBefore);
  }, 90_000);

  it("a run is its own workspace's: a reviewer the crew names, asking from another workspace by kickoff id, hears what an unknown id gets and stops nothing", async () => {
    // One crew offered to both workspaces, whose reviewer rules name a user of each (user ids name one person in their own workspace only).
    h = await startHarness({ oauth: {}, research: { teams: [ONE.team, TWO.team], reviewers: { users: [ONE.user, TWO.user], usergroups: [] } }, crew: { inputs: ["topic"] } });
    for (const ws of [ONE, TWO]) expect((await installViaBrowser(h, ws.team)).status).toBe(200);
    const run = await startRunIn(h, TWO);
    const ask = async (ws: typeof ONE, text: string) => {
      const before = h.slack.callsTo("response_url").length;
      await h.requests.command({ text, user_id: ws.user, channel_id: ws.channel, team_id: ws.team });
      return String((await eventually(() => h.slack.callsTo("response_url")[before], { what: `the answer to ${text}` })).args.text);
    };
    const unknown = /^I don't know a run with kickoff id/;
    // When: ONE's reviewer asks about TWO's run from ONE.
    // Then: nothing of it is shown, its trail neither, and it is not stopped.
    expect(await ask(ONE, `status ${run.kickoffId}`)).toMatch(unknown);
    expect(await ask(ONE, `audit ${run.kickoffId}`)).toMatch(unknown);
    expect(await ask(ONE, `stop ${run.kickoffId}`)).toMatch(unknown);
    expect(h.crew.requests.filter((r) => r.path.startsWith("/stop/"))).toEqual([]);
    const after = await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: run.id } });
    expect({ state: after.state, stoppedBy: after.stoppedBy }).toEqual({ state: "waiting", stoppedBy: null });
    // TWO's reviewer, asking from TWO outside the run's channel, sees it (the reviewer rules, in their workspace).
    expect(await ask({ ...TWO, channel: "C0TWOOTHER" }, `status ${run.kickoffId}`)).toContain("news of T0TWO");
  }, 60_000);

  it("serves a Grid org-wide install in its workspaces, posts flow requests in the flow's workspace, and handles tokens_revoked", async () => {
    const FLOW_SECRET = "flow-webhook-secret";
    // As parsed, a crew with teams: ["*"] has no teams list: every workspace may use it.
    h = await startHarness({ oauth: {}, crew: { inputs: ["topic"] }, config: { flows: [{ name: "content", secret: FLOW_SECRET, channel: "C0FLOWS", team: ONE.team }] } });
    const flow = await startFlowService({ secret: FLOW_SECRET, targetUrl: `${h.botUrl}/hooks/flows/content` });
    try {
      expect((await installViaBrowser(h, ONE.team)).status).toBe(200);
      expect((await installViaBrowser(h, "E0GRID", { enterpriseId: "E0GRID", isEnterpriseInstall: true })).status).toBe(200);
      const tokenOne = h.slack.botTokenOf(ONE.team)!;
      const tokenOrg = h.slack.botTokenOf("E0GRID")!;
      const org = await prismaOf(h.bot.database).slackInstallation.findUniqueOrThrow({ where: { installKey: "E:E0GRID" } });
      expect(org).toMatchObject({ teamId: null, enterpriseId: "E0GRID", isEnterpriseInstall: true });

      // A workspace of the org, with no install of its own, runs on the org's token.
      const grid = { team: "T0GRIDA", channel: "C0GRID", user: "U0GRIDUSER", enterprise: "E0GRID" };
      const run = await startRunIn(h, grid);
      expect(run.enterpriseId).toBe("E0GRID");
      const touching = h.slack.calls.filter((c) => c.args.channel === grid.channel || c.args.channel_id === grid.channel);
      expect(touching.length).toBeGreaterThan(1);
      expect(new Set(touching.map((c) => c.token))).toEqual(new Set([tokenOrg]));

      // A flow's feedback request is posted in its own workspace (team: T0ONE), with that token.
      expect((await flow.send({ message: "Please review" })).status).toBe(202);
      const request = await eventually(() => prismaOf(h.bot.database).flowRequest.findFirst({ where: { messageTs: { not: null } } }), { what: "the flow request posted" });
      expect(request.teamId).toBe(ONE.team);
      expect(h.slack.callsTo("chat.postMessage").find((c) => c.args.channel === "C0FLOWS")?.token).toBe(tokenOne);

      // T0ONE's bot token is revoked: its installation goes and its open flow request closes; the org is untouched.
      h.slack.revokeTeam(ONE.team);
      expect((await h.requests.event({ type: "tokens_revoked", tokens: { bot: ["U0BOT0ONE"] } }, { team_id: ONE.team })).status).toBe(200);
      await eventually(async () => (await prismaOf(h.bot.database).slackInstallation.count({ where: { teamId: ONE.team } })) === 0, { what: "T0ONE's installation deleted" });
      expect((await prismaOf(h.bot.database).flowRequest.findUniqueOrThrow({ where: { id: request.id } })).state).toBe("closed");
      expect((await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: run.id } })).state).toBe("waiting");

      // The org uninstalls: its install goes and its workspaces' runs stop.
      expect((await h.requests.event({ type: "app_uninstalled" }, { team_id: grid.team, enterprise_id: "E0GRID" })).status).toBe(200);
      await eventually(async () => (await prismaOf(h.bot.database).slackInstallation.count()) === 0, { what: "the org's installation deleted" });
      await eventually(async () => (await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: run.id } })).state === "uninstalled", {
        what: "the Grid run stopped",
      });
    } finally {
      await flow.close();
    }
  }, 90_000);

  it("a flow in a workspace covered only by an org-wide install (enterprise: set) posts with the org's token, finds its assignee there, and closes with the org's uninstall", async () => {
    const SECRET = "flow-webhook-secret";
    const GRID = "E0GRID";
    h = await startHarness({ oauth: {}, config: { flows: [{ name: "content", secret: SECRET, channel: "C0GRIDFLOWS", team: "T0GRIDC", enterprise: GRID }] } });
    const flow = await startFlowService({ secret: SECRET, targetUrl: `${h.botUrl}/hooks/flows/content` });
    try {
      // Given: the org's install is the only one; the flow's workspace has none of its own, and no run was ever started there.
      expect((await installViaBrowser(h, GRID, { enterpriseId: GRID, isEnterpriseInstall: true })).status).toBe(200);
      const tokenOrg = h.slack.botTokenOf(GRID)!;
      h.slack.setUser("U0GRIDREVIEWER", { profile: { email: "reviewer@grid.example" } });

      // When: the flow asks for feedback, naming its assignee by e-mail.
      const sent = await flow.send({ message: "Please review", assigned_to_email: "reviewer@grid.example" });
      expect(sent.status).toBe(202);

      // Then: the assignee is looked up and the request posted in the flow's channel, with the org's token.
      const request = await eventually(() => prismaOf(h.bot.database).flowRequest.findFirst({ where: { messageTs: { not: null } } }), { what: "the flow request posted" });
      expect(request).toMatchObject({ teamId: "T0GRIDC", enterpriseId: GRID, assigneeUserId: "U0GRIDREVIEWER" });
      const post = h.slack.callsTo("chat.postMessage").find((c) => c.args.channel === "C0GRIDFLOWS");
      expect(post?.token).toBe(tokenOrg);
      expect(h.slack.callsTo("users.lookupByEmail").map((c) => c.token)).toEqual([tokenOrg]);

      // When the org removes the app (the event names another of its workspaces), the request closes: the flow can no longer be answered from Slack.
      expect((await h.requests.event({ type: "app_uninstalled" }, { team_id: "T0GRIDB", enterprise_id: GRID })).status).toBe(200);
      const closed = await eventually(
        async () => {
          const row = await prismaOf(h.bot.database).flowRequest.findUniqueOrThrow({ where: { id: request.id } });
          return row.state === "closed" ? row : undefined;
        },
        { what: "the org's flow request closed" },
      );
      expect(closed.answerMessage).toBe(UNINSTALLED_NOTE);
    } finally {
      await flow.close();
    }
  }, 60_000);

  it("a workspace whose streaming Slack refused (a scope its install lacked) streams a run's live plan again once it installs the app again", async () => {
    const clock = { offsetMs: 0, now: () => new Date(Date.now() + clock.offsetMs) };
    h = await startHarness({
      oauth: {},
      research: { teams: [ONE.team] },
      crew: { inputs: ["topic"], tasks: [{ id: "t1", name: "a_task", agent: "A", delayMs: 600, steps: 3 }] },
      crewline: { clock },
    });
    expect((await installViaBrowser(h, ONE.team)).status).toBe(200);
    h.slack.refuseStreaming(ONE.team, "missing_scope");
    await kickoffViaSlack(h, { topic: "First" }, ONE.user, ONE.channel, { team: ONE.team });
    await eventually(() => prismaOf(h.bot.database).streamingRefusal.findFirst({ where: { teamId: ONE.team } }), { what: "the refusal recorded" });
    await h.settled();

    // Installed again, with the scope: the refusal is forgotten, and read again within half a minute.
    h.slack.allowStreaming(ONE.team);
    expect((await installViaBrowser(h, ONE.team)).status).toBe(200);
    expect(await prismaOf(h.bot.database).streamingRefusal.count()).toBe(0);
    clock.offsetMs += 31_000;
    await kickoffViaSlack(h, { topic: "Second" }, ONE.user, ONE.channel, { team: ONE.team });
    await eventually(() => h.slack.callsTo("chat.startStream").find((c) => !c.error), { what: "the second run's plan streamed", timeoutMs: 15_000 });
  });

  it("an uninstall Slack delivers late, sent before the workspace installed the app again, leaves the new install and its run alone", async () => {
    h = await startHarness({ oauth: {}, research: { teams: [ONE.team] }, crew: { inputs: ["topic"] } });
    expect((await installViaBrowser(h, ONE.team)).status).toBe(200);
    // The workspace removes the app while the bot does not answer Slack (a deploy), and installs it again.
    const sentAt = Math.floor(Date.now() / 1000) - 120;
    h.slack.revokeTeam(ONE.team);
    expect((await installViaBrowser(h, ONE.team)).status).toBe(200);
    await kickoffViaSlack(h, { topic: "Tides" }, ONE.user, ONE.channel, { team: ONE.team });
    const run = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { kickoffId: { not: null } } }), { what: "the run started" });

    // Slack's redelivery of the first uninstall comes now, with the time it was sent.
    const late = await h.requests.event({ type: "app_uninstalled" }, { team_id: ONE.team, retryNum: 1, retryReason: "http_timeout", event_time: sentAt });
    expect(late.status).toBe(200);
    await h.settled();
    expect(await prismaOf(h.bot.database).slackInstallation.count()).toBe(1);
    expect((await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: run.id } })).state).not.toBe("uninstalled");

    // An uninstall sent now removes it.
    h.slack.revokeTeam(ONE.team);
    expect((await h.requests.event({ type: "app_uninstalled" }, { team_id: ONE.team })).status).toBe(200);
    await eventually(async () => (await prismaOf(h.bot.database).slackInstallation.count()) === 0, { what: "the install removed" });
  });

  it("a flow request being answered when its workspace removes the app: should its answer not arrive, no deadline answers the flow for nobody afterwards", async () => {
    const clock = { offsetMs: 0, now: () => new Date(Date.now() + clock.offsetMs) };
    const SECRET = "flow-webhook-secret";
    h = await startHarness({
      oauth: {},
      config: { flows: [{ name: "content", secret: SECRET, channel: "C0FLOWS", team: ONE.team, decideWithinMs: 60_000, onTimeout: "approve" as const }] },
      crewline: { clock },
    });
    const flow = await startFlowService({ secret: SECRET, targetUrl: `${h.botUrl}/hooks/flows/content` });
    // A proxy in front of the flow's callback URL: holds the first answer until released, then answers 503.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let held = 0;
    const proxy = http.createServer((req, res) => {
      const first = held++ === 0;
      const chunks: Buffer[] = [];
      req
        .on("data", (c) => chunks.push(c))
        .on("end", async () => {
          if (first) {
            await released;
            return void res.writeHead(503).end("busy");
          }
          const r = await fetch(`${flow.url}${req.url}`, {
            method: req.method,
            headers: { "content-type": String(req.headers["content-type"] ?? "application/json") },
            body: Buffer.concat(chunks),
          });
          res.writeHead(r.status).end(await r.text());
        });
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    try {
      expect((await installViaBrowser(h, ONE.team)).status).toBe(200);
      expect((await flow.send({ message: "Please review" }, { callbackOrigin: proxyUrl })).status).toBe(202);
      const request = await eventually(() => prismaOf(h.bot.database).flowRequest.findFirst({ where: { messageTs: { not: null } } }), { what: "posted" });
      // A person approves: the request is claimed (deciding) and the flow's callback is being called.
      const click = await h.requests.blockAction({
        user_id: ONE.user,
        team_id: ONE.team,
        channel_id: "C0FLOWS",
        message_ts: request.messageTs!,
        action: { action_id: "flow_outcome:0", block_id: FLOW_ACTIONS_BLOCK, value: request.id },
        stateValues: { [FLOW_FEEDBACK_BLOCK]: { [FLOW_FEEDBACK_ACTION]: { type: "plain_text_input", value: "" } } },
      } as any);
      expect(click.status).toBe(200);
      await eventually(() => held > 0, { what: "the flow's callback called" });
      expect((await prismaOf(h.bot.database).flowRequest.findUniqueOrThrow({ where: { id: request.id } })).state).toBe("deciding");

      // Meanwhile the workspace removes the app.
      h.slack.revokeTeam(ONE.team);
      expect((await h.requests.event({ type: "app_uninstalled" }, { team_id: ONE.team })).status).toBe(200);
      await eventually(async () => (await prismaOf(h.bot.database).slackInstallation.count()) === 0, { what: "installation deleted" });

      // The flow's callback fails (503): the request opens again, in a workspace without the app.
      release();
      const reopened = await eventually(
        async () => {
          const r = await prismaOf(h.bot.database).flowRequest.findUniqueOrThrow({ where: { id: request.id } });
          return r.state === "pending" ? r : undefined;
        },
        { what: "reopened" },
      );

      // Its deadline would have passed: the flow hears nothing on nobody's behalf.
      clock.offsetMs = 61_000;
      await h.bot.flows.deadlinesDue();
      await h.bot.flows.remindDue();
      expect(flow.answers).toEqual([]);
      expect(reopened).toMatchObject({ decideBy: null, onTimeout: null, nextReminderAt: null });
    } finally {
      release();
      await new Promise((r) => proxy.close(r));
      await flow.close();
    }
  }, 60_000);

  it("an org-wide uninstall ends every run and closes every open flow request of the org's workspaces, as a workspace's uninstall does; the flows hear nothing more, not even a deadline's answer", async () => {
    const clock = { offsetMs: 0, now: () => new Date(Date.now() + clock.offsetMs) };
    const SECRET = "flow-webhook-secret";
    const GRID = "E0GRID";
    const gridA = { team: "T0GRIDA", channel: "C0GRIDA", user: "U0GRIDAUSER", enterprise: GRID };
    // Each flow answers "approved" by itself after a minute: what reached a flow says whether its request stayed open.
    const flowIn = (name: string, team: string) => ({ name, secret: SECRET, channel: `C0${name.toUpperCase()}`, team, decideWithinMs: 60_000, onTimeout: "approve" as const });
    const flows = [
      flowIn("grida", gridA.team), // a workspace of the org where a run was started
      flowIn("gridb", "T0GRIDB"), // the workspace of the org the uninstall event names
      flowIn("gridown", "T0GRIDOWN"), // a workspace of the org with an install of its own: it keeps the app
      flowIn("elsewhere", ONE.team), // another organisation
    ];
    h = await startHarness({ oauth: {}, crew: { inputs: ["topic"] }, config: { flows }, crewline: { clock } });
    const flow = await startFlowService({ secret: SECRET });
    try {
      // Given: an org-wide install, a workspace of the org installed on its own, and a workspace outside the org.
      expect((await installViaBrowser(h, GRID, { enterpriseId: GRID, isEnterpriseInstall: true })).status).toBe(200);
      expect((await installViaBrowser(h, "T0GRIDOWN", { enterpriseId: GRID })).status).toBe(200);
      expect((await installViaBrowser(h, ONE.team)).status).toBe(200);
      const run = await startRunIn(h, gridA);
      const requestIds = new Map<string, string>();
      for (const { name } of flows) {
        const sent = await flow.send({ message: `Please review for ${name}` }, { url: `${h.botUrl}/hooks/flows/${name}` });
        expect(sent.status).toBe(202);
        requestIds.set(name, String(sent.body.id));
      }
      const rowOf = (name: string) => prismaOf(h.bot.database).flowRequest.findFirstOrThrow({ where: { requestId: requestIds.get(name)! } });
      for (const { name } of flows) expect((await rowOf(name)).state).toBe("pending");

      // When: the org removes the app (Slack names one of its workspaces in the event).
      expect((await h.requests.event({ type: "app_uninstalled" }, { team_id: "T0GRIDB", enterprise_id: GRID })).status).toBe(200);
      await eventually(async () => (await prismaOf(h.bot.database).slackInstallation.count({ where: { installKey: `E:${GRID}` } })) === 0, {
        what: "the org's installation deleted",
      });

      // Then: its run ended and its workspaces' flow requests closed, saying why, with their Slack effects given up.
      expect((await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: run.id } })).state).toBe("uninstalled");
      for (const name of ["grida", "gridb"]) {
        const closed = await rowOf(name);
        expect({ name, state: closed.state, answerMessage: closed.answerMessage }).toEqual({ name, state: "closed", answerMessage: UNINSTALLED_NOTE });
        expect(await prismaOf(h.bot.database).slackEffect.count({ where: { subjectId: closed.id, state: "due" } })).toBe(0);
      }
      // The workspace with its own install and the other organisation keep theirs.
      for (const name of ["gridown", "elsewhere"]) expect((await rowOf(name)).state).toBe("pending");

      // Their deadline passes: only the requests still open are answered; the org's flows hear nothing.
      clock.offsetMs = 61_000;
      await h.bot.flows.deadlinesDue();
      const answered = await eventually(() => (flow.answers.length >= 2 ? flow.answers : undefined), { what: "the deadlines' answers" });
      expect(answered.map((a) => a.requestId).sort()).toEqual([requestIds.get("elsewhere"), requestIds.get("gridown")].sort());
      expect(flow.calls.map((c) => c.requestId)).not.toContain(requestIds.get("grida"));
      expect(flow.calls.map((c) => c.requestId)).not.toContain(requestIds.get("gridb"));
    } finally {
      await flow.close();
    }
  }, 90_000);

  it("callbacks of a run its workspace's uninstall ended get 410 like any ended run's: at once on the replica that recorded it, within LIVE_RUN_RECHECK_MS on the others", async () => {
    const clock = { offsetMs: 0, now: () => new Date(Date.now() + clock.offsetMs) };
    h = await startHarness({ oauth: {}, research: { teams: [ONE.team, TWO.team] }, crew: { inputs: ["topic"] }, crewline: { clock } });
    for (const ws of [ONE, TWO]) expect((await installViaBrowser(h, ws.team)).status).toBe(200);
    const runOne = await startRunIn(h, ONE);
    const runTwo = await startRunIn(h, TWO);
    const hook = (run: typeof runOne, kind: string, body: object) =>
      fetch(`${h.botUrl}/hooks/${run.id}/${kind}/${run.webhookSecret}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }).then(
        (r) => r.status,
      );
    const step = (run: typeof runOne, thought: string) => hook(run, "step", { execution_id: run.kickoffId, agent: "Writer", thought, output: "" });
    // Given: both runs' steps taken (their rows now cached by the callback intake).
    expect(await step(runOne, "reading sources")).toBe(202);
    expect(await step(runTwo, "reading sources")).toBe(202);

    // When: T0ONE removes the app, recorded by this replica.
    h.slack.revokeTeam(ONE.team);
    expect((await h.requests.event({ type: "app_uninstalled" }, { team_id: ONE.team })).status).toBe(200);
    await eventually(async () => (await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: runOne.id } })).state === "uninstalled", {
      what: "T0ONE's run ended by the uninstall",
    });
    // The uninstall is done (its installation goes last).
    await eventually(async () => (await prismaOf(h.bot.database).slackInstallation.count({ where: { teamId: ONE.team } })) === 0, { what: "T0ONE's installation deleted" });

    // Then: its callbacks are refused at once as an ended run's, a step as a task; T0TWO's run goes on.
    expect(await step(runOne, "still writing")).toBe(410);
    expect(await hook(runOne, "task", { task_id: "t9", name: "late_task", output: "late", kickoff_id: runOne.kickoffId })).toBe(410);
    expect(await step(runTwo, "still writing")).toBe(202);

    // T0TWO's run ended by another replica (written to the shared database, never told to this process):
    // refused once the cached row is LIVE_RUN_RECHECK_MS old.
    await prismaOf(h.bot.database).execution.update({ where: { id: runTwo.id }, data: { state: "uninstalled", finishedAt: clock.now(), error: UNINSTALLED_NOTE } });
    clock.offsetMs += LIVE_RUN_RECHECK_MS;
    expect(await step(runTwo, "one more step")).toBe(410);
  }, 90_000);
});
