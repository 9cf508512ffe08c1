// The compiled bot as `npm start` runs it (node <start flags> dist/src/main.js), as a child process of
// the bench: build, start and stop it, read its memory and CPU time from /proc, and start runs on it
// the way Slack does (a signed kickoff-form submission).
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { inputBlockId, KICKOFF_VIEW_CALLBACK } from "../src/adapters/slack/blocks/index.js";
import { bindForm } from "../src/adapters/slack/kickoff/form-binding.js";
import { encodeMetadata } from "../src/adapters/slack/kickoff/metadata.js";
import type { FakeSlack } from "../test/support/fake-slack.js";
import type { SlackRequester } from "../test/support/slack-requests.js";
import { BOT_TOKEN, CREW_NAME, round, SIGNING_SECRET, until } from "./lib.js";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

let built = false;
/** What `npm start` runs: compile once per bench run. */
export function buildBot(): void {
  if (built) return;
  execFileSync("npm", ["run", "build", "--silent"], { cwd: ROOT, stdio: "ignore" });
  built = true;
}

/**
 * CPU time (user + system) the process (or one of its threads, `tid`) has used so far, in ms: a
 * steadier cost measure than wall time on shared cores.
 */
export function cpuMs(pid: number, tid?: number): number {
  // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
  const stat = fs.readFileSync(`/proc/${pid}${tid === undefined ? "" : `/task/${tid}`}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}
const CLOCK_TICKS = 100;

export function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return round(kb / 1024, 1);
}

/** Busy and total CPU time of the whole machine so far (jiffies, /proc/stat): how saturated the cores were. */
export function machineCpu(): { busy: number; total: number } {
  const line = fs.readFileSync("/proc/stat", "utf8").split("\n")[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.reduce((a, b) => a + b, 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0); // idle + iowait
  return { busy: total - idle, total };
}

/**
 * Time (ms) so far in which at least one runnable task waited for a CPU (/proc/pressure/cpu "some"),
 * or undefined where the kernel does not report it. Over a window, stall / window length is the share
 * of the time the cores were contended: by the bench itself, or by other work on the machine.
 */
export function cpuStallMs(): number | undefined {
  try {
    const some = fs.readFileSync("/proc/pressure/cpu", "utf8").split("\n")[0] ?? "";
    const total = /total=(\d+)/.exec(some)?.[1];
    return total === undefined ? undefined : Number(total) / 1000;
  } catch {
    return undefined;
  }
}

export interface Child {
  proc: ChildProcess;
  startMs: number;
  stderr: string[];
  stop(): Promise<void>;
}

export async function startBot(env: Record<string, string>, port: number, flags: string[]): Promise<Child> {
  const t0 = performance.now();
  const proc = spawn(process.execPath, [...flags, "dist/src/main.js"], {
    cwd: ROOT,
    env: { ...process.env, NODE_OPTIONS: process.env.BENCH_BOT_NODE_OPTIONS ?? "", ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  if (process.env.BENCH_DEBUG) proc.stderr!.on("data", (d: Buffer) => process.stderr.write(`[bot ${port}] ${d}`));
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
    // Generous: on a busy machine a cold start takes tens of seconds.
    120_000,
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

/**
 * Starts one run as Slack would: the modal is opened at the Slack stand-in (with the workspace's bot
 * token; a 429 is waited out as the Web API client would), then the kickoff form (as the bot seals it
 * for this user, keyed by the signing secret) is submitted to the bot from that workspace. Returns the
 * HTTP status of the submission.
 */
export async function submitKickoff(
  slack: FakeSlack,
  requests: SlackRequester,
  run: { channel: string; topic: string; trigger: string; team?: string; token?: string },
): Promise<number> {
  const team = run.team ?? "T0TEAM";
  let opened: any;
  for (let attempt = 0; attempt < 20; attempt++) {
    const res = await fetch(slack.url + "views.open", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${run.token ?? BOT_TOKEN}` },
      body: JSON.stringify({ trigger_id: `${run.trigger}-${attempt}`, view: { type: "modal", title: { type: "plain_text", text: "Loading" }, blocks: [] } }),
    });
    opened = await res.json();
    if (res.status !== 429) break;
    await new Promise((r) => setTimeout(r, Number(res.headers.get("retry-after") ?? 1) * 1000));
  }
  const res = await requests.viewSubmission({
    user_id: "U0BENCH",
    team_id: team,
    view: {
      id: opened.view?.id,
      callback_id: KICKOFF_VIEW_CALLBACK,
      private_metadata: encodeMetadata(bindForm(SIGNING_SECRET, { crew: CREW_NAME, channel: run.channel, team, user: "U0BENCH", inputs: [{ name: "topic", required: true }] })),
      state: { values: { [inputBlockId("topic")]: { value: { type: "plain_text_input", value: run.topic } } } },
    },
  });
  return res.status;
}
