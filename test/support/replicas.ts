// Bot replicas as real child processes (`src/main.ts`, transpiled once per test run: replica-build.ts),
// started, killed with SIGKILL and driven the way Slack drives them (signed requests), for the suites
// that need whole processes.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, afterEach } from "vitest";
import { APPROVE_ACTION, inputBlockId } from "../../src/adapters/slack/blocks/index.js";
import { type SimCrewService, type SimTask, startCrewService } from "../../src/sim/crew-service.js";
import { type FakeSlack, startFakeSlack } from "./fake-slack.js";
import { BOT_TOKEN, CHANNEL, CREW_TOKEN, eventually, freePort, SIGNING_SECRET, USER } from "./harness.js";
import { replicaEntry } from "./replica-build.js";
import { type SlackRequester, slackRequester } from "./slack-requests.js";
import { createTestDatabaseUrl, EMBEDDED_TEMPLATE_ENV } from "./test-database.js";

export interface Replica {
  name: string;
  url: string;
  port: number;
  proc: ChildProcess;
  requests: SlackRequester;
  output: () => string;
  exited: Promise<number | null>;
}

const children = new Set<ChildProcess>();
/** What each replica of the current test printed (LOG_LEVEL=warn): shown when the test fails, as CI keeps nothing else. */
const printed = new Map<string, () => string>();
/** Cleanups of the current test (servers to close, databases to drop), run after it in reverse order. */
export const cleanups: (() => Promise<unknown>)[] = [];

/** Registers the hooks that kill every replica left running and run the cleanups (call once per test file). */
export function killReplicasAfterEach(): void {
  afterEach(async ({ task }) => {
    for (const child of children) child.kill("SIGKILL");
    children.clear();
    if (task.result?.state === "fail") for (const [name, output] of printed) console.error(`--- replica ${name} printed:\n${output().slice(-8000) || "(nothing)"}`);
    printed.clear();
    while (cleanups.length) await cleanups.pop()!().catch(() => {});
  });
  afterAll(async () => {
    for (const child of children) child.kill("SIGKILL");
  });
}

// Short timings: leases of a killed replica expire after 1.5 s, and a Slack post it had claimed but
// not made is taken over after 6 s (CLAIM_STALE_MS; each of an effect's Web API calls gives up after 1.2 s) by another replica's outbox worker.
export const POLLING = { POLL_INTERVAL_MS: "100", POLL_MIN_BACKOFF_MS: "150", POLL_MAX_BACKOFF_MS: "600", POLL_LEASE_MS: "1500", POLL_SWEEP_MS: "1000", CLAIM_STALE_MS: "6000" };

/**
 * A new data folder for an embedded replica, holding the run's migrated template (global-setup.ts) where
 * the bot keeps its database (src/store/db/adapters.ts pgliteDir): a process starts on it in seconds
 * rather than after an initdb and every migration. Without a template (a script), an empty folder.
 */
export function seededDataDir(): string {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-replica-"));
  const template = process.env[EMBEDDED_TEMPLATE_ENV];
  if (template) {
    const dir = path.join(dataDir, "pglite");
    fs.mkdirSync(dir);
    // The tarball's names start with "/" (tar strips it, and would say so on stderr).
    execFileSync("tar", ["-xf", template, "-C", dir], { stdio: ["ignore", "ignore", "pipe"] });
  }
  return dataDir;
}

/** Starts `src/main.ts` (its build for this test run, or through tsx) as a child process: on PostgreSQL (`databaseUrl`) or on the embedded database in `dataDir`. */
export async function startReplica(
  name: string,
  /** Without `crew`, the replica runs with no crew configured (a flow-only deployment: give FLOW_* in `extra`). */
  env: { databaseUrl?: string; dataDir?: string; slack: FakeSlack; crew?: SimCrewService; webhooks: boolean; port?: number; extra?: Record<string, string> },
): Promise<Replica> {
  const port = env.port ?? (await freePort());
  const url = `http://127.0.0.1:${port}`;
  const dataDir = env.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), "crewline-replica-"));
  const proc = spawn(process.execPath, replicaEntry(), {
    env: {
      PATH: process.env.PATH!,
      LOG_LEVEL: "warn",
      SLACK_BOT_TOKEN: BOT_TOKEN,
      SLACK_SIGNING_SECRET: SIGNING_SECRET,
      SLACK_API_URL: env.slack.url,
      PORT: String(port),
      ...(env.webhooks ? { PUBLIC_URL: url } : {}),
      ...(env.databaseUrl ? { DATABASE_URL: env.databaseUrl } : {}),
      DATA_DIR: dataDir,
      ...(env.crew ? { CREW_BASE_URL: env.crew.url, CREW_TOKEN, CREW_NAME: "research" } : {}),
      ...POLLING,
      ...env.extra,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(proc);
  let output = "";
  proc.stdout!.on("data", (d) => (output += d));
  proc.stderr!.on("data", (d) => (output += d));
  printed.set(printed.has(name) ? `${name} (${printed.size + 1})` : name, () => output);
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)));
  let gone: number | null | undefined;
  void exited.then((code) => (gone = code));
  // Until it answers /healthz; a process that stopped never will: say why at once (its output), not after the time-out.
  const deadline = Date.now() + 300_000;
  for (;;) {
    if (gone !== undefined) throw new Error(`${name} exited (code ${gone}) before answering /healthz\n${output}`);
    const up = await fetch(`${url}/healthz`)
      .then((r) => r.status === 200)
      .catch(() => false);
    if (up) break;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${name} /healthz\n${output}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const requests = slackRequester({ baseUrl: url, signingSecret: SIGNING_SECRET, responseUrlBase: env.slack.responseUrlBase });
  return { name, url, port, proc, requests, output: () => output, exited };
}

export function kill(replica: Replica): Promise<number | null> {
  replica.proc.kill("SIGKILL");
  children.delete(replica.proc);
  return replica.exited;
}

/** The kickoff form's private metadata and callback id, fetched once through `/crew`. */
export async function kickoffForm(slack: FakeSlack, replica: Replica) {
  const before = slack.callsTo("views.update").length;
  await replica.requests.command({ text: "", user_id: USER, channel_id: CHANNEL });
  return eventually(
    () =>
      slack
        .callsTo("views.update")
        .slice(before)
        .map((c) => c.args.view as any)
        .find((v) => v?.submit),
    { what: "the kickoff form", timeoutMs: 20_000 },
  );
}

export function submitKickoff(replica: Replica, form: any, topic: string) {
  return replica.requests.viewSubmission({
    user_id: USER,
    view: {
      callback_id: form.callback_id,
      private_metadata: form.private_metadata,
      state: { values: { [inputBlockId("topic")]: { value: { type: "plain_text_input", value: topic } } } },
    },
  });
}

/** Review messages with buttons still showing: review id → where to click. */
export function pendingReviews(slack: FakeSlack) {
  const out = new Map<string, { ts: string; threadTs?: string; blockId: string }>();
  for (const msg of slack.messages(CHANNEL)) {
    const text = JSON.stringify(msg.blocks ?? []);
    if (!text.includes(APPROVE_ACTION)) continue;
    const actions = (msg.blocks as any[]).find((b) => b.type === "actions");
    const approve = actions.elements.find((e: any) => e.action_id === APPROVE_ACTION);
    out.set(approve.value, { ts: msg.ts, threadTs: msg.thread_ts, blockId: actions.block_id });
  }
  return out;
}

export function approve(replica: Replica, reviewId: string, where: { ts: string; threadTs?: string; blockId: string }, user = USER) {
  return replica.requests.blockAction({
    user_id: user,
    channel_id: CHANNEL,
    message_ts: where.ts,
    thread_ts: where.threadTs,
    action: { action_id: APPROVE_ACTION, block_id: where.blockId, value: reviewId },
  });
}

/**
 * Posts of task outputs (a task message, or a review posted as one), per run thread and task: every
 * task here is approved in its first round, so that pair names one review. A task message becomes
 * its review in place, so each must be posted exactly once.
 */

/** The Slack stand-in, a crew service running `tasks` and a fresh PostgreSQL database, all cleaned up after the test. */
export async function replicaServices(tasks: SimTask[]): Promise<{ slack: FakeSlack; crew: SimCrewService; db: { url: string } }> {
  const slack = await startFakeSlack();
  const crew = await startCrewService({ token: CREW_TOKEN, tasks });
  const db = await createTestDatabaseUrl();
  cleanups.push(
    () => slack.close(),
    () => crew.close(),
    () => db.drop(),
  );
  return { slack, crew, db };
}

/**
 * settled() for replicas in other processes, read from what they share: their database holds no Slack
 * effect still to do (due now or later), no callback unprocessed and no decision under way; the Slack
 * stand-in has no call in flight and the crew service sends no webhook. Two quiet checks in a row.
 * Blind to a Slack event a replica acknowledged and has not yet written anything for: wait for its
 * answer (an ephemeral, a row) before calling this.
 */
export async function replicasSettled(databaseUrl: string, slack: FakeSlack, crew?: SimCrewService, timeoutMs = 20_000): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const deadline = Date.now() + timeoutMs;
    for (let quiet = 0; quiet < 2; ) {
      const { rows } = await client.query<{ effects: number; events: number; decisions: number }>(
        `SELECT (SELECT count(*)::int FROM "SlackEffect" WHERE state = 'due') AS effects,
                (SELECT count(*)::int FROM "WebhookEvent" WHERE "processedAt" IS NULL) AS events,
                (SELECT count(*)::int FROM "Review" WHERE state = 'deciding') + (SELECT count(*)::int FROM "FlowRequest" WHERE state = 'deciding') AS decisions`,
      );
      const busy = { ...rows[0]!, slackCalls: slack.inFlight.length, webhooks: crew?.delivering ?? 0 };
      quiet = Object.values(busy).some((n) => n > 0) ? 0 : quiet + 1;
      if (Date.now() > deadline) throw new Error(`replicasSettled: still busy after ${timeoutMs} ms: ${JSON.stringify(busy)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    await client.end();
  }
}

/** Rows of one query on the replicas' shared PostgreSQL database, on a connection of its own. */
export async function queryShared<T>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text)).rows as T[];
  } finally {
    await client.end();
  }
}
