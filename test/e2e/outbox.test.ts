// The outbox under Slack failures: every review, file and notice reaches Slack exactly once, a failed
// step retries that step only, a lost update is retried until the message shows the final state, and
// neither a crash nor an interrupted post shows anything twice.
import { afterEach, describe, expect, it } from "vitest";
import { APPROVE_ACTION } from "../../src/adapters/slack/blocks/index.js";
import { type Crewline, createCrewline } from "../../src/app.js";
import { silentLogger } from "../../src/log/log.js";
import type { FakeMessage } from "../support/fake-slack.js";
import { CHANNEL, eventually, freePort, type Harness, kickoffViaSlack, moreReplicas, startHarness } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { clickReview, pendingReview, resumeCalls, startRunViaSlack } from "../support/reviews.js";
import { usePostgres } from "../support/test-database.js";

let h: Harness;
const extra: Crewline[] = [];
afterEach(async () => {
  for (const bot of extra.splice(0)) await bot.stop().catch(() => {});
  await h?.close();
});

/** Fast backoff, so a test sees several retries in a few seconds. */
const FAST = { minBackoffMs: 100, maxBackoffMs: 1000, tickMs: 100 };

const LONG = Array.from({ length: 300 }, (_, i) => `Paragraph ${i}: ${"the tide rises and falls ".repeat(8)}`).join("\n\n");

/** Messages in the run's thread that show this task (a task message or a review), whatever their state. */
const taskMessages = (h: Harness, task: string): FakeMessage[] =>
  h.slack
    .messages(CHANNEL)
    .filter((m) => m.thread_ts && /^(✔️ Task finished|📝 Review needed|No decision needed|Approved|Rejected): /.test(m.text ?? "") && (m.text ?? "").includes(task));
const notices = (h: Harness) => h.slack.messages(CHANNEL).filter((m) => !m.thread_ts && /Crew .* (finished|failed)/.test(m.text ?? ""));
const effectsDue = (h: Harness) => prismaOf(h.bot.database).slackEffect.count({ where: { state: { not: "done" } } });

describe("outbox", () => {
  it("retries a failed file upload alone: one review message, its file attached on the retry", async () => {
    h = await startHarness({
      crew: { tasks: [{ id: "t1", name: "long_report", agent: "A", humanInput: true, delayMs: 10, output: LONG }] },
      crewline: { outbox: FAST },
    });
    h.slack.failNext("files.completeUploadExternal", "internal_error");
    await startRunViaSlack(h);
    const review = await pendingReview(h);
    const file = await eventually(() => h.slack.files.find((f) => f.content === LONG), { what: "the file, on the second try" });
    expect(file.content).toBe(LONG);
    expect(h.slack.callsTo("files.completeUploadExternal").filter((c) => c.error)).toHaveLength(1);
    expect(taskMessages(h, "long_report")).toHaveLength(1);
    expect(h.slack.files.filter((f) => f.content === LONG)).toHaveLength(1);
    await eventually(() => prismaOf(h.bot.database).review.findFirst({ where: { id: review.reviewId, fileAttached: true, messageTs: review.msg.ts } }), {
      what: "the attachment recorded",
    });
  });

  it("retries a failed update until the decided review shows its final state (no live buttons left)", async () => {
    h = await startHarness({ crewline: { outbox: FAST } });
    await startRunViaSlack(h);
    const review = await pendingReview(h);
    h.slack.failNext("chat.update", "message_not_found", 2);
    await clickReview(h, review, false, "Cite primary sources");
    await eventually(() => resumeCalls(h).length === 1);
    const shown = await eventually(
      () => {
        const msg = h.slack.messages(CHANNEL).find((m) => m.ts === review.msg.ts)!;
        const text = JSON.stringify(msg.blocks);
        return !text.includes(APPROVE_ACTION) && /Rejected/.test(text) ? text : undefined;
      },
      { what: "the rejected review, after two failed updates" },
    );
    expect(shown).toContain("Cite primary sources");
    // (The failures may also have hit another message's update, such as the progress message: each is retried alike.)
    expect(h.slack.callsTo("chat.update").filter((c) => c.error === "message_not_found")).toHaveLength(2);
    await eventually(() => prismaOf(h.bot.database).review.findFirst({ where: { id: review.reviewId, state: "rejected", shownState: "rejected" } }), {
      what: "the shown state recorded",
    });
  });

  it("posts a review stored just before a crash once, after the restart", async () => {
    h = await startHarness({ crew: { tasks: [{ id: "t1", name: "draft", agent: "A", humanInput: true, delayMs: 10 }] }, crewline: { outbox: FAST } });
    // The bot dies between storing the review and posting it: its outbox worker never gets there.
    h.bot.outboxWorker.stop();
    const execution = await startRunViaSlack(h);
    await eventually(() => prismaOf(h.bot.database).review.findFirst({ where: { executionId: execution.id, state: "pending" } }), { what: "the stored review" });
    expect(taskMessages(h, "draft")).toHaveLength(0);

    // The restarted bot (same database, same Slack) finds the post due.
    const port = await freePort();
    const restarted = createCrewline(
      { ...h.config, port, publicUrl: `http://127.0.0.1:${port}` },
      { log: silentLogger, database: h.db.database, outbox: FAST, slackRetries: { retries: 0 } },
    );
    extra.push(restarted);
    await restarted.start();
    await eventually(() => taskMessages(h, "draft").length === 1, { what: "the review, posted after the restart" });
    await h.settled({ also: extra });
    expect(taskMessages(h, "draft")).toHaveLength(1);
  });

  it("finds a post whose answer was lost (its call gave up before Slack answered) instead of posting it again, whichever replica retries", async () => {
    h = await startHarness({
      crew: { tasks: [{ id: "t1", name: "draft", agent: "A", humanInput: true, delayMs: 3000, steps: 0 }] },
      crewline: { outbox: { ...FAST, leaseMs: 800 } },
    });
    const execution = await startRunViaSlack(h);
    // Slack takes the review post (the task takes 3 s: the post comes after this) but answers only after
    // the call gave up (1 s with this short lease, lengthened to hold the calls: effectCallTimeout); either worker may retry it.
    h.slack.answerLateNext("chat.postMessage", 2500);
    const second = createCrewline(
      { ...h.config, port: await freePort() },
      { log: silentLogger, database: h.db.database, outbox: { ...FAST, leaseMs: 800 }, slackRetries: { retries: 0 } },
    );
    extra.push(second);
    await second.start();
    const review = await eventually(() => prismaOf(h.bot.database).review.findFirst({ where: { executionId: execution.id, messageTs: { not: null } } }), {
      what: "the review's ts, recorded by whichever worker",
    });
    // Both workers idle and nothing left due: the late answer has come, and any second post would have.
    await h.settled({ also: extra });
    expect(taskMessages(h, "draft")).toHaveLength(1);
    expect(review.messageTs).toBe(taskMessages(h, "draft")[0]!.ts);
    // The retrying worker looked for the message by its effect id before posting.
    expect(h.slack.callsTo("conversations.replies").length).toBeGreaterThan(0);
    // Whichever worker recorded it, the one message ends showing the review as it is now (waiting
    // for a person: its buttons). src/outbox/perform.test.ts checks a found message is brought up to date.
    await eventually(() => JSON.stringify(taskMessages(h, "draft")[0]!.blocks).includes(APPROVE_ACTION), { what: "the review's buttons" });
  });

  for (const [fault, failLookup] of [
    ["rate limited", (h: Harness) => h.slack.rateLimitNext("conversations.replies", 1, 1)],
    ["internal_error", (h: Harness) => h.slack.failNext("conversations.replies", "internal_error")],
  ] as const)
    it(`posts a review whose answer was lost once, when the look-up for it fails first (${fault})`, async () => {
      h = await startHarness({
        crew: { tasks: [{ id: "t1", name: "draft", agent: "A", humanInput: true, delayMs: 3000, steps: 0 }] },
        // A short lease: Slack calls of the outbox give up after 1 s (effectCallTimeout).
        crewline: { outbox: { ...FAST, leaseMs: 800 } },
      });
      const execution = await startRunViaSlack(h);
      // Slack takes the review's post but answers after the call gave up; the look-up that follows fails once.
      h.slack.answerLateNext("chat.postMessage", 2500);
      failLookup(h);
      const review = await eventually(() => prismaOf(h.bot.database).review.findFirst({ where: { executionId: execution.id, messageTs: { not: null } } }), {
        what: "the review's ts",
      });
      await h.settled();
      expect(taskMessages(h, "draft")).toHaveLength(1);
      expect(review.messageTs).toBe(taskMessages(h, "draft")[0]!.ts);
      // The failed look-up was retried until it answered, rather than taken for "not there".
      expect(h.slack.callsTo("conversations.replies").map((c) => c.error ?? "ok")).toEqual([fault === "rate limited" ? "ratelimited" : fault, "ok"]);
    });

  it("a 429 on the look-up for a lost post pauses that look-up alone: another run's review in the workspace is posted meanwhile", async () => {
    h = await startHarness({
      crew: { tasks: [{ id: "t1", name: "draft", agent: "A", humanInput: true, delayMs: 3000, steps: 0 }] },
      crewline: { outbox: { ...FAST, leaseMs: 800 } },
    });
    const first = await startRunViaSlack(h);
    // Slack takes the first run's review but answers after the call gave up; the look-up that follows gets a 429 for 30 s.
    h.slack.answerLateNext("chat.postMessage", 2500);
    h.slack.rateLimitNext("conversations.replies", 1, 30);
    await eventually(() => h.slack.callsTo("conversations.replies").some((c) => c.error === "ratelimited"), { what: "the look-up refused", timeoutMs: 15_000 });
    // Given Slack's Retry-After for conversations.replies, the workspace's posts go on.
    await kickoffViaSlack(h, { topic: "Kelp forests" });
    const posted = await eventually(() => prismaOf(h.bot.database).review.findFirst({ where: { executionId: { not: first.id }, messageTs: { not: null } } }), {
      what: "the second run's review, posted",
      timeoutMs: 12_000,
    });
    expect(taskMessages(h, "draft").filter((m) => m.ts === posted.messageTs)).toHaveLength(1);
    // The first run's look-up waits out its Retry-After: not tried again yet, its review not recorded.
    expect(h.slack.callsTo("conversations.replies")).toHaveLength(1);
    expect(await prismaOf(h.bot.database).review.findFirst({ where: { executionId: first.id, messageTs: { not: null } } })).toBeNull();
  }, 40_000);

  // Slack's outage and the outbox's backoff are both a tenth of production's (60 s down, backoff 0.5 s doubling
  // to 5 s): the same retries, spaced alike, in seconds rather than a minute.
  it("after a Slack outage lasting many maximum backoffs, every review and notice is in Slack once", async () => {
    const OUTAGE_MS = 6000;
    h = await startHarness({
      crew: {
        tasks: [
          { id: "t1", name: "research", agent: "A", humanInput: true, delayMs: 10 },
          { id: "t2", name: "write", agent: "B", humanInput: true, delayMs: 10 },
        ],
      },
      crewline: { outbox: { minBackoffMs: 50, maxBackoffMs: 500, tickMs: 20 } },
    });
    await startRunViaSlack(h);
    const first = await pendingReview(h, { containing: "research" });
    h.slack.outage(OUTAGE_MS);
    const outageEnds = Date.now() + OUTAGE_MS;
    // Decided during the outage: the crew hears it; Slack hears nothing until it is back.
    await clickReview(h, first, true, "");
    await eventually(() => resumeCalls(h).length === 1);
    await eventually(async () => (await prismaOf(h.bot.database).review.count({ where: { taskName: "write", state: "pending" } })) === 1, { what: "the second review, stored" });
    expect(taskMessages(h, "write")).toHaveLength(0);
    // Posted once Slack is back, the outbox having kept retrying through the outage.
    const second = await pendingReview(h, { containing: "write", timeoutMs: 20_000 });
    expect(Date.now()).toBeGreaterThanOrEqual(outageEnds);
    expect(h.slack.calls.filter((c) => c.error === "service_unavailable").length).toBeGreaterThan(3);
    await clickReview(h, second, true, "");
    await eventually(() => notices(h).length === 1, { what: "the completion notice", timeoutMs: 20_000 });
    await eventually(async () => (await effectsDue(h)) === 0, { what: "every effect done", timeoutMs: 20_000 });
    expect(taskMessages(h, "research")).toHaveLength(1);
    expect(taskMessages(h, "write")).toHaveLength(1);
    expect(notices(h)).toHaveLength(1);
    // The first review shows its decision although its update was due during the outage.
    expect(JSON.stringify(h.slack.messages(CHANNEL).find((m) => m.ts === first.msg.ts)!.blocks)).toMatch(/Approved/);
  }, 60_000);
});

describe.runIf(usePostgres)("outbox with three replicas", () => {
  it("gives one run one progress message whichever replicas receive its steps", async () => {
    h = await startHarness({
      crew: { tasks: [{ id: "t1", name: "t", agent: "A", humanInput: true, delayMs: 10, steps: 0 }] },
      crewline: { outbox: FAST, progressIntervalMs: 200 },
    });
    // Progress as one updated message: the form where Slack refuses streaming (test/e2e/live-plan.test.ts has the plan).
    h.slack.refuseStreaming("T0TEAM");
    const execution = await startRunViaSlack(h);
    await pendingReview(h);
    const replicas = await moreReplicas(h, 2, { outbox: FAST, progressIntervalMs: 200 }, extra);
    const stepUrl = (base: string) => `${base}/hooks/${execution.id}/step/${execution.webhookSecret}`;
    const started = Date.now();
    for (let i = 1; i <= 60; i++) {
      const answer = await fetch(stepUrl(replicas[i % 3]!), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ execution_id: execution.kickoffId, agent: "A", thought: `step ${i} of 60`, output: "" }),
      });
      expect(answer.status).toBe(202);
      // A crew's pace (updates are spaced in time): not a wait for something to happen.
      await new Promise((r) => setTimeout(r, 25));
    }
    const progress = () => h.slack.messages(CHANNEL).filter((m) => m.thread_ts && /step \d+ of 60/.test(JSON.stringify(m.blocks ?? []) + (m.text ?? "")));
    await eventually(() => /step 60 of 60/.test(JSON.stringify(progress()[0]?.blocks ?? [])), { what: "the progress message showing the last step", timeoutMs: 15_000 });
    expect(progress()).toHaveLength(1);
    const updates = h.slack.callsTo("chat.update").filter((c) => c.args.ts === progress()[0]!.ts);
    // About one update a second across all replicas (the outbox spaces them), not one per replica per second.
    const seconds = (Date.now() - started) / 1000;
    expect(updates.length).toBeLessThanOrEqual(Math.ceil(seconds) + 2);
  });
});
