// How many Slack calls a review costs, in each order its two signals can arrive: the task webhook
// (the crew finished a task) and the human-input request (the crew waits on it). When the wait is
// known before the task message is posted, the review is posted with its controls in one call;
// when the task message is already in Slack, it gets its controls in place (post, then update).
// The webhooks are sent here by hand, in the order each test needs; the crew service's own run is
// kept busy with a slow task so that it sends none of its own.
import { afterEach, describe, expect, it } from "vitest";
import { APPROVE_ACTION, REJECT_ACTION } from "../../src/adapters/slack/blocks/index.js";
import type { Crewline } from "../../src/app.js";
import { TASK_MESSAGE_HOLD_MS } from "../../src/usecases/reviews.js";
import { CHANNEL, eventually, type Harness, kickoffViaSlack, moreReplicas, startHarness } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { pendingReview, startRunViaSlack } from "../support/reviews.js";

let h: Harness;
afterEach(async () => h?.close());

const OUTPUT = "# Findings\n\n- vents host chemosynthetic life\n- temperatures reach 400 °C";

type Run = Awaited<ReturnType<typeof startRunViaSlack>>;

async function start(outbox: { concurrency?: number } = {}): Promise<Run> {
  h = await startHarness({
    // One slow task: the crew service sends no webhook of its own while the test runs.
    crew: { tasks: [{ id: "t-draft", name: "draft", agent: "Writer", humanInput: true, delayMs: 120_000, steps: 0 }] },
    crewline: { outbox: { minBackoffMs: 100, maxBackoffMs: 1000, tickMs: 100, ...outbox } },
  });
  return startRunViaSlack(h);
}

/** A second run of the same crew, once the first one taught the bot that the crew waits on "draft". */
async function secondRun(first: Run): Promise<Run> {
  await pendingReview(h, { containing: "vents host" });
  await processed();
  await kickoffViaSlack(h, { topic: "Kelp forests" });
  return eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { kickoffId: { not: null }, id: { not: first.id } } }), { what: "the second kickoff" });
}

const SECOND = "# Kelp\n\n- kelp grows half a metre a day";
const secondTask = (run: Run, name = "draft", output = SECOND, botUrl?: string) => send(run, "task", { name, agent: "Writer", output, kickoff_id: run.kickoffId }, botUrl);
const secondInput = (run: Run, name = "draft", output = SECOND, botUrl?: string) =>
  send(run, "input", { execution_id: run.kickoffId, task_id: `t-${name}`, name, agent: "Writer", task_output: output }, botUrl);

/** The second run's review: one message, posted once with its controls, never updated. */
function expectSecondReviewInOneCall() {
  const { posts, updates, messages } = callsFor("half a metre");
  expect(messages).toBe(1);
  expect(posts).toHaveLength(1);
  expect(hasControls(posts[0]!.args)).toBe(true);
  expect(updates).toHaveLength(0);
}

/** Every successful post and update of the thread messages whose blocks contain `text`. */
function callsFor(text: string) {
  const posts = h.slack.callsTo("chat.postMessage").filter((c) => !c.error && c.args.thread_ts && JSON.stringify(c.args.blocks ?? []).includes(text));
  const ts = new Set(
    h.slack
      .messages(CHANNEL)
      .filter((m) => m.thread_ts && JSON.stringify(m.blocks ?? []).includes(text))
      .map((m) => m.ts),
  );
  const updates = h.slack.callsTo("chat.update").filter((c) => !c.error && ts.has(String(c.args.ts)));
  return { posts, updates, messages: ts.size };
}

function send(run: Run, kind: "task" | "input" | "crew", body: Record<string, unknown>, botUrl = h.botUrl) {
  return fetch(`${botUrl}/hooks/${run.id}/${kind}/${run.webhookSecret}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(kind === "input" ? { authorization: `Bearer ${run.humanInputToken}` } : {}) },
    body: JSON.stringify(body),
  }).then((r) => r.status);
}

const taskWebhook = (run: Run) => send(run, "task", { name: "draft", agent: "Writer", output: OUTPUT, kickoff_id: run.kickoffId });
const inputRequest = (run: Run) => send(run, "input", { execution_id: run.kickoffId, task_id: "t-draft", name: "draft", agent: "Writer", task_output: OUTPUT });

/** Every callback recorded so far has been processed. */
const processed = () => eventually(async () => (await prismaOf(h.bot.database).webhookEvent.count({ where: { processedAt: null } })) === 0, { what: "callbacks processed" });

/** The successful posts and updates of the draft's message (announcement and progress left out). */
function draftCalls() {
  const posts = h.slack.callsTo("chat.postMessage").filter((c) => !c.error && c.args.thread_ts && JSON.stringify(c.args.blocks ?? []).includes("draft"));
  const ts = h.slack.messages(CHANNEL).find((m) => m.thread_ts && JSON.stringify(m.blocks ?? []).includes("vents host"))?.ts;
  const updates = h.slack.callsTo("chat.update").filter((c) => !c.error && ts && c.args.ts === ts);
  return { posts, updates };
}

const hasControls = (args: Record<string, unknown>) => JSON.stringify(args.blocks ?? []).includes(APPROVE_ACTION) && JSON.stringify(args.blocks ?? []).includes(REJECT_ACTION);

/** Once the human-input request has been sent: the review is open, every callback processed, and the bot has nothing left to do (no stray update to come). */
async function callsOnceSettled() {
  await pendingReview(h, { containing: "vents host" });
  await processed();
  await h.settled({ crewRuns: false });
  return draftCalls();
}

/** The one post showed the review's controls, and nothing updated it. */
async function expectOnePostWithControls() {
  const { posts, updates } = await callsOnceSettled();
  expect(posts).toHaveLength(1);
  expect(hasControls(posts[0]!.args)).toBe(true);
  expect(updates).toHaveLength(0);
  expect(await prismaOf(h.bot.database).review.count()).toBe(1);
}

describe("Slack calls per review", { timeout: 240_000 }, () => {
  it("human-input request before the task webhook: one chat.postMessage with Approve/Reject, no chat.update", async () => {
    const run = await start();
    expect(await inputRequest(run)).toBe(202);
    const review = await pendingReview(h, { containing: "vents host" });
    // The task webhook for the same output comes after: it is the same review, and changes nothing in Slack.
    expect(await taskWebhook(run)).toBe(202);
    await expectOnePostWithControls();
    expect(await prismaOf(h.bot.database).review.findUnique({ where: { id: review.reviewId } })).toMatchObject({ state: "pending", shownState: "pending" });
  });

  it("task webhook first, its message already in Slack: posted as a task message, then updated with Approve/Reject", async () => {
    const run = await start();
    expect(await taskWebhook(run)).toBe(202);
    await eventually(() => prismaOf(h.bot.database).review.findFirst({ where: { executionId: run.id, messageTs: { not: null } } }), { what: "the task message posted" });
    expect(await inputRequest(run)).toBe(202);
    const { posts, updates } = await callsOnceSettled();
    expect(posts).toHaveLength(1);
    expect(hasControls(posts[0]!.args)).toBe(false);
    expect(updates).toHaveLength(1);
    expect(hasControls(updates[0]!.args)).toBe(true);
  });

  it("task webhook first, but the wait is known before its post is made (a backlog): one chat.postMessage with Approve/Reject, no chat.update", async () => {
    // One effect at a time, in the order enqueued: the post, then whatever the promotion asked for.
    const run = await start({ concurrency: 1 });
    // The outbox is behind: both signals are in before it gets to the task message's post.
    h.bot.outboxWorker.stop();
    expect(await taskWebhook(run)).toBe(202);
    expect(await inputRequest(run)).toBe(202);
    await processed();
    expect(draftCalls().posts).toHaveLength(0);
    h.bot.outboxWorker.start();
    await expectOnePostWithControls();
  });

  it("the crew waited on this task before: its task message is held, and the human-input request that follows posts the review with its controls in one call", async () => {
    const first = await start();
    // The first run teaches the bot that this crew waits on "draft".
    expect(await inputRequest(first)).toBe(202);
    const run = await secondRun(first);
    expect(await secondTask(run)).toBe(202);
    await processed();
    // Well within the hold: the task message is not in Slack yet. (A real wait: the hold is a timer, and
    // the bot is busy with it, so settled() would wait it out.)
    await new Promise((r) => setTimeout(r, 500));
    expect(callsFor("half a metre").posts).toHaveLength(0);
    const asked = Date.now();
    expect(await secondInput(run)).toBe(202);
    await pendingReview(h, { containing: "half a metre" });
    // Posted as soon as the crew said it waits, not when the hold ran out.
    expect(Date.now() - asked).toBeLessThan(TASK_MESSAGE_HOLD_MS - 500);
    await processed();
    await h.settled({ crewRuns: false });
    expectSecondReviewInOneCall();
  });

  it("a process that starts later (a restart, another replica) knows from the database which tasks the crew waited on: one call per review there too", async () => {
    const first = await start();
    // The first bot learns that this crew waits on "draft"; the second starts afterwards, on the same database.
    expect(await inputRequest(first)).toBe(202);
    await pendingReview(h, { containing: "vents host" });
    await processed();
    const later: Crewline[] = [];
    try {
      const [, laterUrl] = await moreReplicas(h, 1, { outbox: { minBackoffMs: 100, maxBackoffMs: 1000, tickMs: 100 } }, later);
      const run = await secondRun(first);
      // Its callbacks go to the process that started later.
      expect(await secondTask(run, "draft", SECOND, laterUrl)).toBe(202);
      await processed();
      expect(await secondInput(run, "draft", SECOND, laterUrl)).toBe(202);
      await pendingReview(h, { containing: "half a metre" });
      await processed();
      await h.settled({ crewRuns: false, also: later });
      expectSecondReviewInOneCall();
    } finally {
      for (const bot of later) await bot.stop();
    }
  });

  it("a held task message the crew does not wait on this time is posted when the hold ends, once, without controls", async () => {
    const first = await start();
    expect(await inputRequest(first)).toBe(202);
    const run = await secondRun(first);
    const sent = Date.now();
    expect(await secondTask(run)).toBe(202);
    const msg = await eventually(() => h.slack.messages(CHANNEL).find((m) => m.thread_ts && JSON.stringify(m.blocks ?? []).includes("half a metre")), {
      what: "the held task message",
      timeoutMs: TASK_MESSAGE_HOLD_MS + 5000,
    });
    expect(h.slack.timeOf(msg.ts)! - sent).toBeGreaterThanOrEqual(TASK_MESSAGE_HOLD_MS - 100);
    await h.settled({ crewRuns: false });
    const { posts, updates } = callsFor("half a metre");
    expect(posts).toHaveLength(1);
    expect(hasControls(posts[0]!.args)).toBe(false);
    expect(updates).toHaveLength(0);
  });

  it("a review that goes at once takes the held task messages before it in its thread along: the thread keeps its order", async () => {
    const first = await start();
    // The crew waits on both tasks, as far as the bot knows.
    expect(await inputRequest(first)).toBe(202);
    expect(await secondInput(first, "polish", "# Polished vents")).toBe(202);
    await pendingReview(h, { containing: "Polished vents" });
    const run = await secondRun(first);
    // Two task messages held in the second run's thread, then the crew waits on the second one.
    expect(await secondTask(run, "draft", "# Draft kelp")).toBe(202);
    await processed();
    expect(await secondTask(run, "polish", "# Polished kelp")).toBe(202);
    await processed();
    expect(await secondInput(run, "polish", "# Polished kelp")).toBe(202);
    await pendingReview(h, { containing: "Polished kelp" });
    const thread = h.slack
      .messages(CHANNEL)
      .filter((m) => m.thread_ts === h.slack.messages(CHANNEL).find((x) => JSON.stringify(x.blocks ?? []).includes("Polished kelp"))!.thread_ts);
    const draft = thread.findIndex((m) => JSON.stringify(m.blocks ?? []).includes("Draft kelp"));
    const polished = thread.findIndex((m) => JSON.stringify(m.blocks ?? []).includes("Polished kelp"));
    // The draft went first, without controls (the crew does not wait on it); the review in one post.
    expect(draft).toBeGreaterThanOrEqual(0);
    expect(draft).toBeLessThan(polished);
    expect(hasControls(callsFor("Draft kelp").posts[0]!.args)).toBe(false);
    expect(callsFor("Polished kelp").posts).toHaveLength(1);
    expect(callsFor("Polished kelp").updates).toHaveLength(0);
  });
});

describe("a run's last task and its end, sent back to back", () => {
  const crewEnd = (run: Run) => send(run, "crew", { kickoff_id: run.kickoffId, result: "final result" });
  const lastTask = (run: Run) => send(run, "task", { name: "polish", agent: "Writer", output: "LAST TASK OUTPUT", kickoff_id: run.kickoffId });
  const lastTaskShown = () => h.slack.messages(CHANNEL).some((m) => m.thread_ts && JSON.stringify(m.blocks ?? []).includes("LAST TASK OUTPUT"));

  it("the task is shown, not dropped by the run's end, even while its processing is slower than the end's", async () => {
    const run = await start();
    // The task's processing takes a while (a slow database); the end's does not.
    const open = h.bot.lifecycle.reviews.open.bind(h.bot.lifecycle.reviews);
    h.bot.lifecycle.reviews.open = async (...args) => {
      await new Promise((r) => setTimeout(r, 300));
      return open(...args);
    };
    expect(await lastTask(run)).toBe(202);
    expect(await crewEnd(run)).toBe(202);
    await eventually(async () => (await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: run.id } })).state === "completed", { what: "the run's end" });
    await processed();
    await h.settled({ crewRuns: false });
    expect(lastTaskShown()).toBe(true);
  });

  it("a task whose processing failed once is applied when the end comes, not dropped by the ended run", async () => {
    const run = await start();
    const open = h.bot.lifecycle.reviews.open.bind(h.bot.lifecycle.reviews);
    let failures = 1;
    h.bot.lifecycle.reviews.open = async (...args) => {
      if (failures-- > 0) throw new Error("connection lost");
      return open(...args);
    };
    expect(await lastTask(run)).toBe(202);
    await eventually(async () => (await prismaOf(h.bot.database).webhookEvent.findFirst({ where: { kind: "task", attempts: 1, processedAt: null } })) ?? undefined, {
      what: "the task's failed attempt",
    });
    expect(await crewEnd(run)).toBe(202);
    await eventually(async () => (await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: run.id } })).state === "completed", { what: "the run's end" });
    await processed();
    await h.settled({ crewRuns: false });
    expect(lastTaskShown()).toBe(true);
  });
});
