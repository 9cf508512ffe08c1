// Figure 6: start-up time (fresh database and second start, migrations included) and the resident
// memory of the real entry point, compiled as `npm start` runs it (node dist/src/main.js), idle and
// after many finished runs; on the embedded database and on PostgreSQL.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bindForm } from "../src/kickoff/form-binding.js";
import { encodeMetadata } from "../src/kickoff/modal.js";
import { startCrewService } from "../src/sim/crew-service.js";
import { inputBlockId, KICKOFF_VIEW_CALLBACK } from "../src/slack/blocks/index.js";
import { startFakeSlack } from "../test/support/fake-slack.js";
import { freePort } from "../test/support/harness.js";
import { slackRequester } from "../test/support/slack-requests.js";
import { createTestDatabaseUrl } from "../test/support/test-database.js";
import { BOT_TOKEN, CREW_NAME, CREW_TOKEN, type Figure, postgresReachable, round, SIGNING_SECRET, sleep, tmpDir, until } from "./lib.js";
import { startNodeFlags } from "./node-flags.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const RUNS = Number(process.env.BENCH_RUNS ?? 1000);
// The embedded database finishes runs several times slower; fewer keep the bench within minutes.
const EMBEDDED_RUNS = Number(process.env.BENCH_RUNS_EMBEDDED ?? 300);
const CONCURRENCY = 8;
const DRIVE_BUDGET_MS = Number(process.env.BENCH_DRIVE_BUDGET_MS ?? 40_000);

/** CPU time (user + system) the process has used so far, in ms: a steadier cost measure than wall time on shared cores. */
function cpuMs(pid: number): number {
  // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}
const CLOCK_TICKS = 100;

function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return round(kb / 1024, 1);
}

interface Child {
  proc: ChildProcess;
  startMs: number;
  stderr: string[];
  stop(): Promise<void>;
}

async function startBot(env: Record<string, string>, port: number, flags: string[]): Promise<Child> {
  const t0 = performance.now();
  const proc = spawn(process.execPath, [...flags, "dist/src/main.js"], {
    cwd: ROOT,
    env: { ...process.env, NODE_OPTIONS: process.env.BENCH_BOT_NODE_OPTIONS ?? "", ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  if (process.env.BENCH_DEBUG) proc.stderr!.on("data", (d: Buffer) => process.stderr.write(`[bot] ${d}`));
  const stderr: string[] = [];
  proc.stderr!.on("data", (d: Buffer) => {
    if (stderr.length < 200) stderr.push(d.toString());
  });
  let exited = false;
  proc.once("exit", () => (exited = true));
  const ok = await until(
    async () => {
      if (exited) return true;
      try {
        const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(500) });
        await res.arrayBuffer();
        return res.status === 200;
      } catch {
        return false;
      }
    },
    30_000,
    10,
  );
  const startMs = performance.now() - t0;
  if (!ok || exited) throw new Error(`bot did not become healthy: ${stderr.join("").slice(-500)}`);
  return {
    proc,
    startMs,
    stderr,
    stop: () =>
      new Promise<void>((resolve) => {
        if (exited) return resolve();
        const timer = setTimeout(() => proc.kill("SIGKILL"), 5000);
        proc.once("exit", () => {
          clearTimeout(timer);
          resolve();
        });
        proc.kill("SIGTERM");
      }),
  };
}

export async function startupMemory(): Promise<Figure[]> {
  // What `npm start` runs: compile once, then time the compiled entry point.
  execFileSync("npm", ["run", "build", "--silent"], { cwd: ROOT, stdio: "ignore" });
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
    const api = async (method: string, body: Record<string, unknown>) => {
      const res = await fetch(slack.url + method, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${BOT_TOKEN}` },
        body: JSON.stringify(body),
      });
      return (await res.json()) as any;
    };
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
          const opened = await api("views.open", { trigger_id: `bench-mem-${i}`, view: { type: "modal", title: { type: "plain_text", text: "Loading" }, blocks: [] } });
          const res = await requests.viewSubmission({
            user_id: "U0BENCH",
            view: {
              id: opened.view?.id,
              callback_id: KICKOFF_VIEW_CALLBACK,
              // A form as the bot seals it for this user (keyed by the signing secret), one per run.
              private_metadata: encodeMetadata(
                bindForm(SIGNING_SECRET, { crew: CREW_NAME, channel, team: "T0TEAM", user: "U0BENCH", inputs: [{ name: "topic", required: true }] }),
              ),
              state: { values: { [inputBlockId("topic")]: { value: { type: "plain_text_input", value: `memory run ${i}` } } } },
            },
          });
          if (res.status === 200) submitted++;
          if (process.env.BENCH_DEBUG && i % 50 === 0)
            process.stderr.write(`startup-memory: run ${i} submitted (${res.status}), ${completions()} completions, ${slack.calls.length} Slack calls\n`);
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
      { figure, metric: "RSS idle", value: idle, unit: "MB", target: "< 150 MB", pass: idle < 150 },
      { figure, metric: `RSS after ${firstHalf} finished runs`, value: afterHalf, unit: "MB", target: "< 150 MB", pass: afterHalf < 150 },
      {
        figure,
        metric: `RSS after ${finished} finished runs`,
        value: afterAll,
        unit: "MB",
        target: "< 150 MB, not growing",
        pass: maxRss < 150 && growth < 10,
        note: `growth ${round(growth, 1)} MB over the second ${finished - firstHalf} runs (asked ${RUNS}); ${finished}/${RUNS} crew completions accepted, ${submitted} submissions answered 200, ${round(runsMs / 1000, 1)} s for the runs (${CONCURRENCY} at a time); ${slack.calls.length} Slack calls`,
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
