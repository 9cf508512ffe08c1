// A crew that answers a rejection with exactly the same output (an LLM at temperature 0, or a crew
// that ignores the feedback) sends byte-identical callbacks for round 2. They are the crew's next
// round, not a redelivery: round 2 opens, says it changed nothing, and can be decided. A true
// redelivery (before the decision, while round 2 is open, after an approval) still opens nothing.
import { afterEach, describe, expect, it } from "vitest";
import { APPROVE_ACTION } from "../../src/adapters/slack/blocks/index.js";
import type { SimTask, SimWebhookDelivery } from "../../src/sim/crew-service.js";
import { CHANNEL, eventually, type Harness, type HarnessOptions, startHarness } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { clickReview, pendingReview, resumeCalls, resumingThrough, startRunViaSlack } from "../support/reviews.js";

let h: Harness;
afterEach(async () => h?.close());

const SAME = "## Draft\n\nExactly the same words, whatever the feedback says.";

/** The reviewed task gives the same output every round; the task after it runs long, so the run stays live after the approval. */
const tasks = (): SimTask[] => [
  { id: "t-draft", name: "draft_task", agent: "Writer", humanInput: true, delayMs: 20, steps: 1, output: () => SAME },
  { id: "t-publish", name: "publish_task", agent: "Publisher", delayMs: 600_000, steps: 0 },
];

/** The spec's crew: a task webhook, then the status says it waits (no human-input webhook). Polling held off: the crew's callbacks alone must do. */
const spec = (): HarnessOptions => ({
  crew: { mode: "seed", tasks: tasks() },
  crewline: { watcher: { tickMs: 600_000, minBackoffMs: 600_000, maxBackoffMs: 600_000 } },
});

/**
 * A deployed crew: a task webhook and a human-input webhook. Its status never shows the pause (the
 * state's literal is unpublished: field notes), so nothing but the human-input request opens a review.
 */
const deployed = (): HarnessOptions => ({
  crew: {
    mode: "deployed",
    tasks: tasks(),
    failWith: [{ endpoint: "status", status: 200, body: { state: "RUNNING", status: "Running", result: "", last_executed_task: null } }],
  },
});

const KINDS = [
  ["spec", spec],
  ["deployed", deployed],
] as const;

const draftDeliveries = (h: Harness): SimWebhookDelivery[] =>
  h.crew.webhookDeliveries.filter((d) => (d.kind === "task" || d.kind === "input") && JSON.stringify(d.body).includes("draft_task"));

const draftReviews = (h: Harness) => prismaOf(h.bot.database).review.findMany({ where: { taskName: "draft_task" }, orderBy: { round: "asc" } });

/** Sends a delivery the crew made once more, as a crew's retry would. */
async function redeliver(h: Harness, delivery: SimWebhookDelivery): Promise<number> {
  const kickoff = h.crew.requests.find((r) => r.path === "/kickoff")!.body as any;
  const authorization = delivery.kind === "input" ? `Bearer ${kickoff.humanInputWebhook.authentication.token}` : undefined;
  const res = await fetch(delivery.url, {
    method: "POST",
    body: JSON.stringify(delivery.body),
    headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
  });
  await res.arrayBuffer();
  return res.status;
}

describe.each(KINDS)("a %s crew that sends the same output again after a rejection", (_kind, options) => {
  it("opens round 2, which says nothing changed and can be decided; a redelivery opens nothing", async () => {
    h = await startHarness(options());
    const execution = await startRunViaSlack(h);
    const first = await pendingReview(h, { containing: "draft_task", timeoutMs: 15_000 });
    const round1 = draftDeliveries(h);
    // The same delivery again while round 1 is open is a repeat.
    for (const d of round1) expect(await redeliver(h, d)).toBe(200);

    await clickReview(h, first, false, "Say something else");
    expect((await eventually(() => resumeCalls(h)[0])).body).toMatchObject({ task_id: "t-draft", is_approve: false });

    // The crew's round 2 is byte for byte its round 1, and is taken as news (202), not as a repeat (200).
    await eventually(() => (draftDeliveries(h).length === 2 * round1.length && draftDeliveries(h).every((d) => d.status) ? true : undefined), {
      what: "the crew's round 2 callbacks",
    });
    const round2 = draftDeliveries(h).slice(round1.length);
    expect(round2.map((d) => JSON.stringify(d.body))).toEqual(round1.map((d) => JSON.stringify(d.body)));
    expect(round2.map((d) => d.status)).toEqual(round1.map(() => 202));

    const second = await pendingReview(h, { containing: "round 2", timeoutMs: 15_000 });
    expect(second.reviewId).not.toBe(first.reviewId);
    expect(second.msg.thread_ts).toBe(execution.threadTs);
    const shown = JSON.stringify(second.msg.blocks);
    expect(shown).toContain("Changes since round 1: no change.");
    expect(shown).toContain("Say something else");
    // Nothing changed: no diff file (an empty one least of all).
    expect(h.slack.files.filter((f) => f.filename.endsWith(".diff"))).toHaveLength(0);

    // A redelivery while round 2 is open is a repeat: no round 3, round 2 stays as it is.
    for (const d of round2) expect(await redeliver(h, d)).toBe(200);
    await h.settled({ crewRuns: false });
    expect((await draftReviews(h)).map((r) => [r.round, r.state])).toEqual([
      [1, "rejected"],
      [2, "pending"],
    ]);

    await clickReview(h, second, true, "Fine as it is");
    expect((await eventually(() => resumeCalls(h)[1])).body).toMatchObject({ task_id: "t-draft", is_approve: true });
    await eventually(async () => ((await draftReviews(h))[1]?.state === "approved" ? true : undefined), { what: "round 2 approved" });
    await h.crew.waitFor(() => h.crew.executions.get(execution.kickoffId!)!.taskIndex === 1);

    // After an approval the same delivery again is a repeat too.
    for (const d of round2) expect(await redeliver(h, d)).toBe(200);
    await h.settled({ crewRuns: false });
    expect((await draftReviews(h)).map((r) => [r.round, r.state, r.decision])).toEqual([
      [1, "rejected", "reject"],
      [2, "approved", "approve"],
    ]);
    expect(resumeCalls(h)).toHaveLength(2);
    // Two reviews reached Slack, neither with buttons left.
    const reviews = h.slack.messages(CHANNEL).filter((m) => m.thread_ts && JSON.stringify(m.blocks ?? []).includes("draft_task"));
    expect(reviews).toHaveLength(2);
    for (const m of reviews) expect(JSON.stringify(m.blocks)).not.toContain(APPROVE_ACTION);
  });

  it("opens round 2 when the crew sends it before its rejection is recorded", async () => {
    // The crew's answer to /resume reaches Crewline only after its next round's callbacks have (no
    // order is promised between them): round 2 arrives while round 1 is still being decided.
    const crewClient = resumingThrough(async (real, r) => {
      const round = () => h.crew.executions.get(r.executionId)?.rounds["t-draft"] ?? 1;
      const before = round();
      const answer = await real.resume(r);
      if (!r.isApprove) {
        await h.crew.waitFor(() => round() > before && h.crew.executions.get(r.executionId)!.state === "PAUSED" && h.crew.delivering === 0);
        await eventually(() => h.crew.webhookDeliveries.every((d) => d.status) || undefined, { what: "the next round's callbacks answered" });
      }
      return answer;
    });
    const base = options();
    h = await startHarness({ ...base, crewline: { ...base.crewline, crewClient } });
    await startRunViaSlack(h);
    const first = await pendingReview(h, { containing: "draft_task", timeoutMs: 15_000 });
    await clickReview(h, first, false, "Again, please");
    const second = await pendingReview(h, { containing: "round 2", timeoutMs: 15_000 });
    expect(JSON.stringify(second.msg.blocks)).toContain("no change");
    await clickReview(h, second, false, "And again");
    const third = await pendingReview(h, { containing: "round 3", timeoutMs: 15_000 });
    await clickReview(h, third, true, "");
    await eventually(async () => ((await draftReviews(h))[2]?.state === "approved" ? true : undefined), { what: "round 3 approved" });
    await h.settled({ crewRuns: false });
    expect((await draftReviews(h)).map((r) => [r.round, r.state])).toEqual([
      [1, "rejected"],
      [2, "rejected"],
      [3, "approved"],
    ]);
    expect(resumeCalls(h).map((r) => (r.body as any).is_approve)).toEqual([false, false, true]);
    // Every round of the crew was news to Crewline, none a repeat.
    expect(draftDeliveries(h).map((d) => d.status)).not.toContain(200);
  });
});
