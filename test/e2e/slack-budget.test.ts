// Slack's rate limits, end to end: the stand-in enforces the tiers (squeezed so that a test runs the
// budget short in seconds), the outbox spends the same tiers, and a review still becomes decidable
// while another run's steps stream, whose progress message still ends on its last step.
import { afterEach, describe, expect, it } from "vitest";
import type { TierName, TierRate } from "../../src/outbox/tiers.js";
import { CHANNEL, eventually, type Harness, startHarness } from "../support/harness.js";
import { pendingReview, startRunViaSlack } from "../support/reviews.js";

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

describe("Slack's budget", () => {
  it("a review becomes decidable while another run's steps stream under a tight chat.update tier; the progress ends on the last step", async () => {
    h = await startHarness({
      slack: { tiers: SQUEEZED },
      crew: { tasks: [{ id: "t1", name: "draft", agent: "A", humanInput: true, delayMs: 10, steps: 0 }] },
      crewline: { outbox: { minBackoffMs: 100, maxBackoffMs: 1000, tickMs: 100, budget: { tiers: SQUEEZED } }, progressIntervalMs: 200 },
    });
    // Progress as one updated message (where Slack refuses streaming): it competes with reviews for chat.update.
    h.slack.refuseStreaming("T0TEAM");
    const first = await startRunViaSlack(h, "Tide pools");
    const firstReview = await pendingReview(h);
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
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    await new Promise((r) => setTimeout(r, 300));
    await startRunViaSlack(h, "Kelp forests");
    const secondReview = await pendingReview(h, { exclude: new Set([firstReview.reviewId]), timeoutMs: 15_000 });
    expect(secondReview.reviewId).not.toBe(firstReview.reviewId);
    await streaming;

    // One progress message for the first run, ending on its last step (fewer updates than steps: coalesced).
    const progress = () => h.slack.messages(CHANNEL).filter((m) => m.thread_ts && /step \d+ of 40/.test(JSON.stringify(m.blocks ?? [])));
    await eventually(() => JSON.stringify(progress()[0]?.blocks ?? []).includes(`step ${STEPS} of ${STEPS}`), {
      what: "the progress message showing the last step",
      timeoutMs: 30_000,
    });
    expect(progress()).toHaveLength(1);
    const progressCalls = h.slack.calls.filter((c) => c.args.ts === progress()[0]!.ts && c.method === "chat.update" && !c.error);
    expect(progressCalls.length).toBeLessThan(STEPS / 4);
    // Each review was posted once.
    const reviews = await h.bot.database.prisma.review.findMany({ where: { messageTs: { not: null } } });
    expect(reviews).toHaveLength(2);
    for (const r of reviews) expect(h.slack.messages(CHANNEL).filter((m) => JSON.stringify(m.blocks ?? []).includes(r.id))).toHaveLength(1);
    // What the budget deferred is in the outbox, not lost: nothing given up.
    expect(await h.bot.database.prisma.slackEffect.count({ where: { state: "dead" } })).toBe(0);
  }, 90_000);
});
