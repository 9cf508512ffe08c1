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
// Runs are spread over many workspaces and channels, as real traffic at this scale is, so that the
// Slack budget each workspace and channel has (src/outbox/tiers.ts; the stand-in enforces the same
// tiers) is not what limits: the bot runs in OAuth mode and the bench installs BENCH_SCALE_WORKSPACES
// (200) workspaces through its install flow (/slack/install, Slack's redirect, oauth.v2.access), each
// with its own token; run n goes to workspace n mod W and, in it, to one of BENCH_SCALE_CHANNELS channels.
// BENCH_SCALE_WORKSPACES=1 runs one workspace on SLACK_BOT_TOKEN instead: the budget of one workspace.
//
// Figures: reviews visible per second in a measuring window after a warm-up, and the time from the
// crew sending a task webhook to the review with its controls being visible in Slack (the stand-in
// answered the chat.postMessage or chat.update that showed the buttons).
//
//   npm run bench -- scale-out          (also in BENCH_FULL=1 npm run bench, with a longer window)
//   BENCH_SLACK_LATENCY_MS=30-80        per-call Slack latency in ms, a uniform range or one number
//   BENCH_SCALE_RUNS=50  BENCH_SCALE_REPLICAS=1,3  BENCH_SCALE_WINDOW_MS  BENCH_SCALE_WARMUP_MS  BENCH_SCALE_THINK_MS=200
//   BENCH_SCALE_WORKSPACES=200  BENCH_SCALE_CHANNELS (per workspace; default 200 / workspaces, at least 1)
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import pg from "pg";
import { APPROVE_ACTION } from "../src/adapters/slack/blocks/index.js";
import { bucketKey, TIERS, tierOf } from "../src/outbox/tiers.js";
import { type SimTask, startCrewService } from "../src/sim/crew-service.js";
import { type FakeSlack, startFakeSlack } from "../test/support/fake-slack.js";
import { freePort } from "../test/support/harness.js";
import { parseExposition } from "../test/support/metrics.js";
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
const P99_TARGET_MS = 500;
/** Workspaces the runs are spread over (1: one workspace on SLACK_BOT_TOKEN, no install). */
const WORKSPACES = Math.max(1, Number(process.env.BENCH_SCALE_WORKSPACES ?? 200));
/** Channels per workspace: 200 channels in all by default, however many workspaces. */
const CHANNELS = Math.max(1, Number(process.env.BENCH_SCALE_CHANNELS ?? Math.ceil(200 / WORKSPACES)));
const OAUTH = WORKSPACES > 1;
const CLIENT_ID = "1111.2222";
const CLIENT_SECRET = "bench-client-secret";
const STATE_SECRET = "bench-state-secret-0123456789";
/** Installs at once while setting up the workspaces. */
const INSTALLS_AT_ONCE = 8;

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
    const figure = `scale-out (${r.replicas} ${r.replicas === 1 ? "replica" : "replicas"}, ${WORKSPACES} ${WORKSPACES === 1 ? "workspace" : "workspaces"}, PostgreSQL)`;
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

/** Each run's topic names it; the announcement shows it, so a thread (and every message in it) maps to its run. */
const TOPIC = /bench-run-\d+-\d+-\d+/;

/** Watches the stand-in's calls as they are answered: when each review's controls, and each task's output, became visible. */
class SlackWatch {
  readonly reviews = new Map<string, ReviewSeen>();
  /** topic/task → when its output was first visible (task message or review). */
  readonly outputs = new Map<string, number>();
  /** channel/ts of review messages updated without their controls (decided). */
  readonly closed = new Set<string>();
  /** topic/task → when its review controls were first visible. */
  readonly controls = new Map<string, number>();
  /** Every Web API call's time at the stand-in (arrival → answer), for how many were in flight. */
  readonly spans: { from: number; to: number }[] = [];
  /** channel/ts of every message posted → the run (topic) whose announcement or thread it is in. */
  private readonly topicOf = new Map<string, string>();
  private cursor = 0;
  private readonly waiting = new Map<string, { queue: ReviewSeen[]; wake?: () => void }>();
  private readonly off: () => void;

  constructor(private readonly slack: FakeSlack) {
    this.off = slack.onChange(() => this.scan());
  }

  stop(): void {
    this.off();
  }

  /** The next review (with controls) of this run, or undefined after timeoutMs. */
  async next(topic: string, timeoutMs: number): Promise<ReviewSeen | undefined> {
    const slot = this.slot(topic);
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

  forget(topic: string): void {
    this.waiting.delete(topic);
  }

  private slot(topic: string) {
    let slot = this.waiting.get(topic);
    if (!slot) this.waiting.set(topic, (slot = { queue: [] }));
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
      const ts = call.ts ?? String(call.args.ts ?? "");
      const threadTs = call.args.thread_ts === undefined ? undefined : String(call.args.thread_ts);
      // A top-level post is a run's announcement (it shows the topic); a message in a thread is its run's.
      let topic = this.topicOf.get(`${channel}/${ts}`);
      if (!topic && call.method === "chat.postMessage") {
        topic = threadTs ? this.topicOf.get(`${channel}/${threadTs}`) : TOPIC.exec(JSON.stringify(call.args.blocks ?? ""))?.[0];
        if (topic) this.topicOf.set(`${channel}/${ts}`, topic);
      }
      if (!topic) continue;
      const actions = Array.isArray(call.args.blocks) ? (call.args.blocks as any[]).find((b) => b?.type === "actions") : undefined;
      const approve = actions?.elements?.find((e: any) => e?.action_id === APPROVE_ACTION);
      // A message updated without its buttons (e.g. "Approved: …"): its review is decided.
      if (!approve && call.method === "chat.update") this.closed.add(`${channel}/${ts}`);
      const text = String(call.args.text ?? "");
      const m = /^(?:✔️ Task finished|📝 Review needed): (.+?)(?: \(round \d+\))?$/.exec(text);
      if (!m) continue;
      const key = `${topic}/${m[1]}`;
      if (!this.outputs.has(key)) this.outputs.set(key, now);
      if (!approve || this.reviews.has(approve.value)) continue;
      const seen: ReviewSeen = { reviewId: approve.value, channel, task: m[1]!, ts, blockId: actions.block_id, at: now };
      if (threadTs) seen.threadTs = threadTs;
      this.reviews.set(seen.reviewId, seen);
      if (!this.controls.has(key)) this.controls.set(key, now);
      const slot = this.waiting.get(topic);
      if (slot) {
        slot.queue.push(seen);
        slot.wake?.();
      }
    }
  }
}

/** What a browser does to install the app in a workspace: the install page, Slack's approval, the redirect back. */
async function installWorkspace(botUrl: string, slack: FakeSlack, teamId: string): Promise<void> {
  const page = await fetch(`${botUrl}/slack/install`, { redirect: "manual" });
  const cookie = page.headers.get("set-cookie")?.split(";")[0];
  const link = /href="(https:[^"]+)"/.exec(await page.text())?.[1]?.replace(/&amp;/g, "&");
  const state = link ? new URL(link).searchParams.get("state") : null;
  if (!cookie || !state) throw new Error(`the install page of ${botUrl} gave no state (HTTP ${page.status})`);
  const code = slack.issueInstallCode({ teamId, teamName: `Bench ${teamId}` });
  const done = await fetch(`${botUrl}/slack/oauth_redirect?code=${encodeURIComponent(code)}&state=${encodeURIComponent(state)}`, {
    redirect: "manual",
    headers: { cookie },
  });
  await done.arrayBuffer();
  if (done.status !== 200) throw new Error(`installing ${teamId} through ${botUrl} answered HTTP ${done.status}`);
}

/** The budget waits each replica counted so far, by method (crewline_slack_budget_waits_total). */
async function budgetWaits(metricsUrls: string[]): Promise<Record<string, number>> {
  const byMethod: Record<string, number> = {};
  for (const url of metricsUrls) {
    const text = await fetch(url).then((r) => r.text());
    for (const s of parseExposition(text)) if (s.name === "crewline_slack_budget_waits_total") byMethod[s.labels.method!] = (byMethod[s.labels.method!] ?? 0) + s.value;
  }
  return byMethod;
}

/**
 * What Slack's budget did in the window: 429s by method, effects the bot put back for want of a token
 * (its metric), and for each limited method the busiest bucket (workspace, or channel for posts) against
 * what the tier allows in the window (its burst plus the sustained rate).
 */
function budgetNote(calls: FakeSlack["calls"], slack: FakeSlack, waits0: Record<string, number>, waits1: Record<string, number> | undefined): string {
  const list = (r: Record<string, number>) =>
    Object.entries(r)
      .map(([method, n]) => `${method} ${n}`)
      .join(", ");
  // The bench opens the kickoff modals itself (views.open, Tier 4), standing in for the bot's /crew handler.
  const limited: Record<string, number> = {};
  let modal429s = 0;
  for (const c of calls) {
    if (c.error !== "ratelimited") continue;
    if (c.method === "views.open") modal429s++;
    else limited[c.method] = (limited[c.method] ?? 0) + 1;
  }
  const buckets = new Map<string, Map<string, number>>();
  for (const c of calls) {
    const rate = c.error || c.method === "views.open" ? undefined : tierOf(c.method);
    if (!rate) continue;
    const key = bucketKey({ team: c.team ?? "T0TEAM", method: c.method, channel: String(c.args.channel ?? c.args.channel_id ?? "") }, rate);
    const perMethod = buckets.get(c.method) ?? new Map<string, number>();
    perMethod.set(key, (perMethod.get(key) ?? 0) + 1);
    buckets.set(c.method, perMethod);
  }
  const busiest = [...buckets].map(([method, perKey]) => {
    const rate = tierOf(method, TIERS)!;
    const allowed = Math.floor(rate.burst + (rate.perMinute * WINDOW_MS) / 60_000);
    return `${method} ${Math.max(...perKey.values())} of ${allowed} in its busiest ${rate.scope}`;
  });
  const waits: Record<string, number> = {};
  for (const [method, n] of Object.entries(waits1 ?? {})) if (n > (waits0[method] ?? 0)) waits[method] = n - (waits0[method] ?? 0);
  const total = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);
  return [
    `Slack's budget in the window: ${total(limited)} 429s to the bot${total(limited) ? ` (${list(limited)})` : ""}${modal429s ? `, ${modal429s} to the kickoff modals the bench opens (views.open, waited out)` : ""}; ${total(slack.tierLimited)} 429s in the whole run`,
    `effects put back waiting for a token: ${waits1 === undefined ? "not read" : total(waits) ? list(waits) : "none"}`,
    `calls against the tier (burst + rate × window): ${busiest.join(", ")}`,
  ].join("; ");
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
  // Slack's tiers enforced as Slack would (429 with Retry-After): a budget the bot overspends shows as 429s.
  const slack = await startFakeSlack({ latencyMs: LATENCY, tiers: true, ...(OAUTH ? { oauthClient: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET } } : {}) });
  const crew = await startCrewService({ token: CREW_TOKEN, inputs: ["topic"], tasks: TASKS });
  const flags = startNodeFlags();
  const replicas: { url: string; metricsUrl: string; child: Child; requests: SlackRequester; dataDir: string }[] = [];
  const encryptionKey = randomBytes(32).toString("base64");
  const watch = new SlackWatch(slack);
  try {
    const start = async () => {
      const port = await freePort();
      const metricsPort = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const dataDir = tmpDir("scale");
      const slackAuth: Record<string, string> = OAUTH
        ? { SLACK_CLIENT_ID: CLIENT_ID, SLACK_CLIENT_SECRET: CLIENT_SECRET, SLACK_STATE_SECRET: STATE_SECRET, ENCRYPTION_KEY: encryptionKey, CREW_TEAMS: "*" }
        : { SLACK_BOT_TOKEN: BOT_TOKEN };
      const child = await startBot(
        {
          ...slackAuth,
          METRICS_PORT: String(metricsPort),
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
      replicas.push({ url, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`, child, requests, dataDir });
    };
    await start(); // the first one migrates the fresh database
    await Promise.all(Array.from({ length: replicaCount - 1 }, start));

    // Every workspace installs the app, through the replicas in turn (they share the installations).
    const teams = OAUTH ? Array.from({ length: WORKSPACES }, (_, i) => `T0B${String(i).padStart(3, "0")}`) : ["T0TEAM"];
    const installStart = Date.now();
    if (OAUTH) {
      let next = 0;
      await Promise.all(
        Array.from({ length: INSTALLS_AT_ONCE }, async () => {
          for (let i = next++; i < teams.length; i = next++) await installWorkspace(replicas[i % replicas.length]!.url, slack, teams[i]!);
        }),
      );
    }
    const installMs = Date.now() - installStart;
    const tokens = teams.map((team) => (OAUTH ? slack.botTokenOf(team)! : BOT_TOKEN));
    let runsStarted = 0;
    /** Which workspace each channel is in: every call about a channel must carry that workspace's token. */
    const teamOfChannel = new Map<string, string>();
    /** Run n: workspace n mod W, and in it channel ⌊n / W⌋ mod C. */
    const placeOf = (n: number) => {
      const ws = n % teams.length;
      const channel = `C0S${replicaCount}T${ws}C${Math.floor(n / teams.length) % CHANNELS}`;
      teamOfChannel.set(channel, teams[ws]!);
      return { team: teams[ws]!, token: tokens[ws]!, channel };
    };

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
    let waits0: Record<string, number> = {};
    const atWindowStart = sleep(WARMUP_MS).then(async () => {
      cpu0 = replicas.map((r) => cpuMs(r.child.proc.pid!));
      machine0 = machineCpu();
      stall0 = cpuStallMs();
      snapAt = Date.now();
      bench0 = process.cpuUsage();
      waits0 = await budgetWaits(replicas.map((r) => r.metricsUrl)).catch(() => ({}));
    });

    const clicks: { topic: string; at: number }[] = [];
    const worker = async (w: number) => {
      // Kickoffs spread over the first half of the warm-up: no thundering herd of 50 identical runs.
      await sleep((w * WARMUP_MS) / (2 * RUNS));
      for (let k = 0; Date.now() < windowEnd; k++) {
        const { team, token, channel } = placeOf(runsStarted++);
        const topic = `bench-run-${replicaCount}-${w}-${k}`;
        const status = await submitKickoff(slack, nextReplica().requests, { channel, topic, team, token, trigger: `bench-scale-${replicaCount}-${w}-${k}` });
        if (status !== 200) {
          stats.kickoffErrors++;
          await sleep(100);
          continue;
        }
        stats.kickoffs++;
        let decided = 0;
        while (decided < TASKS.length && Date.now() < windowEnd) {
          const review = await watch.next(topic, Math.min(REVIEW_TIMEOUT_MS, windowEnd - Date.now()));
          if (!review) {
            if (Date.now() < windowEnd) stats.abandoned++;
            break;
          }
          // A click the bot refuses is answered privately; the reviewer then clicks again (at most 3 times).
          for (let attempt = 0; attempt < 3; attempt++) {
            await sleep(THINK_MS);
            if (Date.now() >= windowEnd) break;
            const told = slack.ephemerals.filter((e) => e.channel === channel).length;
            if (attempt === 0) clicks.push({ topic, at: Date.now() });
            const res = await nextReplica().requests.blockAction({
              user_id: "U0BENCH",
              team_id: team,
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
        watch.forget(topic);
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
    const waits1 = await budgetWaits(replicas.map((r) => r.metricsUrl)).catch(() => undefined);
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
      const topic = crew.executions.get(body.kickoff_id ?? "")?.inputs.topic;
      const key = `${topic}/${body.name}`;
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
      const topic = crew.executions.get(String((r.body as { execution_id?: string })?.execution_id))?.inputs.topic;
      if (topic) resumes.set(topic, [...(resumes.get(topic) ?? []), r.at]);
    }
    const clickToResume = summarize(
      clicks
        .filter((c) => c.at >= windowStart && c.at < windowEnd)
        .flatMap((c) => {
          const at = resumes.get(c.topic)?.find((t) => t >= c.at);
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
      OAUTH
        ? `${teams.length} workspaces (installed through /slack/install and oauth.v2.access in ${round(installMs / 1000, 1)} s) × ${CHANNELS} ${CHANNELS === 1 ? "channel" : "channels"}, run n in workspace n mod ${teams.length}`
        : `one workspace (SLACK_BOT_TOKEN) × ${CHANNELS} ${CHANNELS === 1 ? "channel" : "channels"}`,
      budgetNote(windowCalls, slack, waits0, waits1),
      ...(OAUTH
        ? [
            `calls about a run's channel made with another workspace's token: ${
              slack.calls.filter((c) => {
                const team = teamOfChannel.get(String(c.args.channel ?? c.args.channel_id ?? ""));
                return team !== undefined && c.token !== undefined && c.team !== team;
              }).length
            } of ${slack.calls.length}`,
          ]
        : []),
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
