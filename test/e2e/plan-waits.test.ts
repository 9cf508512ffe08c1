// More runs than Slack's Tier 2 lets start their live plans at once (chat.startStream: about 20 a
// minute per workspace). Each run's latest step shows at once in one message of its thread
// (chat.postMessage, paced per channel), refreshed while its plan waits, and the plan starts below it
// when its token is there, in the order the runs started. Reviews keep their one call.
import { afterEach, describe, expect, it } from "vitest";
import { APPROVE_ACTION } from "../../src/adapters/slack/blocks/index.js";
import type { TierName, TierRate } from "../../src/outbox/tiers.js";
import type { FakeMessage } from "../../src/playground/slack-standin.js";
import { CHANNEL, eventually, type Harness, kickoffViaSlack, startHarness, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { clickReview, pendingReview, startRunViaSlack } from "../support/reviews.js";

let h: Harness;
afterEach(async () => h?.close());

/**
 * chat.startStream and chat.stopStream: a token every 10 s, two at once (a bucket of 3, less the outbox's
 * headroom of 1), so that of four runs starting together the last waits about 20 s for its plan.
 */
const TIERS: Record<TierName, TierRate> = {
  tier2: { perMinute: 6, burst: 3, scope: "workspace" },
  tier3: { perMinute: 50, burst: 8, scope: "workspace" },
  tier4: { perMinute: 100, burst: 15, scope: "workspace" },
  post: { perMinute: 60, burst: 4, scope: "channel" },
};

const RUNS = 4;
const BOUND_MS = 10_000;

/** The messages that showed a run's steps while its plan waited (its latest step and when it came). */
const earlyMessages = (h: Harness, threadTs: string): FakeMessage[] =>
  h.slack.messages(CHANNEL).filter((m) => m.thread_ts === threadTs && !m.stream && JSON.stringify(m.blocks ?? []).includes("Latest step at"));

/**
 * Two runs of a crew with one task, under a Tier 2 of one chat.startStream every 30 s: the first run's
 * plan starts, and the second's waits while a message shows its steps. Returns the second run then.
 */
async function secondRunWaitingForItsPlan(task: { delayMs: number; steps: number }) {
  const slow: Record<TierName, TierRate> = { ...TIERS, tier2: { perMinute: 2, burst: 2, scope: "workspace" } };
  h = await startHarness({
    slack: { tiers: slow },
    crew: { tasks: [{ id: "t1", name: "research_task", agent: "A", ...task }] },
    crewline: { outbox: { minBackoffMs: 100, maxBackoffMs: 1000, tickMs: 100, budget: { tiers: slow } } },
  });
  const prisma = prismaOf(h.bot.database);
  await kickoffViaSlack(h, { topic: "Tide pools" });
  await eventually(() => h.slack.messages(CHANNEL).some((m) => m.stream), { what: "the first run's plan", timeoutMs: 10_000 });
  await kickoffViaSlack(h, { topic: "Kelp forests" });
  const second = await eventually(() => prisma.execution.findFirst({ where: { earlyTs: { not: null } } }), { what: "the second run's steps shown", timeoutMs: 10_000 });
  return { prisma, second };
}

describe("live plans waiting for Slack's Tier 2", () => {
  it("every run shows a step within seconds and at least every 10 s; its plan starts below in turn; nothing is posted twice; reviews stay one call", async () => {
    h = await startHarness({
      slack: { tiers: TIERS },
      crew: { tasks: [{ id: "t1", name: "research_task", agent: "A", humanInput: true, delayMs: 9000, steps: 45 }] },
      crewline: { outbox: { minBackoffMs: 100, maxBackoffMs: 1000, tickMs: 100, budget: { tiers: TIERS } } },
    });
    const prisma = prismaOf(h.bot.database);
    // The first run teaches the bot that this crew waits on its task (its reviews are then one post).
    const first = await startRunViaSlack(h, "Tide pools");
    await clickReview(h, await pendingReview(h, { timeoutMs: 20_000 }), true);
    await eventually(async () => (await prisma.execution.findUnique({ where: { id: first.id } }))?.state === "completed", { what: "the first run", timeoutMs: 15_000 });

    const callsBefore = h.slack.calls.length;
    for (let i = 0; i < RUNS; i++) await kickoffViaSlack(h, { topic: `Kelp forest ${i}` });
    const approved = new Set<string>();
    while ((await prisma.execution.count({ where: { state: "completed" } })) < RUNS + 1) {
      const review = await pendingReview(h, { exclude: approved, timeoutMs: 2000 }).catch(() => undefined);
      if (!review) continue;
      approved.add(review.reviewId);
      expect((await clickReview(h, review, true)).status).toBe(200);
    }
    const runs = await prisma.execution.findMany({ where: { id: { not: first.id } }, orderBy: { startedAt: "asc" } });
    await eventually(async () => (await prisma.execution.count({ where: { id: { not: first.id }, streamStoppedAt: { not: null } } })) === RUNS, {
      what: "every plan stopped",
      timeoutMs: 40_000,
    });
    await h.settled({ timeoutMs: 20_000 });
    const fresh = await prisma.execution.findMany({ where: { id: { not: first.id } } });
    const calls = h.slack.calls.slice(callsBefore).filter((c) => !c.error);

    let waited = 0;
    let refreshed = 0;
    for (const e of fresh) {
      const steps = h.crew.webhookDeliveries.filter((d) => d.kind === "step" && (d.body as { kickoff_id?: string }).kickoff_id === e.kickoffId).map((d) => d.sentAt);
      expect(steps.length).toBeGreaterThan(0);
      // One plan, streamed in the run's thread.
      const streams = h.slack.messages(CHANNEL).filter((m) => m.stream && m.thread_ts === e.threadTs);
      expect(streams).toHaveLength(1);
      expect(streams[0]!.stream!.state).toBe("stopped");
      expect(streams[0]!.stream!.title).toContain("finished");
      const planAt = h.slack.timeOf(e.streamTs!)!;
      // At most one message with its steps before the plan, and only when the plan waited for its token.
      const early = earlyMessages(h, e.threadTs!);
      expect(early.length).toBeLessThanOrEqual(1);
      const shownAt = [planAt, ...calls.filter((c) => ["chat.appendStream", "chat.stopStream"].includes(c.method) && c.args.ts === e.streamTs).map((c) => c.at)];
      if (early[0]) {
        waited++;
        expect(e.earlyTs).toBe(early[0].ts);
        const earlyAt = h.slack.timeOf(early[0].ts)!;
        // The plan starts below it, and it says so: its last words stay true once the plan is there.
        expect(planAt).toBeGreaterThan(earlyAt);
        const words = JSON.stringify(early[0].blocks);
        // Its last refresh shows a step of the task (or that the task waits for a decision, if the run got there first).
        expect(words).toMatch(/\*(Task \d+|research_task)\* · /);
        expect(words).toContain("follows below this message");
        // Refreshed while the plan waited (chat.update at progress's priority), never after it started.
        const refreshes = calls.filter((c) => c.method === "chat.update" && c.args.ts === early[0]!.ts).map((c) => c.at);
        for (const at of refreshes) expect(at).toBeLessThan(planAt);
        refreshed += refreshes.length;
        shownAt.push(earlyAt, ...refreshes);
      }
      // Every step the crew sent was shown within the bound: by the early message, then by the plan.
      shownAt.sort((a, b) => a - b);
      const stalest = Math.max(...steps.map((at) => (shownAt.find((s) => s >= at) ?? Date.now()) - at));
      expect(stalest, `run ${e.inputs && JSON.stringify(e.inputs)}: step → shown`).toBeLessThanOrEqual(BOUND_MS);
    }
    // Tier 2 let two of the four start at once: the others showed their steps meanwhile.
    expect(waited).toBeGreaterThanOrEqual(2);
    // The last of them waited longer than a refresh apart: its message showed a newer step meanwhile.
    expect(refreshed).toBeGreaterThanOrEqual(1);
    // Every plan started, once. (Their order follows when each start was refused and retried: on the
    // embedded database the order the runs were kicked off; on PostgreSQL, which processes callbacks
    // side by side, runs kicked off together may start in another order.)
    const started = calls.filter((c) => c.method === "chat.startStream").map((c) => String(c.args.thread_ts));
    expect([...started].sort()).toEqual(runs.map((e) => e.threadTs!).sort());

    // Each review: one chat.postMessage with its controls, one chat.update (its decision); posted once.
    const reviews = await prisma.review.findMany({ where: { executionId: { in: fresh.map((e) => e.id) } } });
    expect(reviews).toHaveLength(RUNS);
    for (const r of reviews) {
      const posts = calls.filter((c) => c.method === "chat.postMessage" && JSON.stringify(c.args.blocks ?? []).includes(r.id));
      expect(posts).toHaveLength(1);
      expect(JSON.stringify(posts[0]!.args.blocks)).toContain(APPROVE_ACTION);
      expect(calls.filter((c) => c.method === "chat.update" && c.args.ts === r.messageTs)).toHaveLength(1);
    }
    // Within Slack's tiers all along, and nothing given up.
    expect(h.slack.tierLimited).toEqual({});
    expect(h.slack.rateLimited).toBe(0);
    expect(await prisma.slackEffect.count({ where: { state: "dead" } })).toBe(0);
  }, 150_000);

  it("a run stopped while its plan waits: its message says it was stopped before its plan started, and no plan follows", async () => {
    const { prisma, second } = await secondRunWaitingForItsPlan({ delayMs: 20_000, steps: 60 });
    expect(second.streamTs).toBeNull();
    expect((await h.requests.command({ text: `stop ${second.kickoffId}`, user_id: USER, channel_id: CHANNEL })).status).toBe(200);
    const early = () => h.slack.messages(CHANNEL).find((m) => m.ts === second.earlyTs)!;
    await eventually(() => JSON.stringify(early().blocks).includes("stopped before its live plan started"), { what: "the message saying the run was stopped", timeoutMs: 15_000 });
    await h.settled({ timeoutMs: 20_000 });
    const after = (await prisma.execution.findUnique({ where: { id: second.id } }))!;
    expect(after.state).toBe("stopped");
    expect(after.streamTs).toBeNull();
    expect(h.slack.messages(CHANNEL).filter((m) => m.stream && m.thread_ts === second.threadTs)).toHaveLength(0);
    expect(JSON.stringify(early().blocks)).not.toContain("follows below");
    // One message for its steps, never posted again, and said stopped once.
    expect(earlyMessages(h, second.threadTs!)).toHaveLength(1);
    const saidStopped = h.slack.callsTo("chat.update").filter((c) => !c.error && c.args.ts === second.earlyTs && JSON.stringify(c.args.blocks ?? []).includes("stopped before"));
    expect(saidStopped).toHaveLength(1);
  }, 90_000);

  it("a run that ends while its plan waits: its message shows its last steps within 10 s, before the plan starts", async () => {
    // Its plan waits for its token well past the run's end.
    const { prisma, second } = await secondRunWaitingForItsPlan({ delayMs: 4000, steps: 20 });
    await eventually(async () => (await prisma.execution.findUnique({ where: { id: second.id } }))?.state === "completed", { what: "the second run's end", timeoutMs: 15_000 });
    const steps = h.crew.webhookDeliveries.filter((d) => d.kind === "step" && (d.body as { kickoff_id?: string }).kickoff_id === second.kickoffId).map((d) => d.sentAt);
    const lastStep = Math.max(...steps);
    const earlyAt = h.slack.timeOf(second.earlyTs!)!;
    // Its steps kept coming after the message first showed one: a refresh has something to show.
    expect(lastStep).toBeGreaterThan(earlyAt);
    const refreshed = () => h.slack.callsTo("chat.update").filter((c) => !c.error && c.args.ts === second.earlyTs && c.at >= lastStep);
    await eventually(() => refreshed().length > 0, { what: "the message showing the run's last steps", timeoutMs: 15_000 });
    expect(refreshed()[0]!.at - lastStep).toBeLessThanOrEqual(BOUND_MS);
    // Shown while the plan still waited, and its words stay true once the plan starts below it.
    const plan = await prisma.execution.findUnique({ where: { id: second.id } });
    expect(plan!.streamTs).toBeNull();
    expect(JSON.stringify(h.slack.messages(CHANNEL).find((m) => m.ts === second.earlyTs)!.blocks)).toContain("follows below this message");
  }, 90_000);
});
