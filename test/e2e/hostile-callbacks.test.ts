// Hostile crew callbacks on a run's real URLs (issue #11, items 1, 2, 5, 8): bounded JSON, text any
// characters, every method and path shape, callbacks that name another run.
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../../src/log/log.js";
import { CHANNEL, eventually, type Harness, kickoffViaSlack, startHarness } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { clickReview, pendingReview, resumeCalls, startRunViaSlack, threadMessage } from "../support/reviews.js";

let h: Harness;
afterEach(async () => h?.close());

const post = (path: string, body: string, method = "POST") =>
  fetch(`${h.botUrl}${path}`, { method, body: method === "GET" || method === "HEAD" ? undefined : body, headers: { "content-type": "application/json" } }).then(async (r) => ({
    status: r.status,
    text: await r.text(),
  }));
const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);
const oneTask = (output: string) => [{ id: "t1", name: "only_task", agent: "Writer", humanInput: true, output, delayMs: 20 }];

describe("hostile crew callbacks", () => {
  it("1. refuses deeply nested or huge-count bodies with 400, and the database keeps working", async () => {
    h = await startHarness({ crew: { tasks: oneTask("fine output") } });
    const execution = await startRunViaSlack(h);
    await pendingReview(h);
    const url = `/hooks/${execution.id}/task/${execution.webhookSecret}`;
    for (const depth of [1_200, 5_000, 100_000]) {
      const res = await post(url, `{"task_id":"deep","name":"deep","output":"x","extra":${nested(depth)}}`);
      expect(res.status).toBe(400);
    }
    expect((await post(url, `{"task_id":"wide","output":"x","list":[${"1,".repeat(200_000)}1]}`)).status).toBe(400);
    expect(await prismaOf(h.bot.database).webhookEvent.count({ where: { payload: { path: ["task_id"], equals: "deep" } } })).toBe(0);
    // Normal work goes on: a genuine callback becomes a review, and the health check answers.
    expect((await post(url, JSON.stringify({ task_id: "t2", name: "second_task", output: "still alive", kickoff_id: execution.kickoffId }))).status).toBe(202);
    await threadMessage(h, "still alive");
    expect((await fetch(`${h.botUrl}/healthz`)).status).toBe(200);
  });

  it("2. stores and shows a NUL and a lone surrogate in crew output (webhook), replaced visibly", async () => {
    h = await startHarness({ crew: { tasks: oneTask("before\u0000after \ud800 end") } });
    const execution = await startRunViaSlack(h);
    const review = await pendingReview(h, { containing: "before" });
    expect(JSON.stringify(review.msg.blocks)).toContain("before\u2400after \ufffd end");
    const stored = await prismaOf(h.bot.database).review.findFirstOrThrow({ where: { executionId: execution.id } });
    expect(stored.output).toBe("before\u2400after \ufffd end");
    // A lone surrogate in an otherwise valid body is accepted too.
    const res = await post(
      `/hooks/${execution.id}/task/${execution.webhookSecret}`,
      `{"task_id":"t9","name":"odd","output":"x\\udc00y\\u0000z","kickoff_id":"${execution.kickoffId}"}`,
    );
    expect(res.status).toBe(202);
    await threadMessage(h, "x\ufffdy\u2400z");
  });

  it("2. a NUL in a status answer does not stop polling: the review comes from status", async () => {
    h = await startHarness({
      webhooks: false,
      crew: { tasks: oneTask("polled\u0000output") },
      crewline: { watcher: { tickMs: 25, minBackoffMs: 50, maxBackoffMs: 200, leaseMs: 5000 } },
    });
    await startRunViaSlack(h);
    const review = await pendingReview(h, { containing: "polled", timeoutMs: 15_000 });
    expect(JSON.stringify(review.msg.blocks)).toContain("polled\u2400output");
  });

  it("2. a task named by an 8,000-character description (CrewAI names an unnamed task so) gets its review, decidable, with its name cut", async () => {
    // Words that do not repeat (an index row of repeated text compresses under PostgreSQL's limit).
    const description = `Research the deep sea vents: ${Array.from({ length: 1_800 }, (_, i) => ((i * 7_919) % 100_003).toString(36)).join(" ")}`;
    expect(description.length).toBeGreaterThan(8_000);
    h = await startHarness({ crew: { tasks: [{ id: "t1", name: description, agent: "Writer", humanInput: true, output: "vent report", delayMs: 20 }] } });
    const execution = await startRunViaSlack(h);
    // Its webhook names it, its human-input request names it and its id: both name one review.
    const review = await pendingReview(h, { containing: "vent report" });
    const stored = await prismaOf(h.bot.database).review.findMany({ where: { executionId: execution.id } });
    expect(stored).toHaveLength(1);
    expect(stored[0]!.taskName.length).toBeLessThanOrEqual(200);
    expect(stored[0]!.taskName.startsWith("Research the deep sea vents")).toBe(true);
    expect(await prismaOf(h.bot.database).webhookEvent.count({ where: { executionId: execution.id, processedAt: null } })).toBe(0);
    await clickReview(h, review, true);
    const resumed = await eventually(() => resumeCalls(h)[0], { what: "the approval at the crew" });
    expect(resumed.body).toMatchObject({ task_id: "t1", is_approve: true });
  });

  it("2b. a task whose id is its 8,000-character name (a crew that knows tasks by name) is resumed by its whole name", async () => {
    const description = `Summarise the vents: ${Array.from({ length: 1_800 }, (_, i) => ((i * 7_919) % 100_003).toString(36)).join(" ")}`;
    h = await startHarness({ crew: { tasks: [{ id: description, name: description, agent: "Writer", humanInput: true, output: "vent summary", delayMs: 20 }] } });
    const execution = await startRunViaSlack(h);
    const review = await pendingReview(h, { containing: "vent summary" });
    await clickReview(h, review, true);
    const resumed = await eventually(() => resumeCalls(h)[0], { what: "the approval at the crew" });
    expect(resumed.body).toMatchObject({ task_id: description, is_approve: true });
    // The crew took it: the review is approved and the run goes on to its end.
    await eventually(async () => (await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } })).state === "completed", {
      what: "the run completed",
    });
    expect((await prismaOf(h.bot.database).review.findFirstOrThrow({ where: { executionId: execution.id } })).state).toBe("approved");
  });

  it("5. every method and path shape under /hooks/ is answered by the callback handler, no secret logged", async () => {
    const lines: string[] = [];
    h = await startHarness({ crew: { tasks: oneTask("out") }, crewline: { log: createLogger("debug", (l) => lines.push(l)) } });
    const execution = await startRunViaSlack(h);
    await pendingReview(h);
    const s = execution.webhookSecret;
    const paths = [
      `/hooks/${execution.id}/TASK/${s}`,
      `//hooks//${execution.id}/task/${s}`,
      `/hooks/${execution.id}//task/${s}`,
      `/HOOKS/${execution.id}/task/${s}`,
      `/hooks/${execution.id}/task/${s}%E0%A4%A`,
      `/hooks/%ZZ/task/${s}`,
      `/hooks/${execution.id}/task/${s}`,
    ];
    for (const path of paths) {
      for (const method of ["GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"]) {
        const res = await post(path, "{}", method);
        expect(res.status, `${method} ${path}`).toBeLessThan(500);
        expect(res.status, `${method} ${path}`).toBeGreaterThanOrEqual(400);
        if (path.startsWith("/hooks/") && !path.startsWith("/hooks/%")) expect(res.status, `${method} ${path}`).toBe(405);
      }
      const posted = await post(path, JSON.stringify({ task_id: "q", output: "q" }));
      expect(posted.status, `POST ${path}`).toBeLessThan(500);
    }
    const log = lines.join("\n");
    expect(log).not.toContain(s);
  });

  it("8. a callback naming another run is refused with no effect; one naming none is fine", async () => {
    const lines: string[] = [];
    h = await startHarness({ crew: { tasks: oneTask("first run output") }, crewline: { log: createLogger("debug", (l) => lines.push(l)) } });
    const first = await startRunViaSlack(h, "first");
    await pendingReview(h, { containing: "first run" });
    await kickoffViaSlack(h, { topic: "second" });
    const second = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { kickoffId: { not: null }, id: { not: first.id } } }));
    await eventually(() => h.slack.messages(CHANNEL).filter((m) => JSON.stringify(m.blocks ?? []).includes("first run output")).length === 2);
    const url = `/hooks/${second.id}/task/${second.webhookSecret}`;
    const crewUrl = `/hooks/${second.id}/crew/${second.webhookSecret}`;
    expect((await post(url, JSON.stringify({ task_id: "x", name: "forged", output: "cross-run", kickoff_id: first.kickoffId }))).status).toBe(409);
    expect((await post(url, JSON.stringify({ task_id: "x", name: "forged", output: "cross-run", execution_id: "someone-else" }))).status).toBe(409);
    expect((await post(crewUrl, JSON.stringify({ kickoff_id: "00000000-dead-beef-0000-000000000000", result: "hijacked" }))).status).toBe(409);
    expect((await post(url, JSON.stringify({ task_id: "y", name: "anonymous", output: "no id named" }))).status).toBe(202);
    await threadMessage(h, "no id named");
    await h.settled();
    expect(h.slack.calls.filter((c) => /cross-run|hijacked/.test(JSON.stringify(c.args)))).toHaveLength(0);
    expect(await prismaOf(h.bot.database).review.count({ where: { taskName: "forged" } })).toBe(0);
    expect((await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: second.id } })).state).not.toBe("completed");
    expect(lines.some((l) => l.includes("callback names another run"))).toBe(true);
    expect(lines.join("\n")).not.toContain(second.webhookSecret);
  });

  it("12. a forged callback is answered from its URL alone: a malformed 2 MiB body gets 401 or 404, never parsed (400)", async () => {
    h = await startHarness({ crew: { tasks: oneTask("out") } });
    const execution = await startRunViaSlack(h);
    await pendingReview(h);
    const s = execution.webhookSecret;
    // Unparseable (and too deep to parse): a parser would answer 400; only the authenticated get that far.
    const malformed = `{"task_id":"forged","output":"${"x".repeat(2 * 1024 * 1024 - 2000)}",${"[".repeat(1000)}`;
    const huge = "y".repeat(3 * 1024 * 1024);
    const forged = [
      [`/hooks/${execution.id}/task/wrong-secret`, 401],
      [`/hooks/${execution.id}/crew/${s.slice(0, -1)}x`, 401],
      [`/hooks/00000000-0000-4000-8000-000000000000/task/${s}`, 404],
      [`/hooks/${execution.id}/bogus/${s}`, 404],
      // input and events need the bearer token too.
      [`/hooks/${execution.id}/input/${s}`, 401],
      [`/hooks/${execution.id}/events/${s}`, 401],
    ] as const;
    for (const [path, status] of forged) {
      expect((await post(path, malformed)).status, path).toBe(status);
      expect((await post(path, huge)).status, `${path} (3 MiB)`).toBe(status);
    }
    // The authenticated get the body's own answers.
    expect((await post(`/hooks/${execution.id}/task/${s}`, malformed)).status).toBe(400);
    expect((await post(`/hooks/${execution.id}/task/${s}`, huge)).status).toBe(413);
    expect(await prismaOf(h.bot.database).webhookEvent.count({ where: { payload: { path: ["task_id"], equals: "forged" } } })).toBe(0);
    expect((await fetch(`${h.botUrl}/healthz`)).status).toBe(200);
  });

  it("13. every callback for a run that has ended gets 410 and stores nothing, a repeat of the crew callback included", async () => {
    h = await startHarness({ crew: { tasks: [{ id: "t1", name: "only_task", agent: "Writer", humanInput: false, output: "done", delayMs: 10 }] } });
    await kickoffViaSlack(h, { topic: "ended" });
    const execution = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { state: "completed" } }), { what: "the run to complete" });
    await eventually(() => h.slack.messages(CHANNEL).some((m) => /finished/.test(m.text ?? "")), { what: "the completion notice" });
    await eventually(async () => (await prismaOf(h.bot.database).slackEffect.count({ where: { state: "due" } })) === 0, { what: "the outbox to settle" });
    const stored = await prismaOf(h.bot.database).webhookEvent.count();
    const slackCalls = h.slack.calls.length;
    const base = `${h.botUrl}/hooks/${execution.id}`;
    const bearer = { authorization: `Bearer ${execution.humanInputToken}` };
    const late: [string, unknown, Record<string, string>][] = [
      ["step", { kickoff_id: execution.kickoffId, thought: "late step" }, {}],
      ["task", { kickoff_id: execution.kickoffId, name: "late_task", output: "late output" }, {}],
      ["input", { kickoff_id: execution.kickoffId, task_id: "t9", output: "late input" }, bearer],
      ["events", { events: [{ id: "e-late", type: "task_completed", timestamp: new Date().toISOString(), data: { output: "late event" } }] }, bearer],
      ["crew", { kickoff_id: execution.kickoffId, result: "done" }, {}],
      ["crew", { kickoff_id: execution.kickoffId, result: "a different ending" }, {}],
    ];
    for (const [kind, body, headers] of late) {
      const res = await fetch(`${base}/${kind}/${execution.webhookSecret}`, {
        method: "POST",
        body: JSON.stringify(body),
        headers: { "content-type": "application/json", ...headers },
      });
      expect(res.status, kind).toBe(410);
      expect(await res.json()).toEqual({ error: expect.stringMatching(/run has ended/) });
    }
    // The secret still decides first: a wrong one is 401, ended run or not.
    expect((await post(`/hooks/${execution.id}/task/wrong`, "{}")).status).toBe(401);
    await h.settled();
    expect(await prismaOf(h.bot.database).webhookEvent.count()).toBe(stored);
    expect(h.slack.calls.length).toBe(slackCalls);
    expect((await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } })).output).not.toBe("a different ending");
  });

  it("14. a run ended elsewhere (another replica, its cached row still live here) gets 410 for every callback that would be stored, and nothing is", async () => {
    h = await startHarness({ crew: { tasks: oneTask("waiting here") } });
    const execution = await startRunViaSlack(h);
    await pendingReview(h);
    await h.settled();
    const base = `${h.botUrl}/hooks/${execution.id}`;
    const send = (kind: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${base}/${kind}/${execution.webhookSecret}`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json", ...headers } });
    // A step caches the run's row here while it is live.
    expect((await send("step", { kickoff_id: execution.kickoffId, thought: "still going" })).status).toBe(202);
    // Another replica ends the run: this one's cached row does not know.
    await prismaOf(h.bot.database).execution.update({ where: { id: execution.id }, data: { state: "completed", finishedAt: new Date() } });
    const stored = await prismaOf(h.bot.database).webhookEvent.count();
    const bearer = { authorization: `Bearer ${execution.humanInputToken}` };
    const late: [string, unknown, Record<string, string>][] = [
      ["task", { kickoff_id: execution.kickoffId, name: "late_task", output: "late output" }, {}],
      ["input", { kickoff_id: execution.kickoffId, task_id: "t9", output: "late input" }, bearer],
      ["events", { events: [{ id: "e-late-2", type: "task_completed", timestamp: new Date().toISOString(), data: { output: "late event" } }] }, bearer],
      ["crew", { kickoff_id: execution.kickoffId, result: "a different ending" }, {}],
    ];
    for (const [kind, body, headers] of late) expect((await send(kind, body, headers)).status, kind).toBe(410);
    await h.settled();
    expect(await prismaOf(h.bot.database).webhookEvent.count()).toBe(stored);
  });
});
