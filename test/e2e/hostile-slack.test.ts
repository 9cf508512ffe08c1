// Hostile Slack requests through signed HTTP to /slack/events (issue #11, items 3, 4, 6, 7, 9):
// malformed signed bodies, status of other people's runs, forged clicks, foreign and replayed
// kickoff forms, and a click while the database is down.
import http from "node:http";
import { afterEach, describe, expect, it, vi } from "vitest";
import { APPROVE_ACTION, inputNameFromBlockId } from "../../src/adapters/slack/blocks/index.js";
import { createLogger } from "../../src/log/log.js";
import { CHANNEL, eventually, type Harness, kickoffViaSlack, SIGNING_SECRET, startHarness, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { clickReview, pendingReview, resumeCalls, startRunViaSlack } from "../support/reviews.js";
import { signSlackBody, slackRequester } from "../support/slack-requests.js";

let h: Harness;
afterEach(async () => {
  vi.restoreAllMocks();
  await h?.close();
});

const PRIVATE = "C0PRIVATE";
const BOB = "U0BOB";
const MALLORY = "U0MALLORY";

const signed = (body: string, contentType: string) => h.requests.raw(body, { "Content-Type": contentType, ...signSlackBody(SIGNING_SECRET, body) });
const _form = (fields: Record<string, string>) => signed(new URLSearchParams(fields).toString(), "application/x-www-form-urlencoded");
const lastResponse = () => eventually(() => h.slack.callsTo("response_url").at(-1));

/**
 * A request sent as written (fetch resolves `/./` and `%2e` before sending) that declares `declared`
 * bytes but sends only `body`: a refusal that does not wait for the body comes at once; a server that
 * reads it never answers (status 0 after `waitMs`).
 */
function rawRequest(path: string, o: { method?: string; headers?: Record<string, string>; body?: string; declared?: number; waitMs?: number } = {}) {
  return new Promise<{ status: number; body: string }>((resolve) => {
    const body = o.body ?? "";
    const req = http.request(h.botUrl, {
      path,
      method: o.method ?? "POST",
      agent: false,
      headers: { "content-length": String(o.declared ?? Buffer.byteLength(body)), ...o.headers },
    });
    const done = (status: number, text = "") => {
      clearTimeout(timer);
      req.destroy();
      resolve({ status, body: text });
    };
    const timer = setTimeout(() => done(0), o.waitMs ?? 3000);
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (text += c));
      res.on("end", () => done(res.statusCode ?? 0, text));
    });
    req.on("error", () => done(-1));
    if (o.declared === undefined) req.end(body);
    else req.write(body);
  });
}

async function kickoffIn(channel: string, user: string, topic: string) {
  const before = await prismaOf(h.bot.database).execution.count();
  await kickoffViaSlack(h, { topic }, user, channel);
  return eventually(() =>
    prismaOf(h.bot.database)
      .execution.findFirst({ where: { channelId: channel, kickoffId: { not: null } }, orderBy: { createdAt: "desc" }, skip: 0 })
      .then((e) => (e && before >= 0 ? e : null)),
  );
}

describe("malformed signed Slack requests (3)", () => {
  it("answers 4xx without a stack trace, and the process keeps serving", async () => {
    const lines: string[] = [];
    h = await startHarness({ crewline: { log: createLogger("debug", (l) => lines.push(l)) } });
    const bodies: [string, string][] = [
      ["null", "application/json"],
      ["[]", "application/json"],
      ['"text"', "application/json"],
      ['{"type":"event_callback","event":null}', "application/json"],
      ['{"type":"event_callback","event":3}', "application/json"],
      ["payload=null", "application/x-www-form-urlencoded"],
      ["payload=3", "application/x-www-form-urlencoded"],
      [`payload=${encodeURIComponent('{"type":"block_actions","actions":[{"action_id":"crew_approve","value":"x"}]}')}`, "application/x-www-form-urlencoded"],
      [`payload=${encodeURIComponent('{"type":"block_actions","user":{"id":"U1"},"actions":null}')}`, "application/x-www-form-urlencoded"],
      [`payload=${encodeURIComponent('{"type":"block_actions","user":{"id":"U1"},"actions":7}')}`, "application/x-www-form-urlencoded"],
      [`payload=${encodeURIComponent('{"type":"view_submission","user":{"id":"U1"},"view":null}')}`, "application/x-www-form-urlencoded"],
      [`payload=${encodeURIComponent('{"type":"view_closed","user":null,"view":{"id":"V1"}}')}`, "application/x-www-form-urlencoded"],
      ["command=%2Fcrew&text=status", "application/x-www-form-urlencoded"],
      ["command=%2Fcrew&user_id=U1&channel_id=C1", "application/x-www-form-urlencoded"],
      ["{not json", "application/json"],
      ["[".repeat(5000) + "]".repeat(5000), "application/json"],
    ];
    for (const [body, type] of bodies) {
      const res = await signed(body, type);
      expect(res.status, body.slice(0, 80)).toBeGreaterThanOrEqual(400);
      expect(res.status, body.slice(0, 80)).toBeLessThan(500);
      expect(res.body).not.toMatch(/\bat .*\.(js|ts):\d+/);
    }
    expect(lines.join("\n")).not.toMatch(/\n\s+at /);
    expect((await fetch(`${h.botUrl}/healthz`)).status).toBe(200);
    await startRunViaSlack(h);
    expect(h.slack.calls.filter((c) => c.method === "chat.postMessage").length).toBeGreaterThan(0);
  });
});

describe("forged Slack requests are refused before their body is parsed", () => {
  it("answers 401 to a forged or unsigned request, however malformed its body; a signed malformed one gets 400", async () => {
    const lines: string[] = [];
    h = await startHarness({ crewline: { log: createLogger("debug", (l) => lines.push(l)) } });
    const malformed = `{"type":"event_callback","event":${"[".repeat(5000)}`;
    const big = `payload=${"%7B".repeat(300_000)}`;
    const stale = Math.floor(Date.now() / 1000) - 600;
    const attempts: [string, string, Record<string, string>][] = [
      [malformed, "application/json", signSlackBody("not-the-secret", malformed)],
      [malformed, "application/json", signSlackBody(SIGNING_SECRET, malformed, stale)],
      [malformed, "application/json", {}],
      [big, "application/x-www-form-urlencoded", signSlackBody("not-the-secret", big)],
      [big, "application/x-www-form-urlencoded", {}],
      ["command=%2Fcrew&text=status", "application/x-www-form-urlencoded", { "X-Slack-Signature": "v0=nothex", "X-Slack-Request-Timestamp": "1" }],
    ];
    for (const [body, type, headers] of attempts) {
      const res = await h.requests.raw(body, { "Content-Type": type, ...headers });
      expect(res.status, `${type} ${JSON.stringify(headers).slice(0, 60)}`).toBe(401);
    }
    // Signed, the same bodies reach the shape check (400); Slack's unsigned SSL check is still answered.
    expect((await signed(malformed, "application/json")).status).toBe(400);
    expect((await signed(big, "application/x-www-form-urlencoded")).status).toBe(400);
    expect((await h.requests.raw("ssl_check=1&token=x", { "Content-Type": "application/x-www-form-urlencoded" })).status).toBe(200);
    expect(lines.some((l) => l.includes("malformed Slack request refused"))).toBe(true);
    expect(lines.filter((l) => l.includes("malformed Slack request refused"))).toHaveLength(2);
    // Six forged requests, two reasons: one log line each (rate-limited), no secret in them.
    const refused = lines.filter((l) => l.includes("unsigned or forged Slack request refused"));
    expect(refused.map((l) => JSON.parse(l).reason).sort()).toEqual(["no valid signature headers", "signature mismatch"]);
    await startRunViaSlack(h);
  });
});

describe("paths Bolt resolves to /slack/events", () => {
  it("refuses /slack/./events, %2e, .. and absolute forms like /slack/events: 401 before the body, one sampled line", async () => {
    const lines: string[] = [];
    h = await startHarness({ crewline: { log: createLogger("debug", (l) => lines.push(l)) } });
    const paths = [
      "/slack/events",
      "/slack/./events",
      "/x/../slack/events",
      "/slack/%2e/events",
      "/slack/%2E%2e/slack/events",
      "http://evil/slack/events",
      "//evil/slack/events",
      "/slack\\events",
    ];
    const before = lines.length;
    // 3 MB declared (under Bolt's 4 MiB), none sent: only a refusal that does not read the body is answered.
    const answers = await Promise.all(paths.map((path) => rawRequest(path, { headers: { "content-type": "application/json" }, declared: 3_000_000 })));
    const canonical = answers[0]!;
    expect(canonical.status).toBe(401);
    for (const [i, a] of answers.entries()) expect({ path: paths[i], status: a.status, body: a.body }).toEqual({ path: paths[i], status: 401, body: canonical.body });
    // Same with signature headers that look valid: the body would be read, up to the guard's 1 MiB (413).
    const ts = String(Math.floor(Date.now() / 1000));
    const plausible = { "content-type": "application/json", "x-slack-signature": `v0=${"0".repeat(64)}`, "x-slack-request-timestamp": ts };
    for (const path of paths) expect((await rawRequest(path, { headers: plausible, declared: 2_000_000 })).status, path).toBe(413);
    // One line for all those refusals (sampled), none of Bolt's per-request warnings.
    const written = lines.slice(before).filter((l) => !l.includes('"level":"debug"'));
    expect(written.map((l) => JSON.parse(l).msg)).toEqual(["unsigned or forged Slack request refused"]);
    await startRunViaSlack(h);
  });
});

describe("paths nobody routes", () => {
  it("answers 404 to unknown paths with at most one sampled line and a bounded URL; HEAD /healthz as GET", async () => {
    const lines: string[] = [];
    h = await startHarness({ crewline: { log: createLogger("debug", (l) => lines.push(l)) } });
    const before = lines.length;
    const long = "a".repeat(10_000);
    for (let i = 0; i < 20; i++) {
      const res = await rawRequest(`/nope${i}/${long}?q=${i}`, { method: i % 2 ? "GET" : "POST" });
      expect(res.status).toBe(404);
    }
    const written = () => lines.slice(before).filter((l) => !l.includes('"level":"debug"'));
    // The first line of each method (GET, POST); the rest are counted in the next one.
    expect(written().length).toBeLessThanOrEqual(2);
    expect(written().join("\n")).not.toContain("a".repeat(1000));
    expect(lines.join("\n")).not.toContain(long);
    // A target Bolt cannot parse: 400, not 500 with an error line each.
    for (let i = 0; i < 5; i++) expect((await rawRequest("//[", { method: "GET" })).status).toBe(400);
    expect(written().length).toBeLessThanOrEqual(3);
    const head = await rawRequest("/healthz", { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.body).toBe("");
    expect((await rawRequest("/healthz", { method: "GET" })).status).toBe(200);
  });
});

describe("PUBLIC_URL with a path", () => {
  it("takes Slack's requests and crew callbacks under the path a proxy passed through, and logs a callback URL nobody routes without its secret", async () => {
    const lines: string[] = [];
    h = await startHarness({
      publicPath: "/crewline",
      crew: { tasks: [{ id: "t1", name: "draft", agent: "Writer", output: "The draft", delayMs: 20 }] },
      crewline: { log: createLogger("debug", (l) => lines.push(l)) },
    });
    // Slack's request URL is PUBLIC_URL/slack/events: the command and the form's submission go there.
    const run = await startRunViaSlack({ ...h, requests: slackRequester({ baseUrl: `${h.botUrl}/crewline`, signingSecret: SIGNING_SECRET }) });
    // Still guarded there: a forged request is refused before its body is read.
    expect((await rawRequest("/crewline/slack/events", { headers: { "content-type": "application/json" }, declared: 3_000_000 })).status).toBe(401);
    expect((await rawRequest("/crewline/healthz", { method: "GET" })).status).toBe(200);
    await eventually(async () => (await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: run.id } })).state === "completed", { what: "the run's end" });
    const deliveries = h.crew.webhookDeliveries;
    expect(deliveries.length).toBeGreaterThan(0);
    for (const d of deliveries)
      expect({ url: d.url, status: d.status }).toEqual({ url: expect.stringContaining(`${h.botUrl}/crewline/hooks/${run.id}/`), status: expect.any(Number) });
    expect(deliveries.filter((d) => d.status === 404)).toEqual([]);
    await eventually(() => h.slack.messages(CHANNEL).some((m) => JSON.stringify(m.blocks ?? []).includes("Completed")), { what: "the completion" });

    // Behind another path (a proxy that adds its own): not ours, and never logged with the secret.
    const before = lines.length;
    const secret = "S3cr3tCallbackSecretValue";
    expect((await rawRequest(`/elsewhere/hooks/${run.id}/task/${secret}`, { body: "{}" })).status).toBe(404);
    expect((await rawRequest(`/elsewhere/x?token=${secret}`, { method: "GET" })).status).toBe(404);
    const written = lines.slice(before).join("\n");
    expect(written).toContain("request to an unknown path");
    expect(written).toContain("/elsewhere/hooks/");
    expect(written).not.toContain(secret);
  });
});

describe("who may see a run (4)", () => {
  it("answers /crew status and /crew audit only to the channel's members, the starter and reviewers", async () => {
    h = await startHarness({ crew: { tasks: [{ id: "t1", name: "secret_task", agent: "Writer", humanInput: true, output: "TOP SECRET PLANS", delayMs: 20 }] } });
    const run = await kickoffIn(PRIVATE, USER, "private topic");
    await eventually(() => h.slack.messages(PRIVATE).some((m) => JSON.stringify(m.blocks ?? []).includes("TOP SECRET")));
    h.slack.setMembers(PRIVATE, ["U0CAROL", USER]);

    await h.requests.command({ text: `status ${run.kickoffId}`, user_id: BOB, channel_id: "C0ELSEWHERE" });
    const outsider = String((await lastResponse()).args.text);
    await h.requests.command({ text: "status no-such-run", user_id: BOB, channel_id: "C0ELSEWHERE" });
    const unknown = String((await eventually(() => h.slack.callsTo("response_url")[1])).args.text);
    expect(outsider).not.toContain("TOP SECRET");
    expect(outsider.replace(run.kickoffId!, "ID")).toBe(unknown.replace("no-such-run", "ID"));

    await h.requests.command({ text: `audit ${run.kickoffId}`, user_id: BOB, channel_id: "C0ELSEWHERE" });
    const audit = String((await eventually(() => h.slack.callsTo("response_url")[2])).args.text);
    expect(audit).toContain("I don't know a run");
    expect(h.slack.files).toHaveLength(0);

    await h.requests.command({ text: `status ${run.kickoffId}`, user_id: "U0CAROL", channel_id: "C0ELSEWHERE" });
    expect(String((await eventually(() => h.slack.callsTo("response_url")[3])).args.text)).toContain("TOP SECRET");
    await h.requests.command({ text: `status ${run.kickoffId}`, user_id: USER, channel_id: "C0ELSEWHERE" });
    expect(String((await eventually(() => h.slack.callsTo("response_url")[4])).args.text)).toContain("TOP SECRET");
  });
});

describe("a click decides the review its message shows (6)", () => {
  it("refuses a click whose button names another run's review, without /resume", async () => {
    h = await startHarness({ crew: { tasks: [{ id: "t1", name: "only_task", agent: "Writer", humanInput: true, output: "some output", delayMs: 20 }] } });
    const mine = await startRunViaSlack(h, "mine");
    const myReview = await pendingReview(h);
    await kickoffIn(PRIVATE, BOB, "theirs");
    const theirs = await eventually(() => prismaOf(h.bot.database).review.findFirst({ where: { execution: { channelId: PRIVATE }, messageTs: { not: null } } }));
    expect(theirs.executionId).not.toBe(mine.id);

    await clickReview(h, { ...myReview, reviewId: theirs.id }, true);
    const note = await eventually(() => h.slack.callsTo("chat.postEphemeral").at(-1));
    expect(note.args.user).toBe(USER);
    expect(String(note.args.text)).toMatch(/does not belong|nothing was sent/i);
    // Same review, but claimed from another message of the right channel.
    await h.requests.blockAction({
      user_id: BOB,
      channel_id: PRIVATE,
      message_ts: "1.000001",
      action: { action_id: APPROVE_ACTION, block_id: myReview.blockId, value: theirs.id },
    });
    await eventually(() => h.slack.callsTo("chat.postEphemeral").length === 2);
    await h.settled();
    expect(resumeCalls(h)).toHaveLength(0);
    expect((await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: theirs.id } })).state).toBe("pending");

    await clickReview(h, myReview, true);
    await eventually(() => resumeCalls(h).length === 1);
  });
});

describe("a kickoff form belongs to who opened it (7)", () => {
  async function openForm(user: string, channel: string) {
    const before = h.slack.callsTo("views.update").length;
    await h.requests.command({ text: "", user_id: user, channel_id: channel });
    const view = await eventually(() =>
      h.slack
        .callsTo("views.update")
        .slice(before)
        .map((c) => c.args.view as any)
        .find((v) => v?.submit),
    );
    const viewId = [...h.slack.views.values()].at(-1)!.id;
    const values: Record<string, any> = {};
    for (const block of view.blocks.filter((b: any) => b.type === "input")) {
      const name = inputNameFromBlockId(block.block_id, ["topic"]);
      values[block.block_id] = { value: { type: "plain_text_input", value: name ? "Forms" : "" } };
    }
    return { id: viewId, callback_id: view.callback_id, private_metadata: view.private_metadata, state: { values } };
  }

  it("refuses a form submitted by someone else, and starts one run per form whatever is replayed", async () => {
    h = await startHarness();
    const view = await openForm(USER, PRIVATE);
    const forged = await h.requests.viewSubmission({ user_id: MALLORY, view });
    expect(forged.status).toBe(200);
    await h.settled();
    expect(await prismaOf(h.bot.database).execution.count()).toBe(0);
    expect(h.crew.requests.filter((r) => r.path === "/kickoff")).toHaveLength(0);

    await h.requests.viewSubmission({ user_id: USER, view });
    await h.requests.viewSubmission({ user_id: USER, view });
    await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { kickoffId: { not: null } } }));
    await h.requests.viewSubmission({ user_id: USER, view });
    await h.settled();
    expect(await prismaOf(h.bot.database).execution.count()).toBe(1);
    expect(h.crew.requests.filter((r) => r.path === "/kickoff")).toHaveLength(1);
    expect((await prismaOf(h.bot.database).execution.findFirstOrThrow()).userId).toBe(USER);
  });
});

describe("a click while the database is down (9)", () => {
  it("tells the clicker the decision was not recorded; the review stays decidable; nothing reaches the crew", async () => {
    h = await startHarness();
    await startRunViaSlack(h);
    const review = await pendingReview(h);
    const outage = vi.spyOn(h.bot.lifecycle.reviews, "get").mockRejectedValue(new Error("Can't reach database server at 127.0.0.1:5432"));
    await clickReview(h, review, true);
    const note = await eventually(() => h.slack.callsTo("chat.postEphemeral").at(-1));
    expect(note.args.user).toBe(USER);
    expect(String(note.args.text)).toMatch(/not recorded/i);
    expect(String(note.args.text)).toMatch(/try again/i);
    expect(resumeCalls(h)).toHaveLength(0);
    outage.mockRestore();
    expect((await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state).toBe("pending");
    await clickReview(h, review, true);
    await eventually(() => resumeCalls(h).length === 1);
  });
});
