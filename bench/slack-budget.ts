// Figure: reviews first under Slack's real rate limits (docs/slack-budget.md). The Slack stand-in
// enforces the tiers (src/outbox/tiers.ts: chat.update 50 a minute per workspace, chat.postMessage
// about 1 a second per channel, 429 with Retry-After past them). Twelve runs in one workspace, in four
// channels, each streaming a step every 200 ms while its two tasks wait for review in turn; the bench
// approves each review BENCH_BUDGET_THINK_MS after its controls are visible.
//
// Measured in one bench run: with the outbox's Slack budget and message streaming (as shipped: each
// run's progress is its live plan, chat.startStream/appendStream/stopStream); with the budget and Slack
// refusing streaming in the workspace (progress as one chat.update-d message: the form before
// streaming); and, unless BENCH_BUDGET_BASELINE=0, with the budget turned off (every effect spends as
// if Slack never said no, and retries its own 429s).
//
// Figures: task webhook → review decidable (its controls visible in Slack) p50/p99; 429s as a share of
// Slack calls; runs finished; messages posted twice; how stale each run's progress message got while
// it streamed (for each step, the time until the run's progress, its plan or its message, was next
// updated); Slack calls per finished run by method, with streaming and without.
//
//   npm run bench -- slack-budget
//   BENCH_BUDGET_RUNS=12 BENCH_BUDGET_CHANNELS=4 BENCH_BUDGET_TASK_MS=20000 BENCH_BUDGET_THINK_MS=2000
//   BENCH_BUDGET_TIMEOUT_MS=150000 BENCH_BUDGET_BASELINE=0 (skip the baseline)
import { APPROVE_ACTION } from "../src/adapters/slack/blocks/index.js";
import type { SimTask } from "../src/sim/crew-service.js";
import { prismaOf } from "../test/support/prisma.js";
import { cpuStallMs, machineCpu, submitKickoff } from "./child.js";
import { type BenchBot, type Figure, round, sleep, startBenchBot, summarize, until } from "./lib.js";

const RUNS = Number(process.env.BENCH_BUDGET_RUNS ?? 12);
const CHANNELS = Number(process.env.BENCH_BUDGET_CHANNELS ?? 4);
/** How long each task streams its steps (one every 200 ms). */
const TASK_MS = Number(process.env.BENCH_BUDGET_TASK_MS ?? 20_000);
const STEP_MS = 200;
const THINK_MS = Number(process.env.BENCH_BUDGET_THINK_MS ?? 2000);
const TIMEOUT_MS = Number(process.env.BENCH_BUDGET_TIMEOUT_MS ?? 150_000);
const BASELINE = process.env.BENCH_BUDGET_BASELINE !== "0";
const P99_TARGET_MS = 2000;
const STALE_TARGET_MS = 10_000;

const steps = Math.max(1, Math.round(TASK_MS / STEP_MS) - 1);
const TASKS: SimTask[] = [
  { id: "task-research", name: "research_task", agent: "Senior Research Analyst", humanInput: true, delayMs: TASK_MS, steps },
  { id: "task-write", name: "writing_task", agent: "Content Writer", humanInput: true, delayMs: TASK_MS, steps },
];

interface Measurement {
  budget: boolean;
  streaming: boolean;
  decidable: ReturnType<typeof summarize>;
  missing: number;
  calls: number;
  limited: number;
  byMethod: Record<string, number>;
  finished: number;
  postedTwice: number;
  stale: ReturnType<typeof summarize>;
  progressUpdates: number;
  /** Runs whose steps showed in a message while their plan waited for Slack to let it start. */
  earlyMessages: number;
  elapsedMs: number;
  cpuWait?: number;
  busy: number;
}

export async function slackBudget(): Promise<Figure[]> {
  const variants = [
    ...(BASELINE ? [{ budget: false, streaming: false, label: "the budget off (baseline), streaming refused" }] : []),
    { budget: true, streaming: false, label: "the budget on, streaming refused (progress as one updated message)" },
    { budget: true, streaming: true, label: "the budget on, streaming (live plan)" },
  ];
  const results: Measurement[] = [];
  for (const v of variants) {
    process.stderr.write(`bench: slack-budget with ${v.label}…\n`);
    results.push(await measure(v.budget, v.streaming));
  }
  const on = results.find((r) => r.budget && r.streaming)!;
  const refused = results.find((r) => r.budget && !r.streaming)!;
  const off = results.find((r) => !r.budget);
  const vs = (f: (m: Measurement) => number) => (off ? { baseline: round(f(off), 0), ratio: f(off) > 0 ? round(f(on) / f(off), 2) : undefined } : {});
  const figure = `slack-budget (${RUNS} runs, ${CHANNELS} channels, one workspace, Slack's tiers)`;
  const perRun = (m: Measurement) =>
    Object.entries(m.byMethod)
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${k} ${round(n / Math.max(1, m.finished), 1)}`)
      .join(", ");
  const describe = (m: Measurement) =>
    `${m.finished}/${RUNS} runs finished in ${round(m.elapsedMs / 1000, 0)} s; ${m.calls} Slack calls, ${m.limited} answered 429; per finished run: ${perRun(m)}; ` +
    `${m.progressUpdates} progress ${m.streaming ? `posts and stream calls (${m.earlyMessages} runs showed their steps in a message while their plan waited to start)` : "posts and updates"}; machine CPU ${round(m.busy * 100, 0)}% busy${m.cpuWait !== undefined ? `, tasks waiting for a CPU ${round(m.cpuWait * 100, 0)}% of the time` : ""}`;
  const total = (m: Measurement) => Object.values(m.byMethod).reduce((a, n) => a + n, 0) / Math.max(1, m.finished);
  return [
    {
      figure,
      metric: "Slack calls per finished run, streaming",
      value: round(total(on), 1),
      unit: "calls",
      baseline: round(total(refused), 1),
      note: `by method, streaming: ${perRun(on)}. Streaming refused (before): ${perRun(refused)}`,
    },
    {
      figure,
      metric: "task webhook → review decidable p50",
      value: round(on.decidable.p50, 0),
      unit: "ms",
      ...vs((m) => m.decidable.p50),
    },
    {
      figure,
      metric: "task webhook → review decidable p99",
      value: round(on.decidable.p99, 0),
      unit: "ms",
      target: `< ${P99_TARGET_MS} ms`,
      pass: on.decidable.n > 0 && on.missing === 0 && on.decidable.p99 < P99_TARGET_MS,
      ...vs((m) => m.decidable.p99),
      note: `n=${on.decidable.n}, max ${round(on.decidable.max, 0)} ms${on.missing ? `, ${on.missing} reviews never decidable` : ""}; streaming refused: p50 ${round(refused.decidable.p50, 0)} ms, p99 ${round(refused.decidable.p99, 0)} ms${refused.missing ? `, ${refused.missing} never decidable` : ""}${off ? `; baseline (budget off): n=${off.decidable.n}, max ${round(off.decidable.max, 0)} ms${off.missing ? `, ${off.missing} never decidable` : ""}` : ""}`,
    },
    {
      figure,
      metric: "429s / Slack calls",
      value: round((100 * on.limited) / Math.max(1, on.calls), 2),
      unit: "%",
      target: "< 1%",
      pass: on.limited / Math.max(1, on.calls) < 0.01,
      ...(off ? { baseline: round((100 * off.limited) / Math.max(1, off.calls), 2) } : {}),
      note: `with the budget and streaming: ${describe(on)}. Streaming refused: ${describe(refused)}${off ? `. Baseline (budget off): ${describe(off)}` : ""}`,
    },
    {
      figure,
      metric: "runs finished",
      value: on.finished,
      unit: `/ ${RUNS}`,
      target: `${RUNS}`,
      pass: on.finished === RUNS,
      ...(off ? { baseline: off.finished } : {}),
      note: `within ${TIMEOUT_MS / 1000} s`,
    },
    {
      figure,
      metric: "messages posted twice",
      value: on.postedTwice,
      unit: "",
      target: "0",
      pass: on.postedTwice === 0,
      ...(off ? { baseline: off.postedTwice } : {}),
    },
    {
      figure,
      metric: "step → progress updated, max",
      value: round(on.stale.max / 1000, 1),
      unit: "s",
      target: `≤ ${STALE_TARGET_MS / 1000} s`,
      pass: on.stale.n > 0 && on.stale.max <= STALE_TARGET_MS,
      ...vs((m) => m.stale.max / 1000),
      note: `for every step the crew sent, the time until its run's progress (its live plan, or the message showing its steps while the plan waited to start) was next updated: p50 ${round(on.stale.p50 / 1000, 1)} s, p99 ${round(on.stale.p99 / 1000, 1)} s (n=${on.stale.n}); streaming refused (one updated message): max ${round(refused.stale.max / 1000, 1)} s, p50 ${round(refused.stale.p50 / 1000, 1)} s, p99 ${round(refused.stale.p99 / 1000, 1)} s${off ? `; baseline p50 ${round(off.stale.p50 / 1000, 1)} s, p99 ${round(off.stale.p99 / 1000, 1)} s` : ""}`,
    },
  ];
}

interface Seen {
  reviewId: string;
  channel: string;
  ts: string;
  threadTs?: string;
  blockId: string;
  at: number;
}

async function measure(budget: boolean, streaming: boolean): Promise<Measurement> {
  const b = await startBenchBot({
    db: "embedded",
    slack: { tiers: true },
    crew: { inputs: ["topic"], tasks: TASKS },
    ...(budget ? {} : { outbox: { budget: false } }),
  });
  if (!streaming) b.slack.refuseStreaming("T0TEAM");
  const seen = new Map<string, Seen>();
  const clicks: Promise<unknown>[] = [];
  let cursor = 0;
  const scan = () => {
    const now = Date.now();
    for (; cursor < b.slack.calls.length; cursor++) {
      const call = b.slack.calls[cursor]!;
      if (call.error || (call.method !== "chat.postMessage" && call.method !== "chat.update")) continue;
      const channel = String(call.args.channel ?? "");
      const actions = Array.isArray(call.args.blocks) ? (call.args.blocks as any[]).find((bl) => bl?.type === "actions") : undefined;
      const approve = actions?.elements?.find((e: any) => e?.action_id === APPROVE_ACTION);
      if (!approve || seen.has(approve.value)) continue;
      const ts = call.method === "chat.update" ? String(call.args.ts) : b.slack.messages(channel).find((m) => JSON.stringify(m.blocks ?? []).includes(approve.value))?.ts;
      if (!ts) continue;
      const s: Seen = { reviewId: approve.value, channel, ts, blockId: actions.block_id, at: now, ...(call.args.thread_ts ? { threadTs: String(call.args.thread_ts) } : {}) };
      seen.set(s.reviewId, s);
      clicks.push(approveLater(b, s));
    }
  };
  const off = b.slack.onChange(scan);
  const t0 = Date.now();
  const machine0 = machineCpu();
  const stall0 = cpuStallMs();
  try {
    // Kickoffs spread over the first 2 s, like people starting runs, not one thundering herd.
    await Promise.all(
      Array.from({ length: RUNS }, async (_, i) => {
        await sleep((i * 2000) / RUNS);
        const status = await submitKickoff(b.slack, b.requests, { channel: `C0BUDGET${i % CHANNELS}`, topic: `run-${i}`, trigger: `bench-budget-${budget}-${streaming}-${i}` });
        if (status !== 200) process.stderr.write(`bench: slack-budget kickoff ${i} answered ${status}\n`);
      }),
    );
    const prisma = prismaOf(b.bot.database);
    await until(async () => (await prisma.execution.count({ where: { state: "completed" } })) >= RUNS, TIMEOUT_MS, 500);
    // The last effects of the finished runs (completion notices, announcements, the last progress).
    await until(async () => (await prisma.slackEffect.count({ where: { state: "due" } })) === 0, Math.max(0, t0 + TIMEOUT_MS + 30_000 - Date.now()), 500);
    const elapsedMs = Date.now() - t0;
    const machine1 = machineCpu();
    const stall1 = cpuStallMs();
    await Promise.allSettled(clicks);

    const executions = await prisma.execution.findMany({
      select: { id: true, kickoffId: true, state: true, progressTs: true, streamTs: true, earlyTs: true, threadTs: true, channelId: true },
    });
    const reviews = await prisma.review.findMany({ select: { id: true, executionId: true, taskName: true, round: true } });
    const byKickoff = new Map(executions.map((e) => [e.kickoffId, e]));
    // Task webhook → review decidable, per review (round 1: the bench approves every review).
    const decidable: number[] = [];
    let missing = 0;
    for (const d of b.crew.webhookDeliveries) {
      if (d.kind !== "task") continue;
      const body = d.body as { kickoff_id?: string; name?: string };
      const e = byKickoff.get(body.kickoff_id ?? "");
      const r = e && reviews.find((x) => x.executionId === e.id && x.taskName === body.name && x.round === 1);
      const shown = r && seen.get(r.id);
      if (shown) decidable.push(shown.at - d.sentAt);
      else missing++;
    }
    // Each step: how long until its run's progress (its message, or its streamed plan, or the message
    // that showed its steps while the plan waited to start) was next updated.
    const stale: number[] = [];
    let progressUpdates = 0;
    let earlyMessages = 0;
    const progressCalls = new Set(["chat.update", "chat.appendStream", "chat.stopStream"]);
    for (const e of executions) {
      const shown = [...new Set([e.progressTs ?? e.streamTs, e.earlyTs].filter((ts): ts is string => !!ts))];
      if (!shown.length) continue;
      if (e.earlyTs && !e.progressTs) earlyMessages++;
      const updates = shown
        .flatMap((ts) => {
          const posted = b.slack.timeOf(ts);
          return [
            ...(posted !== undefined ? [posted] : []),
            ...b.slack.calls.filter((c) => progressCalls.has(c.method) && !c.error && c.args.ts === ts && c.args.channel === e.channelId).map((c) => c.at),
          ];
        })
        .sort((x, y) => x - y);
      progressUpdates += updates.length;
      for (const d of b.crew.webhookDeliveries) {
        if (d.kind !== "step" || (d.body as { kickoff_id?: string }).kickoff_id !== e.kickoffId) continue;
        const next = updates.find((u) => u >= d.sentAt);
        stale.push((next ?? Date.now()) - d.sentAt);
      }
    }
    // Posted twice: a review's id in more than one message, or a run with more than one message showing its steps before its plan.
    let postedTwice = 0;
    for (const e of executions)
      if (b.slack.messages(e.channelId).filter((m) => m.thread_ts === e.threadTs && !m.stream && JSON.stringify(m.blocks ?? []).includes("Latest step at")).length > 1)
        postedTwice++;
    for (const r of reviews) {
      const e = executions.find((x) => x.id === r.executionId)!;
      if (b.slack.messages(e.channelId).filter((m) => JSON.stringify(m.blocks ?? []).includes(r.id)).length > 1) postedTwice++;
    }
    const byMethod: Record<string, number> = {};
    for (const c of b.slack.calls) if (c.method !== "views.open") byMethod[c.method] = (byMethod[c.method] ?? 0) + 1;
    return {
      budget,
      streaming,
      decidable: summarize(decidable),
      missing,
      calls: b.slack.calls.length,
      limited: b.slack.rateLimited,
      byMethod,
      finished: executions.filter((e) => e.state === "completed").length,
      postedTwice,
      stale: summarize(stale),
      progressUpdates,
      earlyMessages,
      elapsedMs,
      busy: (machine1.busy - machine0.busy) / Math.max(1, machine1.total - machine0.total),
      ...(stall0 !== undefined && stall1 !== undefined ? { cpuWait: (stall1 - stall0) / Math.max(1, elapsedMs) } : {}),
    };
  } finally {
    off();
    await b.close();
  }
}

/** The reviewer approves THINK_MS after the controls are visible; a refused click is tried again (3 times at most). */
async function approveLater(b: BenchBot, s: Seen): Promise<void> {
  for (let attempt = 0; attempt < 3; attempt++) {
    await sleep(THINK_MS);
    const told = b.slack.ephemerals.filter((e) => e.channel === s.channel).length;
    await b.requests.blockAction({
      user_id: "U0BENCH",
      channel_id: s.channel,
      message_ts: s.ts,
      ...(s.threadTs ? { thread_ts: s.threadTs } : {}),
      action: { action_id: APPROVE_ACTION, block_id: s.blockId, value: s.reviewId },
    });
    const refused = await until(() => b.slack.ephemerals.filter((e) => e.channel === s.channel).length > told, 1000, 50);
    if (!refused) return;
  }
}
