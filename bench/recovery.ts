// Figure kill-recovery: how soon a review is decidable again after the bot holding its Slack post is
// killed with SIGKILL. The bots are the compiled entry point (as `npm start` runs it) in child
// processes, with the default claim lease (CLAIM_STALE_MS 60 s) and heartbeat (dead after 8 s).
//
// - embedded database: one bot; the runs' review posts are held at the Slack stand-in (the call is
//   under way, its claim taken), the bot is killed and started again on the same data folder. Figure:
//   restart (the new process answering /healthz) → every held review visible with its controls.
// - PostgreSQL, three replicas: the posts are held on one replica (the others start once it holds
//   them), which is then killed. Figure: kill → every held review visible with its controls.
//
//   npm run bench -- kill-recovery          BENCH_KILL_RUNS=4
import fs from "node:fs";
import { APPROVE_ACTION } from "../src/adapters/slack/blocks/index.js";
import { type SimTask, startCrewService } from "../src/sim/crew-service.js";
import { type FakeSlack, startFakeSlack } from "../test/support/fake-slack.js";
import { freePort } from "../test/support/harness.js";
import { slackRequester } from "../test/support/slack-requests.js";
import { createTestDatabaseUrl } from "../test/support/test-database.js";
import { buildBot, type Child, cpuStallMs, startBot, submitKickoff } from "./child.js";
import { BOT_TOKEN, CREW_NAME, CREW_TOKEN, type Figure, postgresReachable, round, SIGNING_SECRET, tmpDir, until } from "./lib.js";
import { startNodeFlags } from "./node-flags.js";

const RUNS = Number(process.env.BENCH_KILL_RUNS ?? 4);
// The task runs long enough for the bench to hold its post once the run's announcement is out.
const TASKS: SimTask[] = [{ id: "task-draft", name: "draft_task", agent: "Writer", humanInput: true, delayMs: 10_000, steps: 0 }];

interface Bot {
  child: Child;
  port: number;
  url: string;
}

async function start(slack: FakeSlack, crewUrl: string, env: Record<string, string>, port?: number): Promise<Bot> {
  const p = port ?? (await freePort());
  const url = `http://127.0.0.1:${p}`;
  const child = await startBot(
    {
      SLACK_BOT_TOKEN: BOT_TOKEN,
      SLACK_SIGNING_SECRET: SIGNING_SECRET,
      SLACK_API_URL: slack.url,
      PORT: String(p),
      PUBLIC_URL: url,
      CREW_BASE_URL: crewUrl,
      CREW_TOKEN,
      CREW_NAME,
      LOG_LEVEL: "error",
      ...env,
    },
    p,
    startNodeFlags(),
  );
  return { child, port: p, url };
}

function kill(bot: Bot): Promise<void> {
  return new Promise((resolve) => {
    bot.child.proc.once("exit", () => resolve());
    bot.child.proc.kill("SIGKILL");
  });
}

/** Channels whose review shows its controls. */
function decidable(slack: FakeSlack, channels: string[]): number {
  return channels.filter((c) => slack.messages(c).some((m) => JSON.stringify(m.blocks ?? []).includes(APPROVE_ACTION))).length;
}

/** Starts RUNS runs on `bot` and holds each one's review post at the stand-in; resolves once all are under way. */
async function holdReviewPosts(slack: FakeSlack, bot: Bot, tag: string): Promise<string[]> {
  const requests = slackRequester({ baseUrl: bot.url, signingSecret: SIGNING_SECRET, responseUrlBase: slack.responseUrlBase });
  const channels = Array.from({ length: RUNS }, (_, i) => `C0KILL${tag}${i}`);
  for (const [i, channel] of channels.entries()) {
    const status = await submitKickoff(slack, requests, { channel, topic: channel, trigger: `bench-kill-${tag}-${i}` });
    if (status !== 200) throw new Error(`kickoff answered ${status}`);
  }
  // Every announcement out: the next posts are the reviews (steps: 0, no progress message).
  await until(() => channels.every((c) => slack.messages(c).length >= 1), 60_000, 50);
  slack.delayNext("chat.postMessage", 600_000, RUNS);
  const held = await until(
    () => slack.inFlight.filter((c) => c.method === "chat.postMessage" && JSON.stringify(c.args.blocks ?? []).includes("draft_task")).length >= RUNS,
    60_000,
    50,
  );
  if (!held) throw new Error("the review posts were not all under way");
  return channels;
}

async function timeToDecidable(slack: FakeSlack, channels: string[], from: number): Promise<{ ms: number; shown: number }> {
  await until(() => decidable(slack, channels) === channels.length, 60_000, 20);
  const shown = decidable(slack, channels);
  return { ms: Date.now() - from, shown };
}

async function embedded(): Promise<Figure[]> {
  const slack = await startFakeSlack();
  const crew = await startCrewService({ token: CREW_TOKEN, inputs: ["topic"], tasks: TASKS });
  const dataDir = tmpDir("kill");
  const env = { DATA_DIR: dataDir };
  try {
    const first = await start(slack, crew.url, env);
    const channels = await holdReviewPosts(slack, first, "E");
    await kill(first);
    const spawned = Date.now();
    const second = await start(slack, crew.url, env, first.port);
    const healthy = Date.now();
    const { ms, shown } = await timeToDecidable(slack, channels, healthy);
    await second.child.stop();
    return [
      {
        figure: "kill-recovery (embedded)",
        metric: "restart → held reviews decidable",
        value: round(ms, 0),
        unit: "ms",
        target: "< 5000 ms",
        pass: shown === RUNS && ms < 5000,
        note: `${shown}/${RUNS} reviews whose post was under way at kill -9; the restarted process answered /healthz ${round((healthy - spawned) / 1000, 1)} s after it was spawned; claim lease 60 s (default)`,
      },
    ];
  } finally {
    await crew.close().catch(() => {});
    await slack.close().catch(() => {});
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function postgres(): Promise<Figure[]> {
  if (!(await postgresReachable()))
    return [
      {
        figure: "kill-recovery (PostgreSQL, 3 replicas)",
        metric: "kill → held reviews decidable",
        value: null,
        unit: "ms",
        pass: false,
        note: "PostgreSQL not reachable — skipped",
      },
    ];
  const slack = await startFakeSlack();
  const crew = await startCrewService({ token: CREW_TOKEN, inputs: ["topic"], tasks: TASKS });
  const db = await createTestDatabaseUrl();
  const dirs: string[] = [];
  const bots: Bot[] = [];
  const env = () => {
    const dir = tmpDir("kill-pg");
    dirs.push(dir);
    return { DATA_DIR: dir, DATABASE_URL: db.url };
  };
  try {
    // The other two are up first; the doomed replica starts the runs, so its outbox is nudged and
    // claims their posts, and it is killed well before its Web API calls would time out (20 s).
    bots.push(...(await Promise.all([start(slack, crew.url, env()), start(slack, crew.url, env())])));
    const doomed = await start(slack, crew.url, env());
    const channels = await holdReviewPosts(slack, doomed, "P");
    const before = decidable(slack, channels);
    await kill(doomed);
    const killed = Date.now();
    const { ms, shown } = await timeToDecidable(slack, channels, killed);
    return [
      {
        figure: "kill-recovery (PostgreSQL, 3 replicas)",
        metric: "kill → held reviews decidable",
        value: round(ms, 0),
        unit: "ms",
        target: "< 15000 ms",
        pass: shown === RUNS && before === 0 && ms < 15_000,
        note: `${shown}/${RUNS} reviews whose post the killed replica had under way (${before} shown before the kill); claim lease 60 s (default), heartbeat every 2 s, dead after 8 s`,
      },
    ];
  } finally {
    await Promise.all(bots.map((b) => b.child.stop()));
    await crew.close().catch(() => {});
    await slack.close().catch(() => {});
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
    await db.drop().catch(() => {});
  }
}

export async function killRecovery(): Promise<Figure[]> {
  buildBot();
  const stall0 = cpuStallMs();
  const t0 = Date.now();
  const figures = [...(await embedded()), ...(await postgres())];
  const stall1 = cpuStallMs();
  if (stall0 !== undefined && stall1 !== undefined)
    for (const f of figures) f.note = `${f.note}; tasks waiting for a CPU ${round(((stall1 - stall0) / (Date.now() - t0)) * 100, 0)}% of the time`;
  return figures;
}
