import type { AddressInfo } from "node:net";
import { App, LogLevel, verifySlackRequest } from "@slack/bolt";
import { WebClient } from "@slack/web-api";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type FakeSlack, startFakeSlack } from "./fake-slack.js";
import { signSlackBody, slackRequester } from "./slack-requests.js";

let fake: FakeSlack;
let client: WebClient;

beforeAll(async () => {
  fake = await startFakeSlack();
  client = new WebClient("xoxb-test", {
    slackApiUrl: fake.url,
    retryConfig: { retries: 1, factor: 1, minTimeout: 10 },
    logLevel: LogLevel.ERROR,
  });
});
afterEach(() => fake.reset());
afterAll(() => fake.close());

describe("fake Slack Web API with a real WebClient", () => {
  it("exposes an /api/ base URL and answers auth.test", async () => {
    expect(fake.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/$/);
    const auth = await client.auth.test();
    expect(auth).toMatchObject({ ok: true, user_id: "U0BOT", bot_id: "B0BOT", team_id: "T0TEAM", user: "crewline" });
    expect(fake.callsTo("auth.test")[0]?.token).toBe("xoxb-test");
  });

  it("posts, threads, updates and deletes messages; blocks round-trip as objects", async () => {
    const blocks = [{ type: "section", block_id: "b1", text: { type: "mrkdwn", text: "*hello*" } }];
    const parent = await client.chat.postMessage({ channel: "C1", text: "hello", blocks });
    expect(parent.ts).toMatch(/^\d{10}\.\d{6}$/);
    const reply = await client.chat.postMessage({ channel: "C1", text: "reply", thread_ts: parent.ts! });
    expect(Number(reply.ts)).toBeGreaterThan(Number(parent.ts));
    // Counted from the process's start: a playground restarted on its kept database posts no ts it posted before.
    expect(Number(parent.ts) * 1000).toBeGreaterThanOrEqual(Math.floor(performance.timeOrigin) - 1000);

    expect(fake.callsTo("chat.postMessage")[0]?.args.blocks).toEqual(blocks);
    // Each call records the ts its answer carried: which message it posted.
    expect(fake.callsTo("chat.postMessage").map((c) => c.ts)).toEqual([parent.ts, reply.ts]);
    await client.chat.update({ channel: "C1", ts: parent.ts!, text: "edited", blocks: [{ type: "divider" }] });

    const msgs = fake.messages("C1");
    expect(msgs).toHaveLength(2);
    expect(msgs[0]).toMatchObject({ ts: parent.ts, text: "edited", blocks: [{ type: "divider" }], user: "U0BOT" });
    expect(msgs[0]?.updated).toBeTypeOf("number");
    expect(msgs[1]).toMatchObject({ text: "reply", thread_ts: parent.ts });

    await expect(client.chat.update({ channel: "C1", ts: "1.2", text: "x" })).rejects.toMatchObject({ data: { error: "message_not_found" } });
    await client.chat.delete({ channel: "C1", ts: reply.ts! });
    expect(fake.messages("C1")).toHaveLength(1);

    const link = await client.chat.getPermalink({ channel: "C1", message_ts: parent.ts! });
    expect(link.permalink).toBe(`https://example.slack.com/archives/C1/p${parent.ts!.replace(".", "")}`);
    const eph = await client.chat.postEphemeral({ channel: "C1", user: "U1", text: "only you" });
    expect(eph.message_ts).toBeTruthy();
  });

  it("failNext makes the WebClient throw with data.error, once", async () => {
    fake.failNext("chat.postMessage", "not_in_channel");
    await expect(client.chat.postMessage({ channel: "C1", text: "x" })).rejects.toMatchObject({
      code: "slack_webapi_platform_error",
      data: { ok: false, error: "not_in_channel" },
    });
    await expect(client.chat.postMessage({ channel: "C1", text: "x" })).resolves.toMatchObject({ ok: true });
    expect(fake.callsTo("chat.postMessage").map((c) => c.error)).toEqual(["not_in_channel", undefined]);
  });

  it("denyChannel answers not_in_channel until conversations.join", async () => {
    fake.denyChannel("C2");
    await expect(client.chat.postMessage({ channel: "C2", text: "x" })).rejects.toMatchObject({ data: { error: "not_in_channel" } });
    expect((await client.conversations.info({ channel: "C2" })).channel).toMatchObject({ id: "C2", is_member: false, is_im: false });
    await client.conversations.join({ channel: "C2" });
    await expect(client.chat.postMessage({ channel: "C2", text: "x" })).resolves.toMatchObject({ ok: true });
    expect((await client.conversations.info({ channel: "D9" })).channel).toMatchObject({ is_im: true, is_member: true });
  });

  it("rateLimitNext answers 429 + Retry-After; the WebClient waits and succeeds", async () => {
    fake.rateLimitNext("chat.update", 1, 1);
    const { ts } = await client.chat.postMessage({ channel: "C1", text: "a" });
    const started = Date.now();
    await expect(client.chat.update({ channel: "C1", ts: ts!, text: "b" })).resolves.toMatchObject({ ok: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(fake.rateLimited).toBe(1);
    expect(fake.callsTo("chat.update").map((c) => c.error)).toEqual(["ratelimited", undefined]);
    expect(fake.messages("C1")[0]?.text).toBe("b");
  });

  it("tier3PerMinute limits chat.update per channel", async () => {
    const limited = await startFakeSlack({ tier3PerMinute: 2 });
    try {
      const c = new WebClient("xoxb-test", { slackApiUrl: limited.url, rejectRateLimitedCalls: true, logLevel: LogLevel.ERROR });
      const { ts } = await c.chat.postMessage({ channel: "C1", text: "a" });
      await c.chat.update({ channel: "C1", ts: ts!, text: "1" });
      await c.chat.update({ channel: "C1", ts: ts!, text: "2" });
      await expect(c.chat.update({ channel: "C1", ts: ts!, text: "3" })).rejects.toMatchObject({ code: "slack_webapi_rate_limited_error", retryAfter: 1 });
      expect(limited.rateLimited).toBe(1);
    } finally {
      await limited.close();
    }
  });

  it("tiers: chat.update past its tier answers 429 per workspace, chat.postMessage per channel, with Retry-After", async () => {
    const limited = await startFakeSlack({ tiers: { tier3: { perMinute: 6, burst: 2, scope: "workspace" }, post: { perMinute: 60, burst: 2, scope: "channel" } } });
    try {
      const c = new WebClient("xoxb-test", { slackApiUrl: limited.url, rejectRateLimitedCalls: true, retryConfig: { retries: 0 }, logLevel: LogLevel.ERROR });
      const { ts } = await c.chat.postMessage({ channel: "C1", text: "a" });
      await c.chat.postMessage({ channel: "C1", text: "b" });
      // The third post in the same second goes past the channel's pace; another channel is not affected.
      await expect(c.chat.postMessage({ channel: "C1", text: "c" })).rejects.toMatchObject({ code: "slack_webapi_rate_limited_error", retryAfter: 1 });
      await c.chat.postMessage({ channel: "C2", text: "d" });
      // chat.update: the workspace's bucket, whichever channel (6 a minute: the next token in 10 s).
      await c.chat.update({ channel: "C1", ts: ts!, text: "1" });
      const { ts: ts2 } = await c.chat.postMessage({ channel: "C3", text: "e" });
      await c.chat.update({ channel: "C3", ts: ts2!, text: "2" });
      await expect(c.chat.update({ channel: "C3", ts: ts2!, text: "3" })).rejects.toMatchObject({ code: "slack_webapi_rate_limited_error", retryAfter: 10 });
      expect(limited.tierLimited).toEqual({ "chat.postMessage": 1, "chat.update": 1 });
      expect(limited.rateLimited).toBe(2);
      expect(limited.messages("C3")[0]?.text).toBe("2");
      // Off by default: the shared stand-in of this file never said no above.
      expect(fake.tierLimited).toEqual({});
    } finally {
      await limited.close();
    }
  });

  it("delayNext delays the answer", async () => {
    fake.delayNext("auth.test", 200);
    const started = Date.now();
    await client.auth.test();
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
  });

  it("latencyMs: every Web API call takes that long before its message exists and it is answered", async () => {
    const slow = await startFakeSlack({ latencyMs: { min: 60, max: 90 } });
    const slowClient = new WebClient("xoxb-test", { slackApiUrl: slow.url, logLevel: LogLevel.ERROR });
    try {
      const started = Date.now();
      const pending = slowClient.chat.postMessage({ channel: "C1", text: "hello" });
      // Fixed wait: the subject is the latency itself (halfway through it, no message yet).
      await new Promise((r) => setTimeout(r, 30));
      expect(slow.messages("C1")).toEqual([]);
      const { ts } = await pending;
      expect(Date.now() - started).toBeGreaterThanOrEqual(58);
      expect(slow.messages("C1").map((m) => m.ts)).toEqual([ts]);
      const t1 = Date.now();
      await slowClient.chat.update({ channel: "C1", ts: ts!, text: "edited" });
      expect(Date.now() - t1).toBeGreaterThanOrEqual(58);
    } finally {
      await slow.close();
    }
  });

  it("filesUploadV2 stores the uploaded content", async () => {
    const { ts } = await client.chat.postMessage({ channel: "C1", text: "parent" });
    await client.filesUploadV2({
      channel_id: "C1",
      thread_ts: ts!,
      filename: "output.md",
      title: "Full output",
      content: "# Report\nline 2 ✓",
      initial_comment: "Full output attached",
    });
    expect(fake.files).toEqual([
      expect.objectContaining({
        channel: "C1",
        thread_ts: ts,
        filename: "output.md",
        title: "Full output",
        content: "# Report\nline 2 ✓",
        initial_comment: "Full output attached",
      }),
    ]);
    expect(fake.callsTo("files.completeUploadExternal")[0]?.args.files).toEqual([{ id: fake.files[0]?.id, title: "Full output" }]);
  });

  it("views.open consumes the trigger; views.update checks the hash", async () => {
    const view = { type: "modal" as const, callback_id: "run", title: { type: "plain_text" as const, text: "Loading…" }, blocks: [] };
    const opened = await client.views.open({ trigger_id: "trig-a", view });
    const id = opened.view!.id!;
    expect(id).toMatch(/^V/);
    expect(fake.callsTo("views.open")[0]?.args.view).toEqual(view);
    await expect(client.views.open({ trigger_id: "trig-a", view })).rejects.toMatchObject({ data: { error: "trigger_exchanged" } });

    const updated = await client.views.update({ view_id: id, hash: opened.view!.hash!, view: { ...view, title: { type: "plain_text", text: "Run crew" } } });
    expect(updated.view!.hash).not.toBe(opened.view!.hash);
    expect(fake.views.get(id)).toMatchObject({ id, hash: updated.view!.hash, view: { title: { text: "Run crew" } } });
    await expect(client.views.update({ view_id: id, hash: opened.view!.hash!, view })).rejects.toMatchObject({ data: { error: "hash_conflict" } });
    await expect(client.views.update({ view_id: "V404", view })).rejects.toMatchObject({ data: { error: "not_found" } });

    await client.views.publish({ user_id: "U1", view: { type: "home", blocks: [] } });
    await client.views.publish({ user_id: "U1", view: { type: "home", blocks: [{ type: "divider" }] } });
    const homes = [...fake.views.values()].filter((v) => v.user === "U1");
    expect(homes).toHaveLength(1);
    expect(homes[0]?.view.blocks).toEqual([{ type: "divider" }]);
  });

  it("rejects payloads beyond Block Kit limits", async () => {
    const blocks = Array.from({ length: 51 }, () => ({ type: "divider" }));
    await expect(client.chat.postMessage({ channel: "C1", text: "x", blocks })).rejects.toMatchObject({ data: { error: "invalid_blocks" } });
    const view = { type: "modal" as const, title: { type: "plain_text" as const, text: "x".repeat(25) }, blocks: [] };
    await expect(client.views.open({ trigger_id: "trig-b", view })).rejects.toMatchObject({ data: { error: "invalid_arguments" } });
  });

  it("users, usergroups and unknown methods", async () => {
    fake.setUsergroup("S1", ["U1", "U2"]);
    expect((await client.usergroups.users.list({ usergroup: "S1" })).users).toEqual(["U1", "U2"]);
    await expect(client.usergroups.users.list({ usergroup: "S2" })).rejects.toMatchObject({ data: { error: "no_such_subteam" } });
    fake.setUser("U1", { real_name: "Ada" });
    expect((await client.users.info({ user: "U1" })).user).toMatchObject({ id: "U1", real_name: "Ada", team_id: "T0TEAM" });
    await expect(client.apiCall("nope.nothing")).rejects.toMatchObject({ data: { error: "unknown_method" } });
    expect(fake.callsTo("nope.nothing")).toHaveLength(1);
  });

  it("waitForCalls resolves on arrival and rejects listing methods seen", async () => {
    const waiting = fake.waitForCalls("chat.postMessage", 2, 2000);
    await client.chat.postMessage({ channel: "C1", text: "1" });
    await client.chat.postMessage({ channel: "C1", text: "2" });
    expect(await waiting).toHaveLength(2);
    await expect(fake.waitForCalls("chat.update", 1, 50)).rejects.toThrow(/chat\.update.*methods seen: chat\.postMessage×2/);
  });

  it("accepts JSON bodies and response_url posts", async () => {
    const res = await fetch(`${fake.url}chat.postMessage`, {
      method: "POST",
      headers: { "content-type": "application/json; charset=utf-8", authorization: "Bearer xoxb-json" },
      body: JSON.stringify({ channel: "C3", text: "json", blocks: [{ type: "divider" }] }),
    });
    const posted = (await res.json()) as { ok: boolean; ts: string };
    expect(posted.ok).toBe(true);
    expect(fake.callsTo("chat.postMessage")[0]).toMatchObject({ token: "xoxb-json", args: { blocks: [{ type: "divider" }] } });

    const url = fake.responseUrl("C3", posted.ts);
    const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ replace_original: true, text: "replaced" }) });
    expect(r.status).toBe(200);
    expect(fake.callsTo("response_url")[0]?.args).toEqual({ replace_original: true, text: "replaced" });
    expect(fake.messages("C3")[0]?.text).toBe("replaced");
  });
});

describe("signed requests", () => {
  it("signSlackBody passes Bolt's verifySlackRequest, and a wrong secret does not", () => {
    const body = "command=%2Fcrew&text=hi";
    const h = signSlackBody("s3cret", body);
    const headers = { "x-slack-signature": h["X-Slack-Signature"]!, "x-slack-request-timestamp": Number(h["X-Slack-Request-Timestamp"]) };
    expect(() => verifySlackRequest({ signingSecret: "s3cret", body, headers })).not.toThrow();
    expect(() => verifySlackRequest({ signingSecret: "other", body, headers })).toThrow();
    const old = signSlackBody("s3cret", body, Math.floor(Date.now() / 1000) - 600);
    expect(() =>
      verifySlackRequest({
        signingSecret: "s3cret",
        body,
        headers: { "x-slack-signature": old["X-Slack-Signature"]!, "x-slack-request-timestamp": Number(old["X-Slack-Request-Timestamp"]) },
      }),
    ).toThrow();
  });

  it("drives a real Bolt app over HTTP end to end", async () => {
    const seen: Record<string, unknown[]> = {};
    const record = (k: string, v: unknown) => (seen[k] ??= []).push(v);
    const app = new App({
      token: "xoxb-bolt",
      signingSecret: "s3cret",
      botId: "B0BOT",
      botUserId: "U0BOT",
      tokenVerificationEnabled: false,
      logLevel: LogLevel.ERROR,
      clientOptions: { slackApiUrl: fake.url },
    });
    app.command("/crew", async ({ ack, command, client: c }) => {
      await ack();
      record("command", command);
      await c.views.open({ trigger_id: command.trigger_id, view: { type: "modal", callback_id: "run", title: { type: "plain_text", text: "Run" }, blocks: [] } });
      await c.chat.postMessage({ channel: command.channel_id, text: `running ${command.text}` });
    });
    app.action("approve", async ({ ack, body, respond }) => {
      await ack();
      record("action", body);
      await respond({ replace_original: true, text: "approved" });
    });
    app.view("run", async ({ ack, view }) => {
      record("view", view);
      await ack({ response_action: "errors", errors: { crew: "Pick a crew" } });
    });
    app.event("app_home_opened", async ({ event, client: c }) => {
      await c.views.publish({ user_id: event.user, view: { type: "home", blocks: [] } });
    });
    const server = await app.start(0);
    try {
      const slack = slackRequester({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, signingSecret: "s3cret", responseUrlBase: fake.responseUrlBase });

      expect((await slack.command({ text: "triage", channel_id: "C1", user_id: "U1" })).status).toBe(200);
      const [post] = await fake.waitForCalls("chat.postMessage", 1);
      expect(post).toMatchObject({ token: "xoxb-bolt", args: { channel: "C1", text: "running triage" } });
      expect(fake.callsTo("views.open")[0]?.args.trigger_id).toMatch(/^trig-\d+$/);

      const ts = fake.messages("C1")[0]!.ts;
      const act = await slack.blockAction({ user_id: "U1", channel_id: "C1", message_ts: ts, action: { action_id: "approve", block_id: "b", value: "42" } });
      expect(act.status).toBe(200);
      await fake.waitForCalls("response_url", 1);
      expect(fake.messages("C1")[0]?.text).toBe("approved");
      expect(seen.action?.[0]).toMatchObject({ type: "block_actions", actions: [{ action_id: "approve", value: "42", type: "button" }], container: { message_ts: ts } });

      const sub = await slack.viewSubmission({
        user_id: "U1",
        view: { callback_id: "run", private_metadata: "{}", state: { values: { crew: { pick: { type: "static_select", selected_option: null } } } } },
      });
      expect(sub).toMatchObject({ status: 200, json: { response_action: "errors", errors: { crew: "Pick a crew" } } });

      expect((await slack.appHomeOpened({ user_id: "U1" })).status).toBe(200);
      await fake.waitForCalls("views.publish", 1);

      const body = "command=%2Fcrew";
      expect((await slack.raw(body, { "Content-Type": "application/x-www-form-urlencoded", ...signSlackBody("wrong", body) })).status).toBe(401);
    } finally {
      await app.stop();
    }
  });
});
