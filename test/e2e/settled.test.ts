// The suite's settled() (test/support/harness.ts): the tests that assert "nothing more reached Slack"
// after it prove something only if it waits for every piece of work that could still reach Slack.
import { afterEach, describe, expect, it } from "vitest";
import { CHANNEL, eventually, type Harness, startHarness } from "../support/harness.js";
import { clickReview, pendingReview, resumeCalls, startRunViaSlack } from "../support/reviews.js";

let h: Harness;
afterEach(async () => h?.close());

const progressText = () =>
  h.slack
    .messages(CHANNEL)
    .filter((m) => m.thread_ts && /probe step/.test(JSON.stringify(m.blocks ?? []) + (m.text ?? "")))
    .map((m) => JSON.stringify(m.blocks ?? []) + (m.text ?? ""))
    .join("\n");

describe("settled()", () => {
  it("waits for a step coalesced on a timer and for its progress update spaced after the last", async () => {
    h = await startHarness();
    // Progress as one updated message (where Slack refuses streaming), whose text is easy to read.
    h.slack.refuseStreaming("T0TEAM");
    const execution = await startRunViaSlack(h);
    await pendingReview(h);
    const step = (thought: string) =>
      fetch(`${h.botUrl}/hooks/${execution.id}/step/${execution.webhookSecret}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ execution_id: execution.kickoffId, agent: "A", thought, output: "" }),
      });
    expect((await step("probe step one")).status).toBe(202);
    await eventually(() => progressText().includes("probe step one"), { what: "the first probe step in Slack" });
    // The next update waits for the coalescing timer, then for the outbox's spacing (about a second after the last).
    expect((await step("probe step two")).status).toBe(202);
    await h.settled();
    expect(progressText()).toContain("probe step two");
  });

  it("waits for a click's handling after Slack's request was answered, and for the effects it enqueued", async () => {
    h = await startHarness();
    await startRunViaSlack(h);
    const review = await pendingReview(h);
    await clickReview(h, review, true, "");
    await h.settled();
    expect(resumeCalls(h)).toHaveLength(1);
    expect(h.slack.messages(CHANNEL).find((m) => m.ts === review.msg.ts)?.text).toMatch(/Approved/);
  });

  it("fails instead of resolving while an effect is due only after its time-out", async () => {
    h = await startHarness();
    const execution = await startRunViaSlack(h);
    await h.settled();
    await h.bot.outbox.request({ kind: "run.progress", subjectId: execution.id, part: "later", runAt: new Date(Date.now() + 60_000) });
    await expect(h.settled({ timeoutMs: 1000 })).rejects.toThrow(/due only at/);
  });
});
