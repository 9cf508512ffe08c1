// Shared pieces of the benchmark: load generation (in a worker thread), statistics, a bot on
// loopback with fake Slack and the local crew service, and result records.
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { type Crewline, type CrewlineOptions, createCrewline, webhookUrlBuilder } from "../src/app.js";
import type { AppConfig } from "../src/config/config.js";
import type { Logger } from "../src/log/log.js";
import { type SimCrewOptions, type SimCrewService, startCrewService } from "../src/sim/crew-service.js";
import { openDatabase } from "../src/store/db/database.js";
import type { Execution } from "../src/usecases/ports.js";
import { type FakeSlack, type FakeSlackOptions, startFakeSlack } from "../test/support/fake-slack.js";
import { freePort } from "../test/support/harness.js";
import { type SlackRequester, slackRequester } from "../test/support/slack-requests.js";
import { createTestDatabaseUrl } from "../test/support/test-database.js";

export const SIGNING_SECRET = "bench-signing-secret";
export const BOT_TOKEN = "xoxb-bench-bot-token";
export const CREW_TOKEN = "bench-crew-token";
export const CREW_NAME = "research";
export const PG_ADMIN_URL = process.env.CREWLINE_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

// ------------------------------------------------------------------ results

export interface Figure {
  figure: string;
  metric: string;
  value: number | string | null;
  unit: string;
  target?: string;
  /** undefined: informational, no target. */
  pass?: boolean;
  baseline?: number;
  ratio?: number;
  note?: string;
}

export const round = (n: number, digits = 2) => (Number.isFinite(n) ? Math.round(n * 10 ** digits) / 10 ** digits : n);

export function tmpDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `crewline-bench-${prefix}-`));
}

// ------------------------------------------------------------------ statistics

export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx]!;
}

export function summarize(values: ArrayLike<number>) {
  const sorted = Float64Array.from(values).sort();
  const sum = sorted.reduce((a, b) => a + b, 0);
  return {
    n: sorted.length,
    mean: sum / (sorted.length || 1),
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : NaN,
  };
}

// ------------------------------------------------------------------ load

export interface LoadRequest {
  path: string;
  body: string;
  /** Extra request headers (content-type is application/json unless given). */
  headers?: Record<string, string>;
}

export interface LoadResult {
  n: number;
  elapsedMs: number;
  rps: number;
  statuses: Record<string, number>;
  errors: number;
  latency: ReturnType<typeof summarize>;
}

const WORKER = new URL("./load-worker.mjs", import.meta.url);

export function runLoad(origin: string, requests: LoadRequest[], opts: { concurrency: number; mode?: "closed" | "paced"; ratePerSec?: number }): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER, {
      workerData: { origin, requests, concurrency: opts.concurrency, mode: opts.mode ?? "closed", ratePerSec: opts.ratePerSec ?? 0 },
      execArgv: [],
    });
    worker.once("message", (m: { latencies: Float64Array; statuses: Record<string, number>; errors: number; elapsedMs: number }) => {
      resolve({
        n: requests.length,
        elapsedMs: m.elapsedMs,
        rps: (requests.length / m.elapsedMs) * 1000,
        statuses: m.statuses,
        errors: m.errors,
        latency: summarize(m.latencies),
      });
      void worker.terminate();
    });
    worker.once("error", reject);
  });
}

/** The reference server: node:http reading the body and answering a small JSON 200, like the bot's intake. */
export async function startBaselineServer(): Promise<{ origin: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
      const text = JSON.stringify({ ok: true, message: "accepted" });
      res.writeHead(202, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
      res.end(text);
    });
  });
  server.keepAliveTimeout = 30_000;
  return listenOnLoopback(server);
}

/** Listens on a free loopback port: its origin, and a close that also ends kept-alive connections. */
export async function listenOnLoopback(server: http.Server): Promise<{ origin: string; close(): Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function until(probe: () => boolean | Promise<boolean>, timeoutMs: number, intervalMs = 25): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await probe()) return true;
    await sleep(intervalMs);
  }
  return probe();
}

// ------------------------------------------------------------------ a bot on loopback

export interface CountingLogger extends Logger {
  counts: { warn: number; error: number };
  samples: string[];
}

export function countingLogger(): CountingLogger {
  const counts = { warn: 0, error: 0 };
  const samples: string[] = [];
  const keep = (level: string, msg: string, fields?: Record<string, unknown>) => {
    if (samples.length < 10) samples.push(`${level}: ${msg}${fields?.err ? ` (${(fields.err as Error).message ?? fields.err})` : ""}`);
  };
  return {
    counts,
    samples,
    debug: () => {},
    info: () => {},
    warn: (msg, fields) => {
      counts.warn++;
      keep("warn", msg, fields);
    },
    error: (msg, fields) => {
      counts.error++;
      keep("error", msg, fields);
    },
  };
}

export interface BenchBot {
  bot: Crewline;
  botUrl: string;
  slack: FakeSlack;
  crew: SimCrewService;
  requests: SlackRequester;
  log: CountingLogger;
  db: "embedded" | "postgres";
  /** Creates a kicked-off execution and returns it with its webhook paths (path part of the URL). */
  execution(channelId: string, kickoffId?: string): Promise<{ execution: Execution; step: string; task: string; crew: string }>;
  close(): Promise<void>;
}

export interface BenchBotOptions {
  db?: "embedded" | "postgres";
  slack?: FakeSlackOptions;
  crew?: Partial<SimCrewOptions>;
  progressIntervalMs?: number;
  /** Outbox tuning (the Slack budget, concurrency). */
  outbox?: CrewlineOptions["outbox"];
}

export async function startBenchBot(opts: BenchBotOptions = {}): Promise<BenchBot> {
  const slack = await startFakeSlack(opts.slack);
  const crew = await startCrewService({ token: CREW_TOKEN, ...opts.crew });
  const port = await freePort();
  const botUrl = `http://127.0.0.1:${port}`;
  const kind = opts.db ?? "embedded";
  let dropPg: (() => Promise<void>) | undefined;
  let databaseUrl: string | undefined;
  const dataDir = tmpDir("db");
  if (kind === "postgres") {
    const created = await createTestDatabaseUrl();
    databaseUrl = created.url;
    dropPg = created.drop;
  }
  const config: AppConfig = {
    slack: { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET, apiUrl: slack.url },
    port,
    publicUrl: botUrl,
    databaseUrl,
    dataDir,
    crews: [{ name: CREW_NAME, baseUrl: crew.url, token: CREW_TOKEN }],
  };
  const log = countingLogger();
  // The database is opened from the config exactly as in production (on-disk PGlite for embedded).
  const bot = createCrewline(config, {
    log,
    progressIntervalMs: opts.progressIntervalMs,
    ...(opts.outbox ? { outbox: opts.outbox } : {}),
    // BENCH_MEMDB=1: in-memory PGlite (as the tests use) instead of the on-disk data dir production uses.
    ...(kind === "embedded" && process.env.BENCH_MEMDB === "1" ? { database: openDatabase({}) } : {}),
  });
  await bot.start();
  const urls = webhookUrlBuilder(botUrl);
  const requests = slackRequester({ baseUrl: botUrl, signingSecret: SIGNING_SECRET, responseUrlBase: slack.responseUrlBase });
  let seq = 0;
  return {
    bot,
    botUrl,
    slack,
    crew,
    requests,
    log,
    db: kind,
    async execution(channelId, kickoffId) {
      const created = await bot.lifecycle.runs.create({ crewName: CREW_NAME, teamId: "T0TEAM", channelId, userId: "U0BENCH", inputs: { topic: "benchmarks" }, webhooks: true });
      const execution = await bot.lifecycle.runs.kickedOff(created.id, kickoffId ?? `bench-kickoff-${++seq}-${created.id.slice(0, 8)}`);
      const u = urls(execution)!;
      const p = (url: string) => new URL(url).pathname;
      return { execution, step: p(u.stepWebhookUrl), task: p(u.taskWebhookUrl), crew: p(u.crewWebhookUrl) };
    },
    async close() {
      await bot.stop().catch(() => {});
      await crew.close().catch(() => {});
      await slack.close().catch(() => {});
      if (dropPg) await dropPg().catch(() => {});
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export async function postgresReachable(): Promise<boolean> {
  const pg = (await import("pg")).default;
  const client = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 1500 });
  try {
    await client.connect();
    await client.query("SELECT 1");
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

// ------------------------------------------------------------------ bodies

export const stepBody = (i: number, kickoffId: string) =>
  JSON.stringify(
    i % 2 === 0
      ? { thought: `Researcher: planning step ${i} of the benchmark work`, kickoff_id: kickoffId }
      : { thought: "Looking up material", tool: "search_internet", tool_input: JSON.stringify({ query: `benchmark ${i}` }), result: `Found ${i} sources.`, kickoff_id: kickoffId },
  );

export const taskBody = (i: number, kickoffId: string, tag: string) =>
  JSON.stringify({
    kickoff_id: kickoffId,
    task_id: `task-${i}`,
    name: `bench_task_${i}`,
    agent: { role: "Senior Research Analyst" },
    description: "Carry out one benchmark step.",
    output: `# Result ${tag}/${i}\n\n- finding one about ${tag}\n- finding two (${i})\n\nA short paragraph of output for task ${i} of ${tag}.`,
  });

export const crewBody = (kickoffId: string) => JSON.stringify({ kickoff_id: kickoffId, state: "SUCCESS", result: "All done." });
