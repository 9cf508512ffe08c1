// A run's live plan (issue #24): its thread shows one streamed message (chat.startStream →
// chat.appendStream → chat.stopStream) with one task card per crew task, while reviews stay ordinary
// messages with buttons; where Slack refuses streaming, the workspace falls back to the one updated
// progress message, remembered for every replica and said once in the log.
import { afterEach, describe, expect, it } from "vitest";
import { APPROVE_ACTION } from "../../src/adapters/slack/blocks/index.js";
import { PLAN_CHUNKS_PER_CALL } from "../../src/adapters/slack/blocks/plan.js";
import type { Logger } from "../../src/log/log.js";
import type { FakeMessage } from "../../src/playground/slack-standin.js";
import type { SimTask } from "../../src/sim/crew-service.js";
import { CHANNEL, eventually, type Harness, startHarness, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { clickReview, pendingReview, startRunViaSlack } from "../support/reviews.js";

let h: Harness;
afterEach(async () => h?.close());

// Long enough for each task to be seen running: progress goes to Slack at most about once a second.
const TASKS: SimTask[] = [
  { id: "t-gather", name: "gather_task", agent: "Gatherer", delayMs: 2500, steps: 6 },
  { id: "t-draft", name: "draft_task", agent: "Writer", humanInput: true, delayMs: 2500, steps: 6 },
];

const streamed = (h: Harness): FakeMessage[] => h.slack.messages(CHANNEL).filter((m) => m.stream);
/** Every chunk the bot streamed, in the order of its calls. */
const streamChunks = (h: Harness) =>
  ["chat.startStream", "chat.appendStream", "chat.stopStream"]
    .flatMap((m) => h.slack.callsTo(m))
    .sort((a, b) => a.at - b.at)
    .flatMap((c) => (c.args.chunks as Record<string, string>[] | undefined) ?? []);
/** For refuseWhen: the first call only. */
const once = () => {
  let first = true;
  return () => first && !(first = false);
};
const progressMessages = (h: Harness) => h.slack.messages(CHANNEL).filter((m) => m.thread_ts && /^(Working|Finished):/.test(m.text ?? ""));

function recordingLogger(): Logger & { lines: { level: string; msg: string; fields?: Record<string, unknown> }[] } {
  const lines: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];
  const at = (level: string) => (msg: string, fields?: Record<string, unknown>) => void lines.push({ level, msg, fields });
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

describe("a run's live plan", () => {
  it("streams one plan in the thread: cards start, run, wait for the review and complete; the stream stops at the end", async () => {
    h = await startHarness({ crew: { tasks: TASKS } });
    const execution = await startRunViaSlack(h, "Tidal energy");

    const review = await pendingReview(h, { containing: "draft_task", timeoutMs: 15_000 });
    // The review is an ordinary message with its buttons, not part of the stream.
    expect(JSON.stringify(review.msg.blocks)).toContain(APPROVE_ACTION);
    expect(review.msg.stream).toBeUndefined();
    await eventually(() => streamed(h)[0]?.stream?.tasks.find((t) => t.id === "task-2" && t.status === "pending"), { what: "the review's card waiting", timeoutMs: 10_000 });

    await clickReview(h, review, true, "Good");
    await eventually(() => streamed(h)[0]?.stream?.state === "stopped" || undefined, { what: "the stream stopped", timeoutMs: 15_000 });
    await h.settled();

    // One streamed message in the run's thread, addressed to its starter.
    expect(streamed(h)).toHaveLength(1);
    const start = h.slack.callsTo("chat.startStream");
    expect(start).toHaveLength(1);
    expect(start[0]!.args).toMatchObject({ channel: CHANNEL, thread_ts: execution.threadTs, recipient_user_id: USER, recipient_team_id: "T0TEAM" });
    expect(h.slack.callsTo("chat.appendStream").filter((c) => !c.error).length).toBeGreaterThan(0);
    expect(h.slack.callsTo("chat.stopStream").filter((c) => !c.error)).toHaveLength(1);

    const stream = streamed(h)[0]!.stream!;
    expect(stream.title).toContain("research");
    expect(stream.title).toContain("Tidal energy");
    expect(stream.title).toContain("finished");
    expect(stream.tasks.map((t) => [t.id, t.title, t.status])).toEqual([
      ["task-1", "gather_task", "complete"],
      ["task-2", "draft_task", "complete"],
    ]);
    // Each card ran before it completed (its steps as details); the reviewed one waited for its decision.
    expect(stream.tasks[0]!.history).toEqual(["in_progress", "complete"]);
    expect(stream.tasks[1]!.history).toEqual(["in_progress", "pending", "complete"]);

    // Progress spent no chat.update and posted no progress message.
    expect(progressMessages(h)).toHaveLength(0);
    const streamTs = streamed(h)[0]!.ts;
    expect(h.slack.callsTo("chat.update").filter((c) => c.args.ts === streamTs)).toHaveLength(0);

    const row = await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } });
    expect(row.streamTs).toBe(streamTs);
    expect(row.streamStoppedAt).not.toBeNull();
    expect(row.progressTs).toBeNull();
  });

  it("is stopped without its last chunks when Slack refuses them, rather than left spinning", async () => {
    h = await startHarness({ crew: { tasks: [{ id: "t-gather", name: "gather_task", agent: "Gatherer", delayMs: 1500, steps: 3 }] } });
    // Slack refuses the closing chunks, in a stop or an append (sent again, the same chunks would be
    // refused again), and takes a stop without them.
    const closing = (args: Record<string, unknown>) => JSON.stringify(args.chunks ?? []).includes("finished");
    h.slack.refuseWhen("chat.stopStream", "invalid_chunks", closing);
    h.slack.refuseWhen("chat.appendStream", "invalid_chunks", closing);
    const execution = await startRunViaSlack(h);
    await eventually(() => streamed(h)[0]?.stream?.state === "stopped" || undefined, { what: "the stream stopped", timeoutMs: 15_000 });
    await h.settled();
    const stops = h.slack.callsTo("chat.stopStream");
    expect(stops.map((c) => [!!c.error, ((c.args.chunks as unknown[] | undefined) ?? []).length > 0]).at(-1)).toEqual([false, false]);
    expect(stops.filter((c) => c.error)).toHaveLength(1);
    const row = await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } });
    expect(row.streamStoppedAt).not.toBeNull();
  });

  it("starts again with every card when Slack ends a long run's stream, a call carrying at most so many chunks", async () => {
    const tasks: SimTask[] = [
      ...Array.from({ length: 110 }, (_, i) => ({ id: `t${i}`, name: `task_${i}`, agent: "A", delayMs: 5, steps: 1 })),
      { id: "t-long", name: "long_task", agent: "A", delayMs: 8000, steps: 8 },
    ];
    h = await startHarness({ crew: { tasks } });
    await startRunViaSlack(h, "Many");
    await eventually(() => (streamed(h)[0]?.stream?.tasks.length ?? 0) >= 111 || undefined, { what: "the plan's 111 cards", timeoutMs: 30_000 });
    // The long task runs on: Slack ends the stream itself, and the next append is told so.
    h.slack.refuseWhen("chat.appendStream", "message_not_in_streaming_state", once());
    const again = await eventually(() => (streamed(h)[1]?.stream?.state === "stopped" ? streamed(h)[1]!.stream : undefined), {
      what: "the plan started again, and stopped at the run's end",
      timeoutMs: 40_000,
    });
    // (The 111 task messages are still being posted, paced by the channel: nothing to wait for here.)

    // Started once more (not refused and retried), every card shown in order, each complete.
    expect(h.slack.callsTo("chat.startStream").map((c) => c.error ?? "ok")).toEqual(["ok", "ok"]);
    expect(again.tasks.map((t) => t.id)).toEqual(Array.from({ length: 111 }, (_, i) => `task-${i + 1}`));
    expect(again.tasks.every((t) => t.status === "complete")).toBe(true);
    expect(again.title).toContain("finished");
    const calls = ["chat.startStream", "chat.appendStream", "chat.stopStream"].flatMap((m) => h.slack.callsTo(m));
    expect(calls.filter((c) => c.error === "invalid_chunks")).toEqual([]);
    for (const c of calls) expect(((c.args.chunks as unknown[] | undefined) ?? []).length).toBeLessThanOrEqual(PLAN_CHUNKS_PER_CALL);
  }, 90_000);

  it("shows every card when more change at the run's end than a call carries: appended first, then the stop", async () => {
    // A slow task starts the plan; then 120 tasks finish within a moment and the run ends.
    const tasks: SimTask[] = [
      { id: "t-slow", name: "slow_task", agent: "A", delayMs: 2000, steps: 3 },
      ...Array.from({ length: 120 }, (_, i) => ({ id: `t${i}`, name: `task_${i}`, agent: "A", delayMs: 0, steps: 0 })),
    ];
    h = await startHarness({ crew: { tasks } });
    await startRunViaSlack(h, "Many");
    const plan = await eventually(() => (streamed(h)[0]?.stream?.state === "stopped" ? streamed(h)[0]!.stream : undefined), { what: "the plan stopped", timeoutMs: 30_000 });
    expect(plan.tasks.map((t) => t.id)).toEqual(Array.from({ length: 121 }, (_, i) => `task-${i + 1}`));
    expect(plan.tasks.every((t) => t.status === "complete")).toBe(true);
    const calls = ["chat.startStream", "chat.appendStream", "chat.stopStream"].flatMap((m) => h.slack.callsTo(m));
    expect(calls.filter((c) => c.error)).toEqual([]);
    for (const c of calls) expect(((c.args.chunks as unknown[] | undefined) ?? []).length).toBeLessThanOrEqual(PLAN_CHUNKS_PER_CALL);
  });

  it("shows a run's progress as one message when Slack refuses its plan's chunks at the start, and goes on past an append's refused cards", async () => {
    const log = recordingLogger();
    h = await startHarness({ crew: { tasks: [{ id: "t-a", name: "a_task", agent: "A", delayMs: 1500, steps: 4 }] }, crewline: { log } });
    // Sent again, refused chunks are refused again: the start is asked once (one Tier 2 token), not retried.
    h.slack.refuseWhen("chat.startStream", "invalid_chunks", once());
    h.slack.refuseWhen("chat.appendStream", "invalid_chunks", once());
    await startRunViaSlack(h, "First");
    await eventually(() => progressMessages(h).find((m) => /^Finished/.test(m.text ?? "")), { what: "the first run's progress message finished", timeoutMs: 15_000 });
    expect(h.slack.callsTo("chat.startStream").map((c) => c.error)).toEqual(["invalid_chunks"]);
    expect(log.lines.filter((l) => /refused the live plan's chunks/.test(l.msg))).toHaveLength(1);

    // The workspace still streams: the next run's plan starts, an append's refused cards are passed over.
    await startRunViaSlack(h, "Second");
    await eventually(() => streamed(h)[0]?.stream?.state === "stopped" || undefined, { what: "the second run's plan stopped", timeoutMs: 15_000 });
    await h.settled();
    expect(h.slack.callsTo("chat.startStream").map((c) => c.error ?? "ok")).toEqual(["invalid_chunks", "ok"]);
    expect(h.slack.callsTo("chat.appendStream").filter((c) => c.error)).toHaveLength(1);
    expect(streamed(h)[0]!.stream!.tasks.map((t) => t.status)).toEqual(["complete"]);
    expect(await prismaOf(h.bot.database).streamingRefusal.findMany()).toEqual([]);
  });

  it("shows a run's progress as one message once Slack has ended its plan's stream again and again", async () => {
    const log = recordingLogger();
    h = await startHarness({ crew: { tasks: Array.from({ length: 8 }, (_, i) => ({ id: `t${i}`, name: `task_${i}`, agent: "A", delayMs: 1000, steps: 3 })) }, crewline: { log } });
    // Every append is told the stream is over: each would start a new stream, for a Tier 2 token each.
    h.slack.refuseWhen("chat.appendStream", "message_not_in_streaming_state", () => true);
    await startRunViaSlack(h, "Restless");
    await eventually(() => progressMessages(h).find((m) => /^Finished/.test(m.text ?? "")), { what: "the run's progress message finished", timeoutMs: 30_000 });
    await h.settled();
    // Started again three times, then no more: the steps went on in the one message.
    expect(h.slack.callsTo("chat.startStream").map((c) => c.error ?? "ok")).toEqual(["ok", "ok", "ok", "ok"]);
    expect(h.slack.callsTo("chat.appendStream").map((c) => c.error)).toEqual(Array(4).fill("message_not_in_streaming_state"));
    expect(progressMessages(h)).toHaveLength(1);
    expect(log.lines.filter((l) => /again and again/.test(l.msg))).toHaveLength(1);
    // The ended stream no longer counts among the workspace's live plans.
    expect(await prismaOf(h.bot.database).execution.findFirstOrThrow()).toMatchObject({ streamTs: null, progressTs: expect.any(String) });
  }, 60_000);

  it("falls back to the one progress message where Slack refuses streaming, remembered for the workspace and logged once", async () => {
    const log = recordingLogger();
    h = await startHarness({ crew: { tasks: [{ id: "t-a", name: "a_task", agent: "A", delayMs: 600, steps: 4 }] }, crewline: { log } });
    h.slack.refuseStreaming("T0TEAM", "unknown_method");

    await startRunViaSlack(h, "First");
    await eventually(() => progressMessages(h).find((m) => /^Finished/.test(m.text ?? "")), { what: "the first run's progress message finished", timeoutMs: 15_000 });
    await startRunViaSlack(h, "Second");
    await eventually(() => progressMessages(h).filter((m) => /^Finished/.test(m.text ?? "")).length === 2 || undefined, {
      what: "the second run's progress message finished",
      timeoutMs: 15_000,
    });
    await h.settled();

    // Slack was asked to stream once; the refusal is remembered (in the database, for every replica).
    expect(h.slack.callsTo("chat.startStream").map((c) => c.error)).toEqual(["unknown_method"]);
    expect(h.slack.callsTo("chat.appendStream")).toHaveLength(0);
    expect(streamed(h)).toHaveLength(0);
    expect(await prismaOf(h.bot.database).streamingRefusal.findMany()).toMatchObject([{ teamId: "T0TEAM", error: "unknown_method" }]);
    expect(log.lines.filter((l) => /refused message streaming/.test(l.msg))).toHaveLength(1);
  });

  it("titles a running task's card with the name its task_started event gave (a crew that sends only its event stream)", async () => {
    h = await startHarness({ research: { eventStream: true }, crew: { tasks: [TASKS[0]!], eventStream: { only: true } } });
    await startRunViaSlack(h);
    await eventually(() => streamed(h)[0]?.stream?.state === "stopped" || undefined, { what: "the stream stopped", timeoutMs: 15_000 });
    const chunks = streamChunks(h);
    // Named while it ran, before its output said so.
    expect(chunks.some((c) => c.type === "task_update" && c.status === "in_progress" && c.title === "gather_task")).toBe(true);
    expect(streamed(h)[0]!.stream!.tasks.map((t) => [t.title, t.status])).toEqual([["gather_task", "complete"]]);
  });

  it("cuts and escapes hostile task names, steps and outputs", async () => {
    const flood = "<!channel> *bold* <@U0ALICE> & ".repeat(20_000);
    h = await startHarness({
      crew: { tasks: [{ id: "t-x", name: `<!here> ${"n".repeat(50_000)}`, agent: `<!everyone> ${"a".repeat(10_000)}`, delayMs: 600, steps: 4, output: flood }] },
    });
    await startRunViaSlack(h, `<!channel> ${"t".repeat(30_000)}`);
    await eventually(() => streamed(h)[0]?.stream?.state === "stopped" || undefined, { what: "the stream stopped", timeoutMs: 20_000 });
    await h.settled();

    const chunks = streamChunks(h);
    expect(chunks.length).toBeGreaterThan(0);
    const text = JSON.stringify(chunks);
    // No mention or markup reaches Slack as such: every < > & is escaped.
    expect(text).not.toMatch(/<!(channel|here|everyone)>|<@U/);
    for (const c of chunks) for (const v of Object.values(c)) expect(String(v).length).toBeLessThanOrEqual(3_000);
    const card = streamed(h)[0]!.stream!.tasks[0]!;
    expect(card.title.startsWith("&lt;!here&gt;")).toBe(true);
    expect(card.output).toContain("&lt;!channel&gt;");
    expect(card.status).toBe("complete");
  });
});
