// What the Slack stand-in keeps for the playground page: limit violations, ephemerals (direct and via
// response_url), which user a modal belongs to; and the page API refuses malformed requests.
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { WebClient } from "@slack/web-api";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeSlack, startFakeSlack } from "./slack-standin.js";
import { mountPlayground } from "./web.js";

let slack: FakeSlack;
let client: WebClient;

beforeEach(async () => {
  slack = await startFakeSlack({ validateBlocks: false });
  client = new WebClient("xoxb-standin", { slackApiUrl: slack.url, retryConfig: { retries: 0 } });
});
afterEach(() => slack.close());

describe("Slack stand-in state for the playground", () => {
  it("records payloads that break Slack's documented limits, with the method and the problem", async () => {
    await client.chat.postMessage({ channel: "C1", text: "ok", blocks: [{ type: "header", text: { type: "plain_text", text: "x".repeat(151) } }] });
    await client.views.open({
      trigger_id: slack.issueTrigger("U1"),
      view: { type: "modal", title: { type: "plain_text", text: "A title far longer than twenty-four" }, blocks: [] },
    });
    await client.chat.postMessage({ channel: "C1", text: "fine", blocks: [{ type: "section", text: { type: "mrkdwn", text: "fine" } }] });
    expect(slack.violations).toHaveLength(2);
    expect(slack.violations[0]).toMatchObject({ method: "chat.postMessage", channel: "C1" });
    expect(slack.violations[0]!.problems.join()).toContain("151 > 150");
    expect(slack.violations[1]).toMatchObject({ method: "views.open" });
    expect(slack.violations[1]!.problems.join()).toMatch(/title: \d+ > 24/);
  });

  it("still rejects over-limit payloads when validating, and records them too", async () => {
    const strict = await startFakeSlack();
    try {
      const c = new WebClient("xoxb-standin", { slackApiUrl: strict.url, retryConfig: { retries: 0 } });
      await expect(c.chat.postMessage({ channel: "C1", text: "t", blocks: [{ type: "section", text: { type: "mrkdwn", text: "y".repeat(3001) } }] })).rejects.toThrow(
        /invalid_blocks/,
      );
      expect(strict.violations[0]!.problems.join()).toContain("3001 > 3000");
    } finally {
      await strict.close();
    }
  });

  it("keeps ephemerals for their user, from chat.postEphemeral and from a response_url", async () => {
    await client.chat.postEphemeral({ channel: "C1", user: "U1", thread_ts: "1.0", text: "only for U1" });
    const url = slack.responseUrlFor({ channel: "C1", user: "U2" });
    const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ response_type: "ephemeral", text: "only for U2" }) });
    expect(res.status).toBe(200);
    expect(slack.ephemerals.map((e) => [e.user, e.text, e.thread_ts])).toEqual([
      ["U1", "only for U1", "1.0"],
      ["U2", "only for U2", undefined],
    ]);
    expect(slack.timeOf(slack.ephemerals[0]!.ts)).toBeGreaterThan(Date.now() - 5000);
  });

  it("replaces or removes a clicked ephemeral through the click's response_url, for its own viewer only", async () => {
    const respond = (url: string, body: unknown) => fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const question = await client.chat.postEphemeral({
      channel: "C1",
      user: "U1",
      thread_ts: "1.0",
      text: "Reject?",
      blocks: [{ type: "actions", elements: [{ type: "button", action_id: "a", text: { type: "plain_text", text: "Yes" } }] }],
    });
    const ts = question.message_ts!;
    // Another user's response_url does not reach U1's ephemeral.
    expect((await respond(slack.responseUrlFor({ channel: "C1", user: "U2", messageTs: ts }), { replace_original: true, text: "hijacked" })).status).toBe(404);
    const url = slack.responseUrlFor({ channel: "C1", user: "U1", messageTs: ts, threadTs: "1.0" });
    expect((await respond(url, { replace_original: true, text: "Done." })).status).toBe(200);
    expect(slack.ephemerals).toEqual([expect.objectContaining({ ts, user: "U1", thread_ts: "1.0", text: "Done." })]);
    expect(slack.ephemerals[0]!.blocks).toBeUndefined();
    expect((await respond(url, { delete_original: true })).status).toBe(200);
    expect(slack.ephemerals).toEqual([]);
  });

  it("gives a modal opened with an issued trigger to that user, and tells listeners", async () => {
    let changes = 0;
    slack.onChange(() => changes++);
    const opened = await client.views.open({ trigger_id: slack.issueTrigger("U7"), view: { type: "modal", title: { type: "plain_text", text: "Hi" }, blocks: [] } });
    expect(slack.views.get(opened.view!.id!)?.user).toBe("U7");
    expect(changes).toBeGreaterThan(0);
    slack.closeView(opened.view!.id!);
    expect(slack.views.size).toBe(0);
  });
});

describe("playground page API", () => {
  it("serves the page and answers malformed requests with 400 without calling the bot", async () => {
    mountPlayground(slack, { botUrl: "http://127.0.0.1:9", signingSecret: "s", users: [{ id: "U1", name: "One", role: "r" }], channels: [{ id: "C1", name: "general" }] });
    const base = slack.url.replace(/\/api\/$/, "");
    const page = await fetch(`${base}/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("Crewline playground");
    const bad = await fetch(`${base}/playground/command`, { method: "POST", body: JSON.stringify({ user: "<script>", channel: "C1", text: "/crew" }) });
    expect(bad.status).toBe(400);
    const notJson = await fetch(`${base}/playground/action`, { method: "POST", body: "{" });
    expect(notJson.status).toBe(400);
    const state = await fetch(`${base}/playground/state?user=U1`).then((r) => r.json());
    expect(state).toMatchObject({ channels: [{ id: "C1" }], messages: [], modal: null, violations: [] });
    expect(slack.calls).toHaveLength(0);
  });
});

describe("playground page API: messages and message shortcuts", () => {
  it("posts a visitor's reply in a thread and sends the bot the signed message event; a shortcut sends message_action", async () => {
    const received: { headers: IncomingMessage["headers"]; body: string }[] = [];
    const bot = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        received.push({ headers: req.headers, body });
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => bot.listen(0, "127.0.0.1", r));
    try {
      const botUrl = `http://127.0.0.1:${(bot.address() as AddressInfo).port}`;
      mountPlayground(slack, {
        botUrl,
        signingSecret: "s",
        users: [{ id: "U1", name: "One", role: "r" }],
        channels: [{ id: "C1", name: "general" }],
        messageShortcuts: [{ callback_id: "crew_run_on_message", name: "Run a crew on this message" }],
      });
      const base = slack.url.replace(/\/api\/$/, "");
      const call = (route: string, body: unknown) => fetch(`${base}${route}`, { method: "POST", body: JSON.stringify(body) }).then((r) => r.json());
      const parent = await client.chat.postMessage({ channel: "C1", text: "A run" });

      expect(await call("/playground/message", { user: "U1", channel: "C1", threadTs: parent.ts, text: "lgtm" })).toMatchObject({ ok: true });
      expect(slack.messages("C1").map((m) => [m.user, m.text, m.thread_ts])).toEqual([
        ["U0BOT", "A run", undefined],
        ["U1", "lgtm", parent.ts],
      ]);
      const event = JSON.parse(received[0]!.body);
      expect(event).toMatchObject({
        type: "event_callback",
        event: { type: "message", channel: "C1", user: "U1", text: "lgtm", thread_ts: parent.ts, parent_user_id: "U0BOT", ts: slack.messages("C1")[1]!.ts },
      });
      expect(received[0]!.headers["x-slack-signature"]).toMatch(/^v0=/);
      // A thread that does not exist is refused before the bot hears of it.
      expect(await call("/playground/message", { user: "U1", channel: "C1", threadTs: "1.2", text: "x" })).toMatchObject({ ok: false });

      expect(await call("/playground/shortcut", { user: "U1", channel: "C1", ts: parent.ts, callbackId: "something_else" })).toMatchObject({ ok: false });
      expect(await call("/playground/shortcut", { user: "U1", channel: "C1", ts: parent.ts, callbackId: "crew_run_on_message" })).toMatchObject({ ok: true });
      expect(received).toHaveLength(2);
      const shortcut = JSON.parse(new URLSearchParams(received[1]!.body).get("payload")!);
      expect(shortcut).toMatchObject({
        type: "message_action",
        callback_id: "crew_run_on_message",
        user: { id: "U1" },
        channel: { id: "C1" },
        message: { ts: parent.ts, text: "A run", bot_id: "B0BOT" },
      });
      expect(shortcut.trigger_id).toContain("U1");
    } finally {
      bot.closeAllConnections();
      await new Promise((r) => bot.close(r));
    }
  });
});

describe("Slack stand-in: OAuth installs", () => {
  it("exchanges a code once for the workspace's own bot token, and records which token (and workspace) each call carried", async () => {
    const oauthSlack = await startFakeSlack({ oauthClient: { clientId: "1.2", clientSecret: "shh" } });
    try {
      const anon = new WebClient(undefined, { slackApiUrl: oauthSlack.url, retryConfig: { retries: 0 } });
      const exchange = (code: string, secret = "shh") => anon.oauth.v2.access({ code, client_id: "1.2", client_secret: secret }).catch((e) => e.data);

      const codeOne = oauthSlack.issueInstallCode({ teamId: "T0ONE", userScopes: ["search:read"] });
      expect(await exchange(codeOne, "wrong")).toMatchObject({ ok: false, error: "bad_client_secret" });
      const one = await exchange(codeOne);
      expect(one).toMatchObject({
        ok: true,
        token_type: "bot",
        bot_user_id: "U0BOT0ONE",
        team: { id: "T0ONE" },
        is_enterprise_install: false,
        authed_user: { id: "U0INSTALLER", token_type: "user" },
      });
      expect(one.access_token).toBe(oauthSlack.botTokenOf("T0ONE"));
      expect(await exchange(codeOne)).toMatchObject({ ok: false, error: "invalid_code" });

      const two = await exchange(oauthSlack.issueInstallCode({ teamId: "T0TWO" }));
      expect(two.access_token).not.toBe(one.access_token);
      expect(two.authed_user.access_token).toBeUndefined();
      // A reinstall keeps the workspace's token, as Slack does.
      expect((await exchange(oauthSlack.issueInstallCode({ teamId: "T0ONE" }))).access_token).toBe(one.access_token);

      const clientTwo = new WebClient(two.access_token, { slackApiUrl: oauthSlack.url, retryConfig: { retries: 0 } });
      expect(await clientTwo.auth.test()).toMatchObject({ team_id: "T0TWO", user_id: "U0BOT0TWO", bot_id: "B0TWO" });
      await clientTwo.chat.postMessage({ channel: "C2", text: "hi" });
      expect(oauthSlack.callsTo("chat.postMessage")[0]).toMatchObject({ token: two.access_token, team: "T0TWO" });

      oauthSlack.revokeTeam("T0TWO");
      await expect(clientTwo.chat.postMessage({ channel: "C2", text: "again" })).rejects.toMatchObject({ data: { error: "token_revoked" } });
      expect(oauthSlack.botTokenOf("T0TWO")).toBeUndefined();
    } finally {
      await oauthSlack.close();
    }
  });
});

describe("Slack stand-in message streaming", () => {
  const errorOf = (p: Promise<unknown>) =>
    p.then(
      () => "ok",
      (e: { data?: { error?: string } }) => e.data?.error,
    );

  it("starts, appends to and stops a streamed reply with task cards, checking arguments like Slack", async () => {
    const thread = (await client.chat.postMessage({ channel: "C1", text: "run" })).ts!;
    const task = { type: "task_update" as const, id: "task-1", title: "gather", status: "in_progress" as const, details: "🔧 search" };
    // In a channel a stream needs its recipient; a thread; and chunks Slack knows.
    expect(await errorOf(client.chat.startStream({ channel: "C1", thread_ts: thread, chunks: [task] }))).toBe("invalid_arguments");
    const recipient = { recipient_user_id: "U1", recipient_team_id: "T0TEAM" };
    expect(await errorOf(client.chat.startStream({ channel: "C1", thread_ts: thread, ...recipient, chunks: [{ ...task, status: "done" as never }] }))).toBe("invalid_chunks");
    const started = await client.chat.startStream({ channel: "C1", thread_ts: thread, ...recipient, chunks: [{ type: "plan_update", title: "research" }, task] });
    await client.chat.appendStream({ channel: "C1", ts: started.ts!, chunks: [{ ...task, status: "complete", output: "found" }] });
    await client.chat.stopStream({ channel: "C1", ts: started.ts! });
    expect(await errorOf(client.chat.appendStream({ channel: "C1", ts: started.ts!, chunks: [task] }))).toBe("message_not_in_streaming_state");

    const msg = slack.messages("C1").find((m) => m.ts === started.ts)!;
    expect(msg.thread_ts).toBe(thread);
    expect(msg.stream).toMatchObject({ state: "stopped", title: "research", recipientUserId: "U1", appends: 1 });
    expect(msg.stream!.tasks).toEqual([{ id: "task-1", title: "gather", status: "complete", details: "🔧 search", output: "found", history: ["in_progress", "complete"] }]);
    expect(slack.callsTo("chat.appendStream").map((c) => c.error)).toEqual([undefined, "message_not_in_streaming_state"]);
  });

  it("refuses streaming in a workspace when told to", async () => {
    slack.refuseStreaming("T0TEAM", "missing_scope");
    expect(await errorOf(client.chat.startStream({ channel: "D1", thread_ts: "1.0", markdown_text: "hi" }))).toBe("missing_scope");
  });
});
