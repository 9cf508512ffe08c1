// How many Slack calls a review costs, in each order its two signals can arrive: the task webhook
// (the crew finished a task) and the human-input request (the crew waits on it). When the wait is
// known before the task message is posted, the review is posted with its controls in one call;
// when the task message is already in Slack, it gets its controls in place (post, then update).
// The webhooks are sent here by hand, in the order each test needs; the crew service's own run is
// kept busy with a slow task so that it sends none of its own.
import { afterEach, describe, expect, it } from "vitest";
import { APPROVE_ACTION, REJECT_ACTION } from "../../src/adapters/slack/blocks/index.js";
import { CHANNEL, eventually, type Harness, startHarness } from "../support/harness.js";
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

function send(run: Run, kind: "task" | "input", body: Record<string, unknown>) {
  return fetch(`${h.botUrl}/hooks/${run.id}/${kind}/${run.webhookSecret}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(kind === "input" ? { authorization: `Bearer ${run.humanInputToken}` } : {}) },
    body: JSON.stringify(body),
  }).then((r) => r.status);
}

const taskWebhook = (run: Run) => send(run, "task", { name: "draft", agent: "Writer", output: OUTPUT, kickoff_id: run.kickoffId });
const inputRequest = (run: Run) => send(run, "input", { execution_id: run.kickoffId, task_id: "t-draft", name: "draft", agent: "Writer", task_output: OUTPUT });

/** Every callback recorded so far has been processed. */
const processed = () => eventually(async () => (await h.bot.database.prisma.webhookEvent.count({ where: { processedAt: null } })) === 0, { what: "callbacks processed" });

/** The successful posts and updates of the draft's message (announcement and progress left out). */
function draftCalls() {
  const posts = h.slack.callsTo("chat.postMessage").filter((c) => !c.error && c.args.thread_ts && JSON.stringify(c.args.blocks ?? []).includes("draft"));
  const ts = h.slack.messages(CHANNEL).find((m) => m.thread_ts && JSON.stringify(m.blocks ?? []).includes("vents host"))?.ts;
  const updates = h.slack.callsTo("chat.update").filter((c) => !c.error && ts && c.args.ts === ts);
  return { posts, updates };
}

const hasControls = (args: Record<string, unknown>) => JSON.stringify(args.blocks ?? []).includes(APPROVE_ACTION) && JSON.stringify(args.blocks ?? []).includes(REJECT_ACTION);

/** Once the human-input request has been sent: the review is open, every callback processed, and the outbox has had time for a stray update. */
async function callsOnceSettled() {
  await pendingReview(h, { containing: "vents host" });
  await processed();
  await new Promise((r) => setTimeout(r, 500));
  return draftCalls();
}

/** The one post showed the review's controls, and nothing updated it. */
async function expectOnePostWithControls() {
  const { posts, updates } = await callsOnceSettled();
  expect(posts).toHaveLength(1);
  expect(hasControls(posts[0]!.args)).toBe(true);
  expect(updates).toHaveLength(0);
  expect(await h.bot.database.prisma.review.count()).toBe(1);
}

describe("Slack calls per review", { timeout: 240_000 }, () => {
  it("human-input request before the task webhook: one chat.postMessage with Approve/Reject, no chat.update", async () => {
    const run = await start();
    expect(await inputRequest(run)).toBe(202);
    const review = await pendingReview(h, { containing: "vents host" });
    // The task webhook for the same output comes after: it is the same review, and changes nothing in Slack.
    expect(await taskWebhook(run)).toBe(202);
    await expectOnePostWithControls();
    expect(await h.bot.database.prisma.review.findUnique({ where: { id: review.reviewId } })).toMatchObject({ state: "pending", shownState: "pending" });
  });

  it("task webhook first, its message already in Slack: posted as a task message, then updated with Approve/Reject", async () => {
    const run = await start();
    expect(await taskWebhook(run)).toBe(202);
    await eventually(() => h.bot.database.prisma.review.findFirst({ where: { executionId: run.id, messageTs: { not: null } } }), { what: "the task message posted" });
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
});
