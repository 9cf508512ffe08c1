// A run's live plan on several replicas (PostgreSQL): one stream, whichever replica receives the run's
// steps. The plan on one bot is test/e2e/live-plan.test.ts.
import { afterEach, describe, expect, it } from "vitest";
import type { Crewline } from "../../src/app.js";
import type { FakeMessage } from "../../src/playground/slack-standin.js";
import { CHANNEL, eventually, type Harness, moreReplicas, startHarness } from "../support/harness.js";
import { pendingReview, startRunViaSlack } from "../support/reviews.js";
import { usePostgres } from "../support/test-database.js";

let h: Harness;
const extra: Crewline[] = [];
afterEach(async () => {
  for (const bot of extra.splice(0)) await bot.stop().catch(() => {});
  await h?.close();
});

const streamed = (h: Harness): FakeMessage[] => h.slack.messages(CHANNEL).filter((m) => m.stream);

describe.runIf(usePostgres)("a run's live plan with three replicas", () => {
  it("is one stream whichever replicas receive its steps, appended to about once a second, ending on the last step", async () => {
    const FAST = { minBackoffMs: 100, maxBackoffMs: 1000, tickMs: 100 };
    h = await startHarness({ crew: { tasks: [{ id: "t1", name: "t", agent: "A", humanInput: true, delayMs: 10, steps: 0 }] }, crewline: { outbox: FAST } });
    const execution = await startRunViaSlack(h);
    await pendingReview(h);
    const replicas = await moreReplicas(h, 2, { outbox: FAST, progressIntervalMs: 200 }, extra);
    const started = Date.now();
    for (let i = 1; i <= 60; i++) {
      const answer = await fetch(`${replicas[i % 3]}/hooks/${execution.id}/step/${execution.webhookSecret}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ execution_id: execution.kickoffId, agent: "A", thought: `step ${i} of 60`, output: "" }),
      });
      expect(answer.status).toBe(202);
      // A crew's pace (updates are spaced in time): not a wait for something to happen.
      await new Promise((r) => setTimeout(r, 25));
    }
    const card = () => streamed(h)[0]?.stream?.tasks.find((t) => t.id === "task-2");
    await eventually(() => /step 60 of 60/.test(card()?.details ?? "") || undefined, { what: "the plan showing the last step", timeoutMs: 15_000 });
    const seconds = (Date.now() - started) / 1000;
    expect(streamed(h)).toHaveLength(1);
    expect(h.slack.callsTo("chat.startStream")).toHaveLength(1);
    // The review's card waits; the steps that came after it run on the next card.
    expect(streamed(h)[0]!.stream!.tasks.map((t) => t.status)).toEqual(["pending", "in_progress"]);
    expect(h.slack.callsTo("chat.appendStream").length).toBeLessThanOrEqual(Math.ceil(seconds) + 3);
  });
});
