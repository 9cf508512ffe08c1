// Figure 7 (scale-out): what one more replica buys. 1 and then 3 bot processes (the compiled entry
// point, as `npm start` runs it) share one fresh PostgreSQL database; the local crew service and the
// Slack stand-in run on loopback, the stand-in taking a Slack-like time for every Web API call.
//
// 50 runs are in flight at all times (closed loop): each run is started with a signed kickoff-form
// submission, its crew pauses for review after each of its tasks, and the bench approves every review
// 200 ms after its controls are visible (BENCH_SCALE_THINK_MS), then starts a new run when one ends. Kickoffs and clicks are
// spread over the replicas in turn, as a load balancer would; each replica gets the webhooks of the
// runs it started (its own PUBLIC_URL).
//
// Figures: reviews visible per second in a measuring window after a warm-up, and the time from the
// crew sending a task webhook to the review with its controls being visible in Slack (the stand-in
// answered the chat.postMessage or chat.update that showed the buttons).
//
//   npm run bench -- scale-out          (also in BENCH_FULL=1 npm run bench, with a longer window)
//   BENCH_SLACK_LATENCY_MS=30-80        per-call Slack latency in ms, a uniform range or one number
//   BENCH_SCALE_RUNS=50  BENCH_SCALE_REPLICAS=1,3  BENCH_SCALE_WINDOW_MS  BENCH_SCALE_WARMUP_MS  BENCH_SCALE_THINK_MS=200
import fs from "node:fs";
import pg from "pg";
import { APPROVE_ACTION } from "../src/adapters/slack/blocks/index.js";
import { type SimTask, startCrewService } from "../src/sim/crew-service.js";
import { type FakeSlack, startFakeSlack } from "../test/support/fake-slack.js";
import { freePort } from "../test/support/harness.js";
import { type SlackRequester, slackRequester } from "../test/support/slack-requests.js";
import { createTestDatabaseUrl } from "../test/support/test-database.js";
import { buildBot, type Child, cpuMs, cpuStallMs, machineCpu, rssMb, startBot, submitKickoff } from "./child.js";
import { BOT_TOKEN, CREW_NAME, CREW_TOKEN, type Figure, postgresReachable, round, SIGNING_SECRET, sleep, summarize, tmpDir, until } from "./lib.js";
import { startNodeFlags } from "./node-flags.js";

const FULL = process.env.BENCH_FULL === "1";
const RUNS = Number(process.env.BENCH_SCALE_RUNS ?? 50);
const REPLICAS = (process.env.BENCH_SCALE_REPLICAS ?? "1,3").split(",").map(Number);
const WARMUP_MS = Number(process.env.BENCH_SCALE_WARMUP_MS ?? 5000);
const WINDOW_MS = Number(process.env.BENCH_SCALE_WINDOW_MS ?? (FULL ? 40_000 : 20_000));
/** After the window: reviews of task webhooks sent in the window may still appear. */
const GRACE_MS = 5000;
/** A run whose next review does not show within this long is abandoned (counted, not waited for). */
const REVIEW_TIMEOUT_MS = 30_000;
const LATENCY = parseLatency(process.env.BENCH_SLACK_LATENCY_MS ?? "30-80");
/**
 * How long the reviewer takes to click once the review is visible. Not zero: a click that lands within
 * milliseconds of the post can beat the bot's own record of the message's ts and is refused
 * ("does not belong to the review it names"); no person clicks that fast.
 */
const THINK_MS = Number(process.env.BENCH_SCALE_THINK_MS ?? 200);
const RATIO_TARGET = 2;
const P99_TARGET_MS = 250;

// Three tasks per run, each paused for review; 50 ms of crew work and one step (progress) each.
const TASKS: SimTask[] = [
  { id: "task-research", name: "research_task", agent: "Senior Research Analyst", humanInput: true, delayMs: 50, steps: 1 },
  { id: "task-outline", name: "outline_task", agent: "Editor", humanInput: true, delayMs: 50, steps: 1 },
  { id: "task-write", name: "writing_task", agent: "Content Writer", humanInput: true, delayMs: 50, steps: 1 },
];

export function parseLatency(text: string): { min: number; max: number } {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(?:-\s*(\d+(?:\.\d+)?))?\s*$/.exec(text);
  if (!m) throw new Error(`BENCH_SLACK_LATENCY_MS (the Slack stand-in's time per Web API call) must be "ms" or "min-max", got "${text}"`);
  const min = Number(m[1]);
  const max = m[2] === undefined ? min : Number(m[2]);
  if (max < min) throw new Error(`BENCH_SLACK_LATENCY_MS (the Slack stand-in's time per Web API call): ${max} is below ${min}`);
  return { min, max };
}

const latencyText = `${LATENCY.min}${LATENCY.max !== LATENCY.min ? `–${LATENCY.max}` : ""} ms`;

export async function scaleOut(): Promise<Figure[]> {
  if (!(await postgresReachable()))
    return [{ figure: "scale-out", metric: "reviews visible per second", value: null, unit: "/s", pass: false, note: "PostgreSQL not reachable at 127.0.0.1:5432 — skipped" }];
  buildBot();
  const results: Measurement[] = [];
  for (const n of REPLICAS) {
    process.stderr.write(`bench: scale-out with ${n} replica(s)…\n`);
    results.push(await measure(n));
  }
  const one = results.find((r) => r.replicas === 1);
  const figures: Figure[] = [];
  for (const r of results) {
    const figure = `scale-out (${r.replicas} ${r.replicas === 1 ? "replica" : "replicas"}, PostgreSQL)`;
    const ratio = one && r !== one && one.rate > 0 ? r.rate / one.rate : undefined;
    figures.push({
      figure,
      metric: "reviews visible per second",
      value: round(r.rate, 1),
      unit: "/s",
      ...(ratio !== undefined ? { baseline: round(one!.rate, 1), ratio: round(ratio, 2), target: `≥ ${RATIO_TARGET}× 1 replica`, pass: ratio >= RATIO_TARGET } : {}),
      note: r.note,
    });
    figures.push({
      figure,
      metric: "task webhook → review visible p50",
      value: round(r.visible.p50, 0),
      unit: "ms",
      note: `task output first visible (task message or review) p50 ${round(r.output.p50, 0)} ms, p99 ${round(r.output.p99, 0)} ms; approve click → /resume at the crew p50 ${round(r.clickToResume.p50, 0)} ms, p99 ${round(r.clickToResume.p99, 0)} ms (n=${r.clickToResume.n}) (diagnostics)`,
    });
    figures.push({
      figure,
      metric: "task webhook → review visible p99",
      value: round(r.visible.p99, 0),
      unit: "ms",
      target: `< ${P99_TARGET_MS} ms`,
      pass: r.visible.n > 0 && r.missing === 0 && r.visible.p99 < P99_TARGET_MS,
      note: `n=${r.visible.n} task webhooks sent in the window, p90 ${round(r.visible.p90, 0)} ms, max ${round(r.visible.max, 0)} ms${r.missing ? `; ${r.missing} reviews not visible ${GRACE_MS / 1000} s after the window` : ""}`,
    });
  }
  return figures;
}

interface Measurement {
  replicas: number;
  rate: number;
  visible: ReturnType<typeof summarize>;
  output: ReturnType<typeof summarize>;
  clickToResume: ReturnType<typeof summarize>;
  missing: number;
  note: string;
}

interface ReviewSeen {
  reviewId: string;
  channel: string;
  task: string;
  ts: string;
  threadTs?: string;
  blockId: string;
  at: number;
}

/** Watches the stand-in's calls as they are answered: when each review's controls, and each task's output, became visible. */
class SlackWatch {
  readonly reviews = new Map<string, ReviewSeen>();
  /** channel/task → when its output was first visible (task message or review). */
  readonly outputs = new Map<string, number>();
  /** channel/ts of review messages updated without their controls (decided). */
  readonly closed = new Set<string>();
  /** channel/task → when its review controls were first visible. */
  readonly controls = new Map<string, number>();
  /** Every Web API call's time at the stand-in (arrival → answer), for how many were in flight. */
  readonly spans: { from: number; to: number }[] = [];
  private cursor = 0;
  private readonly waiting = new Map<string, { queue: ReviewSeen[]; wake?: () => void }>();
  private readonly off: () => void;

  constructor(private readonly slack: FakeSlack) {
    this.off = slack.onChange(() => this.scan());
  }

  stop(): void {
    this.off();
  }

  /** The next review (with controls) in this run's channel, or undefined after timeoutMs. */
  async next(channel: string, timeoutMs: number): Promise<ReviewSeen | undefined> {
    const slot = this.slot(channel);
    if (!slot.queue.length) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, timeoutMs);
        slot.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      slot.wake = undefined;
    }
    return slot.queue.shift();
  }

  forget(channel: string): void {
    this.waiting.delete(channel);
  }

  private slot(channel: string) {
    let slot = this.waiting.get(channel);
    if (!slot) this.waiting.set(channel, (slot = { queue: [] }));
    return slot;
  }

  private scan(): void {
    const now = Date.now(); // the listener runs as the stand-in answers: the effect is visible now
    const calls = this.slack.calls;
    for (; this.cursor < calls.length; this.cursor++) {
      const call = calls[this.cursor]!;
      this.spans.push({ from: call.at, to: now });
      if (call.error || (call.method !== "chat.postMessage" && call.method !== "chat.update")) continue;
      const channel = String(call.args.channel ?? "");
      const actions = Array.isArray(call.args.blocks) ? (call.args.blocks as any[]).find((b) => b?.type === "actions") : undefined;
      const approve = actions?.elements?.find((e: any) => e?.action_id === APPROVE_ACTION);
      // A message updated without its buttons (e.g. "Approved: …"): its review is decided.
      if (!approve && call.method === "chat.update") this.closed.add(`${channel}/${call.args.ts}`);
      const text = String(call.args.text ?? "");
      const m = /^(?:✔️ Task finished|📝 Review needed): (.+?)(?: \(round \d+\))?$/.exec(text);
      if (!m) continue;
      const key = `${channel}/${m[1]}`;
      if (!this.outputs.has(key)) this.outputs.set(key, now);
      if (!approve || this.reviews.has(approve.value)) continue;
      // chat.update names its message; a posted review's ts is in the stand-in's state.
      const ts = call.method === "chat.update" ? String(call.args.ts) : this.slack.messages(channel).find((msg) => JSON.stringify(msg.blocks ?? []).includes(approve.value))?.ts;
      if (!ts) continue;
      const seen: ReviewSeen = { reviewId: approve.value, channel, task: m[1]!, ts, blockId: actions.block_id, at: now };
      if (call.args.thread_ts) seen.threadTs = String(call.args.thread_ts);
      this.reviews.set(seen.reviewId, seen);
      if (!this.controls.has(key)) this.controls.set(key, now);
      const slot = this.waiting.get(channel);
      if (slot) {
        slot.queue.push(seen);
        slot.wake?.();
      }
    }
  }
}

async function queryRows<T>(url: string, sql: string, params: unknown[]): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows as T[];
  } finally {
    await client.end();
  }
}

function tally(items: string[]): string {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(item, (counts.get(item) ?? 0) + 1);
  return [...counts].map(([text, n]) => `${n}× "${text}"`).join(", ");
}

async function measure(replicaCount: number): Promise<Measurement> {
  const db = await createTestDatabaseUrl();
  const slack = await startFakeSlack({ latencyMs: LATENCY });
  const crew = await startCrewService({ token: CREW_TOKEN, inputs: ["topic"], tasks: TASKS });
  const flags = startNodeFlags();
  const replicas: { url: string; child: Child; requests: SlackRequester; dataDir: string }[] = [];
  const watch = new SlackWatch(slack);
  try {
    const start = async () => {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const dataDir = tmpDir("scale");
      const child = await startBot(
        {
          SLACK_BOT_TOKEN: BOT_TOKEN,
          SLACK_SIGNING_SECRET: SIGNING_SECRET,
          SLACK_API_URL: slack.url,
          PORT: String(port),
          PUBLIC_URL: url,
          DATA_DIR: dataDir,
          DATABASE_URL: db.url,
          CREW_BASE_URL: crew.url,
          CREW_TOKEN: CREW_TOKEN,
          CREW_NAME: CREW_NAME,
          LOG_LEVEL: process.env.BENCH_DEBUG ? "warn" : "error",
        },
        port,
        flags,
      );
      const requests = slackRequester({ baseUrl: url, signingSecret: SIGNING_SECRET, responseUrlBase: slack.responseUrlBase });
      replicas.push({ url, child, requests, dataDir });
    };
    await start(); // the first one migrates the fresh database
    await Promise.all(Array.from({ length: replicaCount - 1 }, start));

    const t0 = Date.now();
    const windowStart = t0 + WARMUP_MS;
    const windowEnd = windowStart + WINDOW_MS;
    const stats = { kickoffs: 0, kickoffErrors: 0, clicks: 0, clickErrors: 0, abandoned: 0, refused: 0, unconfirmed: 0, runsDone: 0 };
    let rr = 0;
    const nextReplica = () => replicas[rr++ % replicas.length]!;
    let cpu0: number[] = [];
    let machine0 = machineCpu();
    let stall0 = cpuStallMs();
    let snapAt = Date.now();
    let bench0 = process.cpuUsage();
    const atWindowStart = sleep(WARMUP_MS).then(() => {
      cpu0 = replicas.map((r) => cpuMs(r.child.proc.pid!));
      machine0 = machineCpu();
      stall0 = cpuStallMs();
      snapAt = Date.now();
      bench0 = process.cpuUsage();
    });

    const clicks: { channel: string; at: number }[] = [];
    const worker = async (w: number) => {
      // Kickoffs spread over the first half of the warm-up: no thundering herd of 50 identical runs.
      await sleep((w * WARMUP_MS) / (2 * RUNS));
      for (let k = 0; Date.now() < windowEnd; k++) {
        const channel = `C0S${replicaCount}W${w}K${k}`;
        const status = await submitKickoff(slack, nextReplica().requests, { channel, topic: channel, trigger: `bench-scale-${replicaCount}-${w}-${k}` });
        if (status !== 200) {
          stats.kickoffErrors++;
          await sleep(100);
          continue;
        }
        stats.kickoffs++;
        let decided = 0;
        while (decided < TASKS.length && Date.now() < windowEnd) {
          const review = await watch.next(channel, Math.min(REVIEW_TIMEOUT_MS, windowEnd - Date.now()));
          if (!review) {
            if (Date.now() < windowEnd) stats.abandoned++;
            break;
          }
          // A click the bot refuses is answered privately; the reviewer then clicks again (at most 3 times).
          for (let attempt = 0; attempt < 3; attempt++) {
            await sleep(THINK_MS);
            if (Date.now() >= windowEnd) break;
            const told = slack.ephemerals.filter((e) => e.channel === channel).length;
            if (attempt === 0) clicks.push({ channel, at: Date.now() });
            const res = await nextReplica().requests.blockAction({
              user_id: "U0BENCH",
              channel_id: channel,
              message_ts: review.ts,
              ...(review.threadTs ? { thread_ts: review.threadTs } : {}),
              action: { action_id: APPROVE_ACTION, block_id: review.blockId, value: review.reviewId },
            });
            if (res.status === 200) stats.clicks++;
            else stats.clickErrors++;
            const refused = () => slack.ephemerals.filter((e) => e.channel === channel).length > told;
            const settled = await until(() => watch.closed.has(`${channel}/${review.ts}`) || refused(), 10_000, 25);
            if (!settled) stats.unconfirmed++;
            if (!refused()) break;
            stats.refused++;
          }
          decided++;
        }
        if (decided === TASKS.length) stats.runsDone++;
        watch.forget(channel);
      }
    };
    await Promise.all(Array.from({ length: RUNS }, (_, w) => worker(w)));
    await atWindowStart;
    const windowCpu = replicas.map((r, i) => cpuMs(r.child.proc.pid!) - (cpu0[i] ?? 0));
    const machine1 = machineCpu();
    const stall1 = cpuStallMs();
    const stalled = stall0 !== undefined && stall1 !== undefined ? (stall1 - stall0) / Math.max(1, Date.now() - snapAt) : undefined;
    const benchCpu = process.cpuUsage(bench0);
    const rss = replicas.map((r) => rssMb(r.child.proc.pid!));
    await sleep(GRACE_MS);
    if (process.env.BENCH_DEBUG) {
      for (const c of slack.calls.slice(0, 40))
        process.stderr.write(
          `[slack] ${c.at - t0} ${c.method} ${c.error ?? ""} ${String(c.args.text ?? "").slice(0, 60)} ts=${c.args.ts ?? ""} blocks=${JSON.stringify(c.args.blocks ?? []).includes(APPROVE_ACTION)}\n`,
        );
      for (const r of crew.requests.slice(0, 20)) process.stderr.write(`[crew] ${r.at - t0} ${r.method} ${r.path}\n`);
    }
    // Recorded → processed for the task and input callbacks received in the window (queue wait plus the work).
    const lags = await queryRows<{ ms: number }>(
      db.url,
      `SELECT EXTRACT(EPOCH FROM ("processedAt" - "receivedAt")) * 1000 AS ms FROM "WebhookEvent" WHERE kind IN ('task', 'input') AND "processedAt" IS NOT NULL AND "receivedAt" >= $1 AND "receivedAt" < $2`,
      [new Date(windowStart), new Date(windowEnd)],
    );
    const lag = summarize(lags.map((r) => Number(r.ms)));
    const inFlight = watch.spans.reduce((sum, sp) => sum + Math.max(0, Math.min(sp.to, windowEnd) - Math.max(sp.from, windowStart)), 0) / WINDOW_MS;
    watch.stop();

    const inWindow = [...watch.reviews.values()].filter((r) => r.at >= windowStart && r.at < windowEnd);
    const rate = inWindow.length / (WINDOW_MS / 1000);
    // Task webhooks the crew sent in the window, matched to their run (topic = channel) and task name.
    const visible: number[] = [];
    const output: number[] = [];
    let missing = 0;
    for (const d of crew.webhookDeliveries) {
      if (d.kind !== "task" || d.sentAt < windowStart || d.sentAt >= windowEnd) continue;
      const body = d.body as { kickoff_id?: string; name?: string };
      const channel = crew.executions.get(body.kickoff_id ?? "")?.inputs.topic;
      const key = `${channel}/${body.name}`;
      const shown = watch.controls.get(key);
      if (shown === undefined) missing++;
      else visible.push(shown - d.sentAt);
      const out = watch.outputs.get(key);
      if (out !== undefined) output.push(out - d.sentAt);
    }
    // Click → the crew receiving /resume for that run (the decision's way back to the crew).
    const resumes = new Map<string, number[]>();
    for (const r of crew.requests) {
      if (r.path !== "/resume") continue;
      const channel = crew.executions.get(String((r.body as { execution_id?: string })?.execution_id))?.inputs.topic;
      if (channel) resumes.set(channel, [...(resumes.get(channel) ?? []), r.at]);
    }
    const clickToResume = summarize(
      clicks
        .filter((c) => c.at >= windowStart && c.at < windowEnd)
        .flatMap((c) => {
          const at = resumes.get(c.channel)?.find((t) => t >= c.at);
          return at === undefined ? [] : [at - c.at];
        }),
    );
    const busy = (machine1.busy - machine0.busy) / Math.max(1, machine1.total - machine0.total);
    const errors = replicas.reduce(
      (n, r) =>
        n +
        r.child.stderr
          .join("")
          .split("\n")
          .filter((l) => /error/i.test(l)).length,
      0,
    );
    const botCpu = windowCpu.reduce((a, b) => a + b, 0);
    const windowCalls = slack.calls.filter((c) => c.at >= windowStart && c.at < windowEnd);
    const slackCalls = windowCalls.length;
    const byMethod: Record<string, number> = {};
    for (const c of windowCalls) byMethod[c.method] = (byMethod[c.method] ?? 0) + 1;
    const note = [
      `${inWindow.length} reviews in a ${WINDOW_MS / 1000} s window after ${WARMUP_MS / 1000} s of warm-up`,
      `${RUNS} runs in flight (${TASKS.length} reviewed tasks each, approved ${THINK_MS} ms after it is visible): ${stats.kickoffs} kickoffs, ${stats.clicks} approve clicks, ${stats.runsDone} runs fully approved${stats.unconfirmed ? `, ${stats.unconfirmed} clicks whose review message did not lose its buttons within 10 s` : ""}`,
      `Slack stand-in ${latencyText} per call, ${round(slackCalls / (WINDOW_MS / 1000), 0)} calls/s (${Object.entries(byMethod)
        .map(([m, n]) => `${m} ${n}`)
        .join(", ")})`,
      `bot CPU ${round(botCpu / Math.max(1, inWindow.length), 1)} ms per review (${windowCpu.map((c) => `${round(c / 1000, 1)} s`).join(" + ")}); machine CPU ${round(busy * 100, 0)}% busy${stalled !== undefined ? `, tasks waiting for a CPU ${round(stalled * 100, 0)}% of the time` : ""}; bench process ${round((benchCpu.user + benchCpu.system) / 1000 / 1000, 1)} s CPU`,
      `task and input callbacks recorded → processed p50 ${round(lag.p50, 0)} ms, p99 ${round(lag.p99, 0)} ms (n=${lag.n}); ${round(inFlight, 1)} Slack calls in flight on average`,
      `RSS ${rss.join(" / ")} MB`,
      ...(slack.ephemerals.length ? [`clickers told privately: ${tally(slack.ephemerals.map((e) => (e.text ?? "").slice(0, 90)))}`] : []),
      ...(stats.kickoffErrors || stats.clickErrors || stats.abandoned
        ? [`${stats.kickoffErrors} kickoff and ${stats.clickErrors} click answers not 200, ${stats.abandoned} runs abandoned (no review within ${REVIEW_TIMEOUT_MS / 1000} s)`]
        : []),
      ...(errors
        ? [
            `${errors} error lines logged by the bots: ${replicas
              .flatMap((r) => r.child.stderr)
              .join("")
              .slice(0, 300)}`,
          ]
        : []),
    ].join("; ");
    return { replicas: replicaCount, rate, visible: summarize(visible), output: summarize(output), clickToResume, missing, note };
  } finally {
    watch.stop();
    await Promise.all(replicas.map((r) => r.child.stop()));
    await crew.close().catch(() => {});
    await slack.close().catch(() => {});
    for (const r of replicas) fs.rmSync(r.dataDir, { recursive: true, force: true });
    await db.drop().catch(() => {});
  }
}
