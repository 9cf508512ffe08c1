// Flow human feedback requests, end to end: the local flow service sends signed requests over HTTP to
// the running bot, the bot posts into the fake Slack, clicks come as signed /slack/events requests,
// and the answer reaches the flow service's callback URL.
import http from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../../src/log/log.js";
import { clickFlow, FLOW_CHANNEL, type FlowHarness, flowRow, pendingFlowRequest, startFlowHarness } from "../support/flows.js";
import { eventually, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";

let f: FlowHarness | undefined;
afterEach(async () => {
  await f?.close();
  f = undefined;
});

const BOB = "U0BOB";
const DAN = "U0DAN";
const MALLORY = "U0MALLORY";
/** Waits until the bot has nothing left to do (test/support/harness.ts settled()). */
const settle = () => f!.h.settled();

/**
 * A POST that declares `declared` bytes and sends ten: its status if answered within `waitMs` (a
 * refusal that does not read the body), else 0 (the server is waiting for the rest).
 */
function sendUnfinished(url: string, headers: Record<string, string>, declared: number, waitMs = 3000): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request(url, { method: "POST", agent: false, headers: { "content-type": "application/json", "content-length": String(declared), ...headers } });
    const done = (status: number) => {
      clearTimeout(timer);
      req.destroy();
      resolve(status);
    };
    const timer = setTimeout(() => done(0), waitMs);
    req.on("response", (res) => done(res.statusCode ?? -1));
    req.on("error", () => done(-1));
    req.write('{"event":1');
  });
}

/** Everything the bot sent to Slack, as one string (to prove secrets never went there). */
const slackTraffic = (f: FlowHarness) => JSON.stringify(f.h.slack.calls.map((c) => c.args));

describe("flow feedback requests", () => {
  it("posts a signed request with one button per outcome; a decision reaches the callback exactly once and updates the message", async () => {
    f = await startFlowHarness();
    const sent = await f.flow.send({ output: "# Title\n\n**Bold** claim.", message: "Please review this article" });
    expect(sent.status).toBe(202);

    const req = await pendingFlowRequest(f.h);
    expect(req.buttons.map((b) => [b.text, b.style])).toEqual([
      ["approved", "primary"],
      ["rejected", "danger"],
      ["Edit and approve…", undefined],
      ["Reassign", undefined],
    ]);
    const text = JSON.stringify(req.msg.blocks);
    expect(text).toContain("content");
    expect(text).toContain("sim-flow");
    expect(text).toContain("review_article");
    expect(text).toContain("Please review this article");
    expect(text).toContain("**Bold** claim."); // a markdown block, like task outputs
    expect(req.msg.blocks!.some((b: any) => b.type === "input")).toBe(true);

    await clickFlow(f.h, req, "rejected", "Needs sources", BOB);
    await eventually(() => f!.flow.answers.length === 1, { what: "the answer" });
    expect(f.flow.answers[0]).toMatchObject({ feedback: "rejected\n\nNeeds sources", source: "slack" });
    const row = await eventually(async () => {
      const r = await flowRow(f!.h, req.id);
      return r.state === "answered" ? r : undefined;
    });
    expect(row).toMatchObject({ decidedBy: BOB, outcome: "rejected", feedback: "Needs sources", answerStatus: 200 });

    const updated = await eventually(() => f!.h.slack.messages(FLOW_CHANNEL).find((m) => m.ts === req.msg.ts && m.updated));
    const after = JSON.stringify(updated.blocks);
    expect(after).toContain(`<@${BOB}>`);
    expect(after).toContain("rejected");
    expect(after).toContain("Needs sources");
    expect(after).toContain("Feedback received");
    expect(updated.blocks!.some((b: any) => b.type === "actions")).toBe(false);

    // A second click (any outcome) sends nothing more.
    await clickFlow(f.h, req, "approved", "", BOB);
    await eventually(() => f!.h.slack.callsTo("chat.postEphemeral").length === 1);
    expect(f.flow.calls).toHaveLength(1);

    const audit = await prismaOf(f.h.bot.database).auditRecord.findMany({ where: { flowRequestId: req.id } });
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({
      kind: "flow_decision",
      executionId: null,
      actor: BOB,
      decision: "rejected",
      feedback: "Needs sources",
      detail: { outcome: "answered", flow: "content" },
    });

    // `/crew audit <request id>` shows it and exports it under the request message.
    await f.h.requests.command({ text: `audit ${sent.body.id}`, user_id: USER, channel_id: FLOW_CHANNEL });
    const answer = await eventually(() => f!.h.slack.callsTo("response_url").at(-1));
    expect(String(answer.args.text)).toContain("chose *rejected* on *review_article*");
    const files = await eventually(() => (f!.h.slack.files.length >= 2 ? f!.h.slack.files : undefined));
    expect(files.every((file) => file.channel === FLOW_CHANNEL && file.thread_ts === req.msg.ts)).toBe(true);
    expect(JSON.parse(files.find((file) => file.filename.endsWith(".json"))!.content)[0]).toMatchObject({ kind: "flow_decision", flowRequestId: req.id, decision: "rejected" });

    // The callback URL and its token never reached Slack.
    const token = new URL(String(sent.body.callback_url)).searchParams.get("token")!;
    expect(slackTraffic(f)).not.toContain(token);
    expect(slackTraffic(f)).not.toContain("human_feedback_requests");
  });

  it("posts a request whose long message leaves the output too little room with an excerpt and the whole as a file; its answer shows too", async () => {
    f = await startFlowHarness();
    const words = (n: number) => "lorem ipsum dolor sit amet ".repeat(Math.ceil(n / 27)).slice(0, n);
    const output = words(10_000);
    // 2,000 + 10,000 chars: Slack refused the message (msg_blocks_too_long), and the flow waited for ever.
    expect((await f.flow.send({ output, message: words(2_000) })).status).toBe(202);
    const req = await pendingFlowRequest(f.h);
    expect(JSON.stringify(req.msg.blocks)).toContain("Output shortened");
    const file = await eventually(() => f!.h.slack.files.find((x) => x.thread_ts === req.msg.ts), { what: "the output's file" });
    expect(file.content).toBe(output);

    await clickFlow(f.h, req, "approved", words(800), BOB);
    const updated = await eventually(() => f!.h.slack.messages(FLOW_CHANNEL).find((m) => m.ts === req.msg.ts && m.updated), { what: "the answered request" });
    expect(updated.blocks!.some((b: any) => b.type === "actions")).toBe(false);
    expect(JSON.stringify(updated.blocks)).toContain("the full text is attached below as a file");
    await settle();
    expect(f.h.slack.violations).toEqual([]);
  });

  it("refuses forged, missing and stale signatures with 401 and posts nothing; malformed → 400; unknown event → 2xx ignored", async () => {
    f = await startFlowHarness();
    expect((await f.flow.send({}, { secret: "not-the-secret" })).status).toBe(401);
    expect((await f.flow.send({}, { unsigned: true })).status).toBe(401);
    expect((await f.flow.send({}, { timestamp: Math.floor(Date.now() / 1000) - 6 * 60 })).status).toBe(401);
    expect((await f.flow.send({}, { timestamp: Math.floor(Date.now() / 1000) + 6 * 60 })).status).toBe(401);
    expect((await f.flow.send({}, { rawBody: "{not json" })).status).toBe(400);
    expect((await f.flow.send({ callback_url: "not a url" })).status).toBe(400);
    const ignored = await f.flow.send({ event_type: "request_expired" });
    expect(ignored.status).toBe(200);
    expect((await f.flow.send({}, { url: `${f.h.botUrl}/hooks/flows/nope` })).status).toBe(404);
    await settle();
    expect(await prismaOf(f.h.bot.database).flowRequest.count()).toBe(0);
    expect(f.h.slack.callsTo("chat.postMessage")).toHaveLength(0);
  });

  it("refuses missing, malformed and stale signature headers before reading the body", async () => {
    const lines: string[] = [];
    f = await startFlowHarness({ crewline: { log: createLogger("debug", (l) => lines.push(l)) } });
    const url = `${f.h.botUrl}/hooks/flows/content`;
    const now = Math.floor(Date.now() / 1000);
    const wellFormed = `sha256=${"0".repeat(64)}`;
    const refusals: Record<string, string>[] = [
      {},
      { "x-crewai-timestamp": String(now) },
      { "x-crewai-timestamp": String(now), "x-crewai-signature": "sha256=nothex" },
      { "x-crewai-timestamp": "soon", "x-crewai-signature": wellFormed },
      { "x-crewai-timestamp": String(now - 6 * 60), "x-crewai-signature": wellFormed },
      { "x-crewai-timestamp": String(now + 6 * 60), "x-crewai-signature": wellFormed },
    ];
    // 900 KB declared (under the 1 MiB limit), 10 bytes sent: answered only if the body is not awaited.
    const answers = await Promise.all(refusals.map((headers) => sendUnfinished(url, headers, 900_000)));
    expect(answers).toEqual(refusals.map(() => 401));
    // Plausible headers need the body for the HMAC: that request is still waiting for it.
    expect(await sendUnfinished(url, { "x-crewai-timestamp": String(now), "x-crewai-signature": wellFormed }, 900_000, 500)).toBe(0);
    // Sampled as before: one line per reason.
    const refused = lines.filter((l) => l.includes("flow request refused"));
    expect(refused.map((l) => JSON.parse(l).reason).sort()).toEqual(["malformed", "missing", "stale"]);
    expect(await prismaOf(f.h.bot.database).flowRequest.count()).toBe(0);
  });

  it("posts a request delivered twice once", async () => {
    f = await startFlowHarness();
    const [a, b] = await Promise.all([f.flow.send({ id: "req-dup" }), f.flow.send({ id: "req-dup" })]);
    expect([a.status, b.status].sort()).toEqual([200, 202]);
    expect((await f.flow.send({ id: "req-dup" })).status).toBe(200);
    await pendingFlowRequest(f.h);
    await settle();
    expect(f.h.slack.callsTo("chat.postMessage")).toHaveLength(1);
    // The flow's text is posted without link previews (form-encoded: "false").
    expect(f.h.slack.callsTo("chat.postMessage")[0]!.args).toMatchObject({ unfurl_links: "false", unfurl_media: "false" });
    expect(await prismaOf(f.h.bot.database).flowRequest.count()).toBe(1);
  });

  it("answers once across a double click", async () => {
    f = await startFlowHarness();
    await f.flow.send();
    const req = await pendingFlowRequest(f.h);
    await Promise.all([clickFlow(f.h, req, "approved", "", USER), clickFlow(f.h, req, "approved", "", BOB), clickFlow(f.h, req, "rejected", "no", USER)]);
    await eventually(async () => (await flowRow(f!.h, req.id)).state === "answered");
    await settle();
    expect(f.flow.calls).toHaveLength(1);
    expect(f.flow.answers).toHaveLength(1);
  });

  it.each([409, 410])("closes the request with the reason when the callback answers %i", async (status) => {
    f = await startFlowHarness();
    await f.flow.send();
    const req = await pendingFlowRequest(f.h);
    f.flow.failNext(status, { error: status === 409 ? "Conflict" : "Gone", message: status === 409 ? "Feedback was already provided" : "The response token has expired" });
    await clickFlow(f.h, req, "approved", "ok", USER);
    const row = await eventually(async () => {
      const r = await flowRow(f!.h, req.id);
      return r.state === "closed" ? r : undefined;
    });
    expect(row.answerStatus).toBe(status);
    const reason = status === 409 ? "Feedback was already provided" : "The response token has expired";
    const updated = await eventually(() => f!.h.slack.messages(FLOW_CHANNEL).find((m) => m.ts === req.msg.ts && m.updated));
    expect(JSON.stringify(updated.blocks)).toContain(reason);
    expect(updated.blocks!.some((b: any) => b.type === "actions")).toBe(false);
    const told = await eventually(() => f!.h.slack.callsTo("chat.postEphemeral")[0]);
    expect(told.args.text).toContain(reason);
  });

  it.each([
    [200, "answered"],
    [409, "closed"],
  ] as const)("shows the flow's %i answer escaped: no <!channel>, mention or disguised link reaches Slack", async (status, state) => {
    f = await startFlowHarness();
    await f.flow.send();
    const req = await pendingFlowRequest(f.h);
    const hostile = "<!channel> ping <@U0VICTIM> <https://phish.example|Approve>";
    f.flow.failNext(status, { message: hostile });
    await clickFlow(f.h, req, "approved", "ok", USER);
    await eventually(async () => (await flowRow(f!.h, req.id)).state === state, { what: `the request ${state}` });
    const updated = await eventually(() => f!.h.slack.messages(FLOW_CHANNEL).find((m) => m.ts === req.msg.ts && m.updated));
    const shown = JSON.stringify(updated.blocks);
    // The flow's text loses its URLs, whatever its status (it may quote the callback URL, whose token answers the request).
    expect(shown).toContain("&lt;!channel&gt; ping &lt;@U0VICTIM&gt; &lt;[url]&gt;");
    if (state === "closed") {
      const told = await eventually(() => f!.h.slack.callsTo("chat.postEphemeral")[0]);
      expect(told.args.text).toContain("&lt;!channel&gt;");
    }
    for (const part of ["<!channel>", "<@U0VICTIM>", "<https://phish.example"]) expect(slackTraffic(f)).not.toContain(part);
  });

  it("never stores or shows the callback URL or its token when the flow quotes them in its 2xx answer", async () => {
    f = await startFlowHarness();
    const sent = await f.flow.send();
    const req = await pendingFlowRequest(f.h);
    const callbackUrl = String(sent.body.callback_url);
    const token = new URL(callbackUrl).searchParams.get("token")!;
    f.flow.failNext(200, { message: `Feedback stored for ${callbackUrl} (response token ${token})` });
    await clickFlow(f.h, req, "approved", "ok", USER);
    const row = await eventually(async () => {
      const r = await flowRow(f!.h, req.id);
      return r.state === "answered" ? r : undefined;
    });
    await settle();
    const audit = JSON.stringify(await prismaOf(f.h.bot.database).auditRecord.findMany({ where: { flowRequestId: req.id } }));
    for (const stored of [String(row.answerMessage), audit, slackTraffic(f)]) {
      expect(stored).toContain("Feedback stored for");
      expect(stored).not.toContain(token);
      expect(stored).not.toContain("human_feedback_requests");
    }
  });

  it("/crew audit of a flow without reviewer rules: only its channel's members and its assignee see the trail; an outsider gets what an unknown id gets", async () => {
    f = await startFlowHarness({ flow: { team: "T0TEAM" } });
    await f.flow.send({ output: "Draft" });
    const req = await pendingFlowRequest(f.h);
    await clickFlow(f.h, req, "approved", "Looks fine", USER);
    await eventually(async () => (await flowRow(f!.h, req.id)).state === "answered", { what: "the answer" });
    const { requestId } = await flowRow(f.h, req.id);
    f.h.slack.setMembers(FLOW_CHANNEL, [USER, BOB]);
    const audit = async (user: string, channel: string, team?: string) => {
      const before = f!.h.slack.callsTo("response_url").length;
      await f!.h.requests.command({ text: `audit ${requestId}`, user_id: user, channel_id: channel, ...(team ? { team_id: team } : {}) });
      return String((await eventually(() => f!.h.slack.callsTo("response_url")[before], { what: `${user}'s audit answer` })).args.text);
    };
    // A member of the request's channel, asking elsewhere: the trail.
    expect(await audit(BOB, "C0ELSEWHERE")).toMatch(/Audit trail.*\n.*chose \*approved\*.*Looks fine/s);
    // Someone in no relation to the request, in another channel or another workspace: nothing of it.
    for (const [user, channel, team] of [
      [MALLORY, "C0ELSEWHERE", undefined],
      [MALLORY, "C0OTHERTEAM", "T0OTHER"],
      [BOB, FLOW_CHANNEL, "T0OTHER"],
    ] as const) {
      const text = await audit(user, channel, team);
      expect(text).toMatch(/^I don't know a run with kickoff id/);
      for (const part of ["Audit trail", "approved", "Looks fine", "content"]) expect(text).not.toContain(part);
    }
  }, 60_000);

  it("refuses an answer that comes too late (the flow service's own 410)", async () => {
    f = await startFlowHarness({ answerWindowMs: 1 });
    await f.flow.send();
    const req = await pendingFlowRequest(f.h);
    await clickFlow(f.h, req, "approved");
    await eventually(async () => (await flowRow(f!.h, req.id)).state === "closed");
    expect(f.flow.answers).toHaveLength(0);
    expect(f.flow.calls[0]!.status).toBe(410);
  });

  it("lets the request be decided again after a 5xx", async () => {
    f = await startFlowHarness();
    await f.flow.send();
    const req = await pendingFlowRequest(f.h);
    f.flow.failNext(503);
    await clickFlow(f.h, req, "approved", "", USER);
    const told = await eventually(() => f!.h.slack.callsTo("chat.postEphemeral")[0]);
    expect(told.args.text).toMatch(/did not reach the flow/);
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "pending", decidedBy: null });
    expect(f.flow.answers).toHaveLength(0);

    await clickFlow(f.h, req, "approved", "second try", BOB);
    await eventually(() => f!.flow.answers.length === 1);
    expect(f.flow.answers[0]!.feedback).toBe("approved\n\nsecond try");
    expect(f.flow.calls).toHaveLength(2);
    // The flow has its answer before the bot records what it said: the audit row follows.
    const outcomes = async () =>
      (await prismaOf(f!.h.bot.database).auditRecord.findMany({ where: { flowRequestId: req.id }, orderBy: { createdAt: "asc" } })).map((a) => (a.detail as any).outcome);
    await eventually(async () => (await outcomes()).length >= 2 || undefined, { what: "the second attempt's audit row" });
    expect(await outcomes()).toEqual(["failed", "answered"]);
  });

  it("mentions an assignee found by e-mail, who may decide besides the reviewers; an outsider is refused", async () => {
    f = await startFlowHarness({ flow: { reviewers: { users: [BOB], usergroups: [] } } });
    f.h.slack.setUser(DAN, { profile: { email: "dan@example.com" } });
    await f.flow.send({ assigned_to_email: "dan@example.com" });
    const req = await pendingFlowRequest(f.h);
    expect(JSON.stringify(req.msg.blocks)).toContain(`<@${DAN}>`);
    expect(f.h.slack.callsTo("users.lookupByEmail")).toHaveLength(1);

    await clickFlow(f.h, req, "approved", "", MALLORY);
    const refusal = await eventually(() => f!.h.slack.callsTo("chat.postEphemeral")[0]);
    expect(refusal.args.user).toBe(MALLORY);
    expect(refusal.args.text).toContain(`<@${BOB}>`);
    expect(refusal.args.text).toContain(`<@${DAN}>`);
    expect(refusal.args.text).toMatch(/nothing was sent/);
    await settle();
    expect(f.flow.calls).toHaveLength(0);
    expect((await flowRow(f.h, req.id)).state).toBe("pending");

    await clickFlow(f.h, req, "approved", "", DAN);
    await eventually(() => f!.flow.answers.length === 1);
    expect((await flowRow(f.h, req.id)).decidedBy).toBe(DAN);
  });

  it("says who the request was for when no Slack user has the e-mail", async () => {
    f = await startFlowHarness();
    await f.flow.send({ assigned_to_email: "ghost@example.com" });
    const req = await pendingFlowRequest(f.h);
    const text = JSON.stringify(req.msg.blocks);
    expect(text).toContain("ghost@example.com");
    expect(text).toMatch(/no Slack user/);
  });

  it("offers Send feedback when the request has no outcomes, and requires the feedback", async () => {
    f = await startFlowHarness();
    await f.flow.send({ emit: null });
    const req = await pendingFlowRequest(f.h);
    expect(req.buttons.map((b) => b.text)).toEqual(["Send feedback", "Edit and approve…", "Reassign"]);
    await clickFlow(f.h, req, "Send feedback", "   ");
    const told = await eventually(() => f!.h.slack.callsTo("chat.postEphemeral")[0]);
    expect(told.args.text).toMatch(/write your feedback/);
    await settle();
    expect(f.flow.calls).toHaveLength(0);
    await clickFlow(f.h, req, "Send feedback", "Shorten the intro");
    await eventually(() => f!.flow.answers.length === 1);
    expect(f.flow.answers[0]).toMatchObject({ feedback: "Shorten the intro", source: "slack" });
  });

  it("refuses a click that claims another message", async () => {
    f = await startFlowHarness();
    await f.flow.send();
    const req = await pendingFlowRequest(f.h);
    await clickFlow(f.h, req, "approved", "", USER, { ts: "1700000000.000100" });
    await clickFlow(f.h, req, "approved", "", USER, { channel: "C0OTHER" });
    await eventually(() => f!.h.slack.callsTo("chat.postEphemeral").length === 2);
    expect(f.flow.calls).toHaveLength(0);
    expect((await flowRow(f.h, req.id)).state).toBe("pending");
  });

  it("reads no more than 4 MiB of the flow's answer: a 10 MiB 503 is a readable failure, a 10 MiB 200 an answer", async () => {
    f = await startFlowHarness();
    await f.flow.send();
    const req = await pendingFlowRequest(f.h);
    const huge = "m".repeat(10 * 1024 * 1024);
    f.flow.failNext(503, { error: "Service Unavailable", message: huge });
    await clickFlow(f.h, req, "approved", "", USER);
    const told = await eventually(() => f!.h.slack.callsTo("chat.postEphemeral")[0]);
    expect(told.args.text).toMatch(/did not reach the flow \(the flow answered 503[^)]*\)/);
    expect(String(told.args.text).length).toBeLessThan(500);
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "pending" });

    f.flow.failNext(200, { status: "received", message: huge });
    await clickFlow(f.h, req, "approved", "again", USER);
    const row = await eventually(async () => {
      const r = await flowRow(f!.h, req.id);
      return r.state === "answered" ? r : undefined;
    });
    expect(String(row.answerMessage ?? "").length).toBeLessThan(1000);
    expect((await fetch(`${f.h.botUrl}/healthz`)).status).toBe(200);
  });

  it("posts a request recorded before a crash once, at the next recovery", async () => {
    f = await startFlowHarness({ config: { polling: { claimStaleMs: 100 } } });
    f.h.slack.failNext("chat.postMessage", "fatal_error");
    expect((await f.flow.send({ id: "req-crash" })).status).toBe(202);
    await eventually(() => f!.h.slack.callsTo("chat.postMessage").length === 1);
    expect(f.h.slack.messages(FLOW_CHANNEL)).toHaveLength(0);
    // What a restarted process (or another replica's sweep) does: post it, once.
    await Promise.all([f.h.bot.flows.recover(), f.h.bot.flows.recover()]);
    await f.h.bot.flows.recover();
    const req = await pendingFlowRequest(f.h);
    await settle();
    expect(f.h.slack.messages(FLOW_CHANNEL)).toHaveLength(1);
    // A process that died while calling the flow left it "deciding": recovery opens it again, later.
    await prismaOf(f.h.bot.database).flowRequest.update({ where: { id: req.id }, data: { state: "deciding", decidedBy: USER, decidedAt: new Date() } });
    await f.h.bot.flows.recover();
    expect((await flowRow(f.h, req.id)).state).toBe("deciding");
    await prismaOf(f.h.bot.database).flowRequest.update({ where: { id: req.id }, data: { decidedAt: new Date(Date.now() - 5 * 60_000) } });
    await f.h.bot.flows.recover();
    // Its answer is kept as one that may have reached the flow.
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "pending", decidedBy: USER, decidedAt: null });
    await clickFlow(f.h, req, "approved");
    await eventually(() => f!.flow.answers.length === 1);
  });

  it("lists the request in the App Home of whoever may decide it, and reminds them", async () => {
    const clock = { offsetMs: 0, now: () => new Date(Date.now() + clock.offsetMs) };
    f = await startFlowHarness({ flow: { reviewers: { users: [BOB], usergroups: [] } }, config: { reviewReminders: { afterMinutes: 1, max: 2 } }, crewline: { clock } });
    await f.flow.send({ method_name: "review_article" });
    const req = await pendingFlowRequest(f.h);

    await f.h.requests.appHomeOpened({ user_id: BOB });
    const [published] = await f.h.slack.waitForCalls("views.publish", 1);
    const home = JSON.stringify((published!.args.view as any).blocks);
    expect(home).toContain("Reviews waiting for you (1)");
    expect(home).toContain("review_article");
    expect(home).toContain("/hooks/flows/content");
    await f.h.requests.appHomeOpened({ user_id: MALLORY });
    const calls = await f.h.slack.waitForCalls("views.publish", 2);
    expect(JSON.stringify((calls[1]!.args.view as any).blocks)).not.toContain("Reviews waiting for you (");

    expect(await f.h.bot.flows.remindDue()).toBe(0);
    clock.offsetMs = 61_000;
    const sent = await Promise.all([f.h.bot.flows.remindDue(), f.h.bot.flows.remindDue()]);
    expect(sent[0]! + sent[1]!).toBe(1);
    const reminder = await eventually(() => f!.h.slack.messages(FLOW_CHANNEL).find((m) => m.thread_ts === req.msg.ts && /⏰/.test(m.text ?? "")), { what: "the reminder" });
    expect(reminder.text).toContain(`<@${BOB}>`);
  });

  it("logs the webhook URL at start-up and never the secret, the callback URL or its token", async () => {
    const lines: string[] = [];
    f = await startFlowHarness({ crewline: { log: createLogger("debug", (l) => lines.push(l)) } });
    expect(lines.join("\n")).toContain(`${f.h.botUrl}/hooks/flows/content`);
    const sent = await f.flow.send({ assigned_to_email: "nobody@example.com" });
    const req = await pendingFlowRequest(f.h);
    await f.flow.send({}, { secret: "forged" });
    f.flow.failNext(503);
    await clickFlow(f.h, req, "approved");
    await eventually(() => f!.h.slack.callsTo("chat.postEphemeral").length === 1);
    await clickFlow(f.h, req, "approved");
    await eventually(() => f!.flow.answers.length === 1);
    const token = new URL(String(sent.body.callback_url)).searchParams.get("token")!;
    const log = lines.join("\n");
    expect(log).toMatch(/bad signature/);
    expect(log).toMatch(/flow callback failed/);
    for (const secret of [token, "human_feedback_requests", "flow-webhook-secret"]) expect(log).not.toContain(secret);
  });

  it("works without any crew: /crew says none is configured, requests are answered", async () => {
    f = await startFlowHarness({ config: { crews: [] } });
    const res = await f.h.requests.command({ text: "", user_id: USER, channel_id: FLOW_CHANNEL });
    expect(res.body).toMatch(/No crew is configured/);
    expect(f.h.slack.callsTo("views.open")).toHaveLength(0);
    await f.flow.send();
    const req = await pendingFlowRequest(f.h);
    await clickFlow(f.h, req, "approved");
    await eventually(() => f!.flow.answers.length === 1);
  });

  it("/crew help tells where the flow's webhook URL is", async () => {
    f = await startFlowHarness();
    const res = await f.h.requests.command({ text: "help", user_id: USER, channel_id: FLOW_CHANNEL });
    expect(res.body).toContain(`${f.h.botUrl}/hooks/flows/content`);
    expect(res.body).not.toContain("flow-webhook-secret");
  });
});
