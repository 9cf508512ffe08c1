// A run's live plan, and its progress message where Slack refuses streaming, at the run's end, and
// above all at its stop: the thread shows the run stopped (or failed) whatever Slack did to the
// stream before, and a stop whose answer was lost starts no second plan. Through signed requests to
// /slack/events, the Slack stand-in and the local crew service.
import { afterEach, describe, expect, it } from "vitest";
import { RUN_ACTIONS_BLOCK, STOP_ACTION } from "../../src/adapters/slack/blocks/index.js";
import type { FakeMessage } from "../../src/playground/slack-standin.js";
import { CHANNEL, eventually, type Harness, kickoffViaSlack, startHarness, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { startRunViaSlack } from "../support/reviews.js";

let h: Harness;
afterEach(async () => h?.close());

const streamed = (): FakeMessage[] => h.slack.messages(CHANNEL).filter((m) => m.stream);
const run = (id: string) => prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id } });
const progressIn = (threadTs: string | null) => h.slack.messages(CHANNEL).filter((m) => m.thread_ts === threadTs && /^\S.*: \d+ steps?$/.test(m.text ?? "") && !m.stream);
const clickStop = (value: string, messageTs: string) =>
  h.requests.blockAction({ user_id: USER, channel_id: CHANNEL, message_ts: messageTs, action: { action_id: STOP_ACTION, block_id: RUN_ACTIONS_BLOCK, value } });

describe("a stopped run's live plan", () => {
  it("whose stream Slack had ended while a review waited: a new plan shows the stop", async () => {
    h = await startHarness({ crew: { tasks: [{ id: "t1", name: "draft_task", agent: "W", humanInput: true, delayMs: 1500, steps: 3 }] } });
    const execution = await startRunViaSlack(h);
    await eventually(() => streamed()[0]?.stream?.tasks.find((t) => t.status === "pending"), { what: "the review's card waiting", timeoutMs: 15_000 });
    await h.settled({ crewRuns: false });
    // Slack ended the idle stream: every call on it is told so.
    const first = streamed()[0]!.ts;
    const onFirst = (args: Record<string, unknown>) => args.ts === first;
    h.slack.refuseWhen("chat.stopStream", "message_not_in_streaming_state", onFirst);
    h.slack.refuseWhen("chat.appendStream", "message_not_in_streaming_state", onFirst);

    await clickStop(execution.id, execution.threadTs!);
    const plan = await eventually(() => (streamed()[1]?.stream?.state === "stopped" ? streamed()[1]!.stream : undefined), { what: "a new plan, stopped", timeoutMs: 20_000 });
    await h.settled({ crewRuns: false });
    expect(plan.title).toMatch(/— stopped$/);
    expect(plan.tasks.map((t) => [t.status, t.details])).toEqual([["error", "Stopped from Slack before a decision"]]);
    expect(streamed()).toHaveLength(2);
    expect((await run(execution.id)).streamStoppedAt).not.toBeNull();
  }, 60_000);

  it("whose stop's answer was lost: the retry told the stream is over takes it as stopped, and starts no second plan", async () => {
    h = await startHarness({
      crew: { tasks: [{ id: "t", name: "gather_task", agent: "G", delayMs: 2500, steps: 4 }] },
      crewline: { outbox: { minBackoffMs: 100, maxBackoffMs: 1000, tickMs: 100, leaseMs: 800 } },
    });
    // Slack stops the stream, but answers after the outbox's call gave up waiting.
    h.slack.answerLateNext("chat.stopStream", 2500);
    const execution = await startRunViaSlack(h);
    await eventually(async () => (await run(execution.id)).streamStoppedAt, { what: "the stream recorded stopped", timeoutMs: 30_000 });
    await h.settled();
    // The stop reached Slack (its answer is recorded once given); the retry was told the stream is over.
    await eventually(() => h.slack.callsTo("chat.stopStream").length > 0 || undefined, { what: "the late stop's answer" });
    const retried = ["chat.appendStream", "chat.stopStream"].flatMap((m) => h.slack.callsTo(m)).filter((c) => c.error);
    expect(retried.map((c) => c.error)).toEqual(["message_not_in_streaming_state"]);
    expect(h.slack.callsTo("chat.startStream")).toHaveLength(1);
    expect(streamed()).toHaveLength(1);
    expect(streamed()[0]!.stream).toMatchObject({ state: "stopped", title: expect.stringMatching(/— finished$/) });
  });

  it("goes on streaming, and is stopped at its end, when Slack refuses another run's plan (not_allowed)", async () => {
    h = await startHarness({ crew: { tasks: [{ id: "t", name: "gather_task", agent: "G", delayMs: 6000, steps: 12 }] } });
    const a = await startRunViaSlack(h, "First");
    await eventually(() => streamed()[0]?.stream?.tasks.find((t) => t.status === "in_progress"), { what: "the first run's plan" });
    // Slack refuses the next start (the second run's).
    h.slack.refuseWhen("chat.startStream", "not_allowed", () => true);
    await kickoffViaSlack(h, { topic: "Second" });
    await eventually(async () => (await run(a.id)).state === "completed", { what: "the first run completed", timeoutMs: 30_000 });
    await h.settled();
    const aPlan = h.slack.messages(CHANNEL).find((m) => m.stream && m.thread_ts === a.threadTs);
    expect(aPlan?.stream).toMatchObject({ state: "stopped", title: expect.stringMatching(/— finished$/) });
    expect(progressIn(a.threadTs)).toHaveLength(0);
    expect(h.slack.callsTo("chat.startStream").map((c) => c.error ?? "ok")).toEqual(["ok", "not_allowed"]);
  });
});

describe("the progress message (a workspace without streaming) at the run's end", () => {
  it("says the run was stopped, in one last update", async () => {
    h = await startHarness({ crew: { tasks: [{ id: "t", name: "long_task", agent: "W", delayMs: 60_000, steps: 14 }] } });
    h.slack.refuseStreaming("T0TEAM");
    const execution = await startRunViaSlack(h);
    const progress = await eventually(() => progressIn(execution.threadTs)[0], { what: "the progress message", timeoutMs: 15_000 });
    await clickStop(execution.id, execution.threadTs!);
    await eventually(async () => (await run(execution.id)).state === "stopped", { what: "the stopped run" });
    const stoppedAt = Date.now();
    await h.settled({ crewRuns: false });
    const shown = h.slack.messages(CHANNEL).find((m) => m.ts === progress.ts)!;
    expect(shown.text).toMatch(/^Stopped: \d+ steps?$/);
    expect(JSON.stringify(shown.blocks)).toContain("⏹️");
    expect(h.slack.callsTo("chat.update").filter((c) => c.args.ts === progress.ts && c.at >= stoppedAt).length).toBeLessThanOrEqual(1);
    expect(progressIn(execution.threadTs)).toHaveLength(1);
  });

  it("says the run failed, not finished", async () => {
    h = await startHarness({
      crew: {
        tasks: [
          { id: "t", name: "gather_task", agent: "G", delayMs: 1500, steps: 4 },
          { id: "t2", name: "write_task", agent: "W" },
        ],
        failRun: { afterTask: 1, error: "Boom" },
      },
    });
    h.slack.refuseStreaming("T0TEAM");
    const execution = await startRunViaSlack(h);
    await eventually(async () => (await run(execution.id)).state === "failed", { what: "the failed run", timeoutMs: 15_000 });
    await h.settled();
    const [progress] = progressIn(execution.threadTs);
    expect(progress?.text).toMatch(/^Failed: \d+ steps?$/);
    expect(JSON.stringify(progress?.blocks)).toContain("❌");
  });
});
