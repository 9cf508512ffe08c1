// Figure 6: start-up time (fresh database and second start, migrations included) and the resident
// memory of the real entry point, compiled as `npm start` runs it (node dist/src/main.js), idle and
// after many finished runs; on the embedded database and on PostgreSQL.
import fs from "node:fs";
import { startCrewService } from "../src/sim/crew-service.js";
import { startFakeSlack } from "../test/support/fake-slack.js";
import { freePort } from "../test/support/harness.js";
import { slackRequester } from "../test/support/slack-requests.js";
import { createTestDatabaseUrl } from "../test/support/test-database.js";
import { buildBot, type Child, cpuMs, rssMb, startBot, submitKickoff } from "./child.js";
import { BOT_TOKEN, CREW_NAME, CREW_TOKEN, type Figure, postgresReachable, round, SIGNING_SECRET, sleep, tmpDir, until } from "./lib.js";
import { startNodeFlags } from "./node-flags.js";

const FULL = process.env.BENCH_FULL === "1";
const RUNS = Number(process.env.BENCH_RUNS ?? 1000);
// The embedded database finishes runs several times slower: by default fewer runs keep the bench
// within minutes (each figure names the count it measured); BENCH_FULL=1 drives the full 1,000.
const EMBEDDED_RUNS = Number(process.env.BENCH_RUNS_EMBEDDED ?? (FULL ? 1000 : 300));
const CONCURRENCY = 8;
const DRIVE_BUDGET_MS = Number(process.env.BENCH_DRIVE_BUDGET_MS ?? (FULL ? 150_000 : 40_000));
// Resident-memory targets: the embedded database (PGlite in the bot's process) is allowed more.
const RSS_TARGET_MB = { embedded: 200, postgres: 150 } as const;

export async function startupMemory(): Promise<Figure[]> {
  // What `npm start` runs: compile once, then time the compiled entry point.
  buildBot();
  const only = process.env.BENCH_DB; // "embedded" or "postgres" to measure one of them
  const flags = startNodeFlags();
  const figures = only === "postgres" ? [] : await startupMemoryOn("embedded", EMBEDDED_RUNS, flags);
  if (only !== "embedded" && (await postgresReachable())) {
    figures.push(...(await startupMemoryOn("postgres", RUNS, flags)));
    // The same load with V8's default heap settings: what the start flags save and what they cost.
    if (flags.length > 0 && process.env.BENCH_SKIP_DEFAULTS !== "1") {
      const defaults = await startupMemoryOn("postgres", RUNS, []);
      figures.push(
        ...defaults
          .filter((f) => /RSS after .* not growing|CPU per/.test(`${f.metric} ${f.target ?? ""}`) || f.metric.startsWith("peak") || f.metric === "RSS idle")
          .map(({ target: _t, pass: _p, ...f }) => ({
            ...f,
            figure: "startup-memory (postgres, V8 defaults)",
            note: `for comparison, node dist/src/main.js without ${flags.join(" ")}; ${f.note ?? ""}`,
          })),
      );
    }
  }
  return figures;
}

async function startupMemoryOn(db: "embedded" | "postgres", RUNS: number, flags: string[]): Promise<Figure[]> {
  const figure = `startup-memory (${db})`;
  const pg = db === "postgres" ? await createTestDatabaseUrl() : undefined;
  const slack = await startFakeSlack();
  const crew = await startCrewService({ token: CREW_TOKEN, inputs: ["topic"], tasks: [] });
  const dataDir = tmpDir("startup");
  const port = await freePort();
  const botUrl = `http://127.0.0.1:${port}`;
  const env = {
    SLACK_BOT_TOKEN: BOT_TOKEN,
    SLACK_SIGNING_SECRET: SIGNING_SECRET,
    SLACK_API_URL: slack.url,
    PORT: String(port),
    PUBLIC_URL: botUrl,
    DATA_DIR: dataDir,
    CREW_BASE_URL: crew.url,
    CREW_TOKEN: CREW_TOKEN,
    CREW_NAME: CREW_NAME,
    LOG_LEVEL: process.env.BENCH_DEBUG ? "warn" : "error",
    DATABASE_URL: pg?.url ?? "",
  };
  let child: Child | undefined;
  try {
    const fresh = await startBot(env, port, flags);
    await fresh.stop();
    child = await startBot(env, port, flags);
    const second = child.startMs;
    await sleep(2000);
    const idle = rssMb(child.proc.pid!);

    // Finished runs, driven the way Slack does it: a signed kickoff-form submission per run; the crew
    // (no tasks) completes at once and calls the crew webhook; the bot posts the completion notice.
    const requests = slackRequester({ baseUrl: botUrl, signingSecret: SIGNING_SECRET, responseUrlBase: slack.responseUrlBase });
    let next = 0;
    let submitted = 0;
    const completions = () => crew.webhookDeliveries.filter((d) => d.kind === "crew" && d.status && d.status < 300).length;
    const settle = async (n: number) => {
      const done = await until(() => completions() >= n, 30_000, 50);
      if (!done || process.env.BENCH_DEBUG) {
        const kinds: Record<string, number> = {};
        for (const d of crew.webhookDeliveries) kinds[`${d.kind}:${d.status ?? d.error}`] = (kinds[`${d.kind}:${d.status ?? d.error}`] ?? 0) + 1;
        const states: Record<string, number> = {};
        for (const e of crew.executions.values()) states[e.state] = (states[e.state] ?? 0) + 1;
        process.stderr.write(`startup-memory: ${completions()}/${n} completions; crew executions ${JSON.stringify(states)}; deliveries ${JSON.stringify(kinds)}\n`);
      }
      // Then until the bot's Slack calls stop (completion notices posted).
      let last = -1;
      await until(
        () => {
          const now = slack.calls.length;
          const quiet = now === last;
          last = now;
          return quiet;
        },
        30_000,
        400,
      );
    };
    let budgetEnd = 0;
    const drive = async (upTo: number) => {
      // Bounded: at most DRIVE_BUDGET_MS of submissions per half; the figure says how many ran.
      budgetEnd = performance.now() + DRIVE_BUDGET_MS;
      const worker = async () => {
        for (;;) {
          if (next >= upTo || performance.now() > budgetEnd) return;
          const i = next++;
          const channel = `C0MEM${i % 50}`;
          const status = await submitKickoff(slack, requests, { channel, topic: `memory run ${i}`, trigger: `bench-mem-${i}` });
          if (status === 200) submitted++;
          if (process.env.BENCH_DEBUG && i % 50 === 0)
            process.stderr.write(`startup-memory: run ${i} submitted (${status}), ${completions()} completions, ${slack.calls.length} Slack calls\n`);
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    };
    const half = Math.floor(RUNS / 2);
    const t0 = performance.now();
    const cpu0 = cpuMs(child.proc.pid!);
    let peak = idle;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssMb(child!.proc.pid!));
    }, 250);
    await drive(half);
    const firstHalf = next;
    await settle(firstHalf);
    const afterHalf = rssMb(child.proc.pid!);
    await drive(RUNS);
    await settle(next);
    const runsMs = performance.now() - t0;
    clearInterval(sampler);
    const botCpuMs = cpuMs(child.proc.pid!) - cpu0;
    const afterAll = rssMb(child.proc.pid!);
    const finished = completions();
    const growth = afterAll - afterHalf;
    const maxRss = Math.max(idle, afterHalf, afterAll);
    const limit = RSS_TARGET_MB[db];
    return [
      {
        figure,
        metric: "start → /healthz 200 (fresh database)",
        value: round(fresh.startMs, 0),
        unit: "ms",
        target: "< 3000 ms",
        pass: fresh.startMs < 3000,
        note: `node ${[...flags, "dist/src/main.js"].join(" ")}${flags.length ? " (as npm start runs it)" : ""}, migrations applied to an empty database`,
      },
      { figure, metric: "start → /healthz 200 (second start)", value: round(second, 0), unit: "ms", target: "< 3000 ms", pass: second < 3000 },
      { figure, metric: "RSS idle", value: idle, unit: "MB", target: `< ${limit} MB`, pass: idle < limit },
      { figure, metric: `RSS after ${firstHalf} finished runs`, value: afterHalf, unit: "MB", target: `< ${limit} MB`, pass: afterHalf < limit },
      {
        figure,
        metric: `RSS after ${finished} finished runs`,
        value: afterAll,
        unit: "MB",
        target: `< ${limit} MB, not growing`,
        pass: maxRss < limit && growth < 10,
        note: `growth ${round(growth, 1)} MB over the second ${finished - firstHalf} runs (asked ${RUNS}${RUNS < 1000 ? "; BENCH_FULL=1 asks 1,000" : ""}); ${finished}/${RUNS} crew completions accepted, ${submitted} submissions answered 200, ${round(runsMs / 1000, 1)} s for the runs (${CONCURRENCY} at a time); ${slack.calls.length} Slack calls`,
      },
      { figure, metric: "peak RSS while runs were arriving", value: peak, unit: "MB", note: "sampled every 250 ms (diagnostic)" },
      {
        figure,
        metric: "bot CPU per finished run",
        value: round(botCpuMs / Math.max(1, finished), 2),
        unit: "ms",
        note: `user + system time of the bot process over the runs, ${round(botCpuMs / 1000, 1)} s in all (diagnostic: the cost of the heap settings)`,
      },
    ];
  } finally {
    await child?.stop();
    await crew.close();
    await slack.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    await pg?.drop();
  }
}
