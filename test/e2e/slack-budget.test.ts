// Slack's rate limits, end to end: the stand-in enforces the tiers (squeezed so that a test runs the
// budget short in seconds), the outbox spends the same tiers, and a review still becomes decidable
// while another run's steps stream, whose progress message still ends on its last step.
import { afterEach, describe, expect, it, vi } from "vitest";
import { APPROVE_ACTION } from "../../src/adapters/slack/blocks/index.js";
import { SlackBudget } from "../../src/outbox/budget.js";
import type { TierName, TierRate } from "../../src/outbox/tiers.js";
import { CHANNEL, eventually, type Harness, kickoffViaSlack, startHarness } from "../support/harness.js";
import { scrape } from "../support/metrics.js";
import { prismaOf } from "../support/prisma.js";
import { clickReview, pendingReview, startRunViaSlack } from "../support/reviews.js";

let h: Harness;
afterEach(async () => h?.close());

/** chat.update 12 a minute (a token every 5 s), 3 at once; posts 1 a second per channel, 3 at once. */
const SQUEEZED: Record<TierName, TierRate> = {
  tier2: { perMinute: 20, burst: 4, scope: "workspace" },
  tier3: { perMinute: 12, burst: 3, scope: "workspace" },
  tier4: { perMinute: 100, burst: 15, scope: "workspace" },
  post: { perMinute: 60, burst: 3, scope: "channel" },
};

const STEPS = 40;
const METRICS_TOKEN = "metrics-token-0123456789abcdef";

describe("Slack's budget", () => {
  it("a review becomes decidable while another run's steps stream under a tight chat.update tier; the progress ends on the last step", async () => {
    h = await startHarness({
      slack: { tiers: SQUEEZED },
      crew: { tasks: [{ id: "t1", name: "draft", agent: "A", humanInput: true, delayMs: 10, steps: 0 }] },
      crewline: { outbox: { minBackoffMs: 100, maxBackoffMs: 1000, tickMs: 100, budget: { tiers: SQUEEZED } }, progressIntervalMs: 200 },
      config: { metricsToken: METRICS_TOKEN },
    });
    // Progress as one updated message (where Slack refuses streaming): it competes with reviews for chat.update.
    h.slack.refuseStreaming("T0TEAM");
    const first = await startRunViaSlack(h, "Tide pools");
    const firstReview = await pendingReview(h);
    const progress = () => h.slack.messages(CHANNEL).filter((m) => m.thread_ts && /step \d+ of 40/.test(JSON.stringify(m.blocks ?? [])));
    // The first run streams its steps (one every 50 ms) while the second run's review comes.
    const stepUrl = `${h.botUrl}/hooks/${first.id}/step/${first.webhookSecret}`;
    const streaming = (async () => {
      for (let i = 1; i <= STEPS; i++) {
        const answer = await fetch(stepUrl, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ execution_id: first.kickoffId, agent: "A", thought: `step ${i} of ${STEPS}`, output: "" }),
        });
        expect(answer.status).toBe(202);
        // A crew's pace (the budget is spent over time): not a wait for something to happen.
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    // The second run starts once the first run's progress is in Slack, competing with it for chat.update.
    await eventually(() => progress().length > 0, { what: "the first run's progress message" });
    await startRunViaSlack(h, "Kelp forests");
    const secondReview = await pendingReview(h, { exclude: new Set([firstReview.reviewId]), timeoutMs: 15_000 });
    expect(secondReview.reviewId).not.toBe(firstReview.reviewId);
    await streaming;

    // One progress message for the first run, ending on its last step (fewer updates than steps: coalesced).
    await eventually(() => JSON.stringify(progress()[0]?.blocks ?? []).includes(`step ${STEPS} of ${STEPS}`), {
      what: "the progress message showing the last step",
      timeoutMs: 30_000,
    });
    expect(progress()).toHaveLength(1);
    const progressCalls = h.slack.calls.filter((c) => c.args.ts === progress()[0]!.ts && c.method === "chat.update" && !c.error);
    expect(progressCalls.length).toBeLessThan(STEPS / 4);
    // Each review was posted once.
    const reviews = await prismaOf(h.bot.database).review.findMany({ where: { messageTs: { not: null } } });
    expect(reviews).toHaveLength(2);
    for (const r of reviews) expect(h.slack.messages(CHANNEL).filter((m) => JSON.stringify(m.blocks ?? []).includes(r.id))).toHaveLength(1);
    // What the budget deferred is in the outbox, not lost: nothing given up.
    expect(await prismaOf(h.bot.database).slackEffect.count({ where: { state: "dead" } })).toBe(0);
    // Slack answered no 429, and the bot saw none. (Whether a progress update had to wait for its
    // token here depends on timing; src/outbox/worker.test.ts counts the waits.)
    const figures = await scrape(h.botUrl, `Bearer ${METRICS_TOKEN}`);
    expect(figures.sum("crewline_slack_api_rate_limited_total")).toBe(0);
    expect(h.slack.tierLimited).toEqual({});
  }, 90_000);
});

describe.each(["deployed", "seed"] as const)("Slack calls per review under Slack's tiers (%s crew)", (mode) => {
  it("once the crew has waited on its tasks, each review is one chat.postMessage with its controls and one chat.update (its decision); nothing is posted twice", async () => {
    h = await startHarness({
      slack: { tiers: true },
      crew: {
        mode,
        tasks: [
          { id: "t1", name: "research_task", agent: "A", humanInput: true, delayMs: 50, steps: 0 },
          { id: "t2", name: "writing_task", agent: "B", humanInput: true, delayMs: 50, steps: 0 },
        ],
      },
      crewline: { outbox: { minBackoffMs: 100, maxBackoffMs: 1000, tickMs: 100 } },
    });
    const prisma = prismaOf(h.bot.database);
    const approved = new Set<string>();
    /** Approves every review of the runs so far until `runs` runs have completed. */
    const approveAll = async (runs: number) => {
      while ((await prisma.execution.count({ where: { state: "completed" } })) < runs) {
        const review = await pendingReview(h, { exclude: approved, timeoutMs: 2000 }).catch(() => undefined);
        if (!review) continue;
        approved.add(review.reviewId);
        expect((await clickReview(h, review, true)).status).toBe(200);
      }
      await h.settled();
    };
    // The first run teaches the bot that this crew waits on both tasks.
    const first = await startRunViaSlack(h, "Tide pools");
    await approveAll(1);
    const taught = new Set((await prisma.review.findMany({ where: { executionId: first.id } })).map((r) => r.id));
    const callsBefore = h.slack.calls.length;
    for (const topic of ["Kelp forests", "Sea grass"]) await kickoffViaSlack(h, { topic });
    await approveAll(3);

    const reviews = (await prisma.review.findMany({ include: { execution: true } })).filter((r) => !taught.has(r.id));
    expect(reviews).toHaveLength(4);
    const calls = h.slack.calls.slice(callsBefore).filter((c) => !c.error);
    for (const r of reviews) {
      const posts = calls.filter((c) => c.method === "chat.postMessage" && JSON.stringify(c.args.blocks ?? []).includes(r.id));
      // Posted once, with its controls in that one post.
      expect(posts, `posts of review ${r.taskName}`).toHaveLength(1);
      expect(JSON.stringify(posts[0]!.args.blocks)).toContain(APPROVE_ACTION);
      expect(calls.filter((c) => c.method === "chat.update" && c.args.ts === r.messageTs)).toHaveLength(1);
    }
    // Every other chat.update is a run's announcement: started and finished (one when both were due at
    // once), and per review, waiting for it and running again after its decision (fewer when coalesced).
    const runs = await prisma.execution.findMany({ where: { id: { not: first.id } } });
    const announcements = new Set(runs.map((e) => e.announcementTs ?? e.threadTs));
    const others = calls.filter((c) => c.method === "chat.update" && !reviews.some((r) => r.messageTs === c.args.ts));
    expect(others.every((c) => announcements.has(String(c.args.ts)))).toBe(true);
    expect(others.length).toBeLessThanOrEqual(2 * runs.length + 2 * reviews.length);
    // Nothing refused: the announcements, posted in the kickoff's own answer, take their tokens from the
    // same budget as the outbox's posts in the channel (docs/slack-budget.md).
    // (On failure: each post, when it reached Slack and what it said, to see which went past the pace.)
    const posts = h.slack.callsTo("chat.postMessage").map((c) => `${c.at - h.slack.calls[0]!.at} ms ${c.error ?? "ok"} ${String(c.args.text).slice(0, 40)}`);
    expect(h.slack.tierLimited, posts.join("\n")).toEqual({});
  }, 120_000);
});

describe("the run's announcement at kickoff", () => {
  it("takes its token from the channel's post budget: runs started together in one channel are all announced once, none answered 429", async () => {
    h = await startHarness({
      slack: { tiers: true },
      crew: { tasks: [{ id: "t1", name: "draft", agent: "A", delayMs: 3000, steps: 4 }] },
      crewline: { outbox: { minBackoffMs: 100, maxBackoffMs: 1000, tickMs: 100 } },
    });
    const prisma = prismaOf(h.bot.database);
    // Five kickoffs in one channel within a second or two: more than Slack's burst of posts there (4).
    for (let i = 0; i < 5; i++) await kickoffViaSlack(h, { topic: `Reef ${i}` });
    await eventually(async () => (await prisma.execution.count({ where: { kickoffId: { not: null } } })) === 5, { what: "five runs started", timeoutMs: 15_000 });
    await eventually(async () => (await prisma.execution.count({ where: { state: "completed" } })) === 5, { what: "five runs finished", timeoutMs: 40_000 });
    await h.settled({ timeoutMs: 20_000 });
    const runs = await prisma.execution.findMany();
    // Each announced once, at the top of its own thread: the channel holds five announcements and five completion notices.
    expect(h.slack.callsTo("chat.postMessage").filter((c) => !c.error && !c.args.thread_ts)).toHaveLength(10);
    expect(new Set(runs.map((e) => e.threadTs)).size).toBe(5);
    for (const e of runs) expect(h.slack.messages(CHANNEL).filter((m) => m.ts === e.threadTs)).toHaveLength(1);
    // Neither the announcements nor the thread messages that follow them met Slack's pace.
    expect(h.slack.tierLimited).toEqual({});
    expect(h.slack.rateLimited).toBe(0);
  }, 90_000);
});

describe("the kickoff modal", () => {
  it("takes its views' tokens from the workspace's Tier 4 budget: kickoffs in quick succession meet no 429", async () => {
    // Tier 4 squeezed to 4 at once and one a second: four kickoffs make twelve modal calls in a few seconds.
    const tiers: Record<TierName, TierRate> = {
      tier2: { perMinute: 20, burst: 4, scope: "workspace" },
      tier3: { perMinute: 50, burst: 8, scope: "workspace" },
      tier4: { perMinute: 60, burst: 4, scope: "workspace" },
      post: { perMinute: 60, burst: 4, scope: "channel" },
    };
    // The bot keeps three of the four tokens unspent (headroom), and a modal call may go one burst past
    // what is left (SlackCall.burstTolerated): two at once, so that calls held up by a busy test machine
    // after taking their token, and reaching the stand-in together, still find two tokens there.
    h = await startHarness({
      slack: { tiers },
      crew: { tasks: [{ id: "t1", name: "draft", agent: "A", delayMs: 200, steps: 0 }] },
      crewline: { outbox: { minBackoffMs: 100, maxBackoffMs: 1000, tickMs: 100, budget: { tiers, headroom: 3 } } },
    });
    const prisma = prismaOf(h.bot.database);
    for (let i = 0; i < 4; i++) expect((await kickoffViaSlack(h, { topic: `Kelp ${i}` })).status).toBe(200);
    await eventually(async () => (await prisma.execution.count({ where: { kickoffId: { not: null } } })) === 4, { what: "four runs started", timeoutMs: 20_000 });
    // Each modal ends on the run having started.
    await eventually(() => h.slack.callsTo("views.update").filter((c) => !c.error && JSON.stringify(c.args.view).includes("is running (kickoff")).length === 4, {
      what: "four modals saying their run is running",
      timeoutMs: 20_000,
    });
    expect(h.slack.callsTo("views.open")).toHaveLength(4);
    expect(h.slack.tierLimited).toEqual({});
    expect(h.slack.rateLimited).toBe(0);
  }, 90_000);

  it("opens and fills the modal when the budget's database does not answer: views.open within its trigger's life, the form after at most a few seconds", async () => {
    h = await startHarness({ slack: { tiers: true } });
    const hung = vi.spyOn(SlackBudget.prototype, "take").mockReturnValue(new Promise(() => {}));
    try {
      const started = Date.now();
      expect((await h.requests.command({ text: "" })).status).toBe(200);
      await eventually(() => h.slack.callsTo("views.open").length === 1, { what: "the modal opened", timeoutMs: 2000 });
      expect(Date.now() - started).toBeLessThan(2000);
      await eventually(() => h.slack.callsTo("views.update").some((c) => (c.args.view as { submit?: unknown })?.submit), { what: "the kickoff form", timeoutMs: 10_000 });
    } finally {
      hung.mockRestore();
    }
  }, 30_000);
});
