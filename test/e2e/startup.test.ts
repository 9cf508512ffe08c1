import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeSlack, startFakeSlack } from "../support/fake-slack.js";
import { eventually, freePort } from "../support/harness.js";
import { startScriptNodeFlags } from "../support/start-command.js";
import { createTestDatabaseUrl, usePostgres } from "../support/test-database.js";

let child: ChildProcess | undefined;
let slack: FakeSlack | undefined;
afterEach(async () => {
  child?.kill("SIGKILL");
  child = undefined;
  await slack?.close();
  slack = undefined;
});

function runBot(env: Record<string, string>) {
  const proc = spawn(process.execPath, [...startScriptNodeFlags(), "--import", "tsx", "src/main.ts"], {
    env: { PATH: process.env.PATH!, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  proc.stdout!.on("data", (d) => (output += d));
  proc.stderr!.on("data", (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)));
  return { proc, exited, output: () => output };
}

/** The least a bot needs to start: one workspace's token, the Slack stand-in, a crew that is not there. */
function minimalEnv(slackUrl: string, port: number, dataDir: string): Record<string, string> {
  return {
    SLACK_BOT_TOKEN: "xoxb-test",
    SLACK_SIGNING_SECRET: "s",
    SLACK_API_URL: slackUrl,
    PORT: String(port),
    DATA_DIR: dataDir,
    CREW_BASE_URL: "http://127.0.0.1:9",
    CREW_TOKEN: "t",
  };
}

describe("start-up", () => {
  it("stops with a message naming each missing variable, and no secret", async () => {
    const bot = runBot({ SLACK_BOT_TOKEN: "xoxb-super-secret-value", CREW_TOKEN: "crew-secret" });
    child = bot.proc;
    expect(await bot.exited).toBe(1);
    expect(bot.output()).toMatch(/SLACK_SIGNING_SECRET is missing/);
    expect(bot.output()).toMatch(/CREW_BASE_URL is missing/);
    expect(bot.output()).not.toContain("super-secret");
    expect(bot.output()).not.toContain("crew-secret");
  });

  // Two processes that each load the whole bot before refusing its settings: seconds each on a loaded machine.
  it("stops when installable by OAuth without a usable ENCRYPTION_KEY, saying what the key is for", { timeout: 90_000 }, async () => {
    const oauth = { SLACK_CLIENT_ID: "1111.2222", SLACK_CLIENT_SECRET: "client-secret-value", SLACK_STATE_SECRET: "state-secret-0123456789", SLACK_SIGNING_SECRET: "s" };
    const crew = { CREW_BASE_URL: "http://127.0.0.1:9", CREW_TOKEN: "t" };
    for (const key of [undefined, "00".repeat(32)]) {
      const bot = runBot({ ...oauth, ...crew, ...(key ? { ENCRYPTION_KEY: key } : {}) });
      child = bot.proc;
      expect(await bot.exited).toBe(1);
      expect(bot.output()).toMatch(
        key ? /ENCRYPTION_KEY \(32 random bytes.*encrypt each workspace's Slack tokens.*\) is invalid: it looks like a weak key/ : /ENCRYPTION_KEY is missing: 32 random bytes/,
      );
      expect(bot.output()).not.toContain("client-secret-value");
      if (key) expect(bot.output()).not.toContain(key);
    }
  });

  // A fresh data folder: the child makes its database and applies every migration before it answers.
  it("applies migrations to the configured database and serves /healthz", { timeout: 90_000 }, async () => {
    slack = await startFakeSlack();
    const port = await freePort();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-data-"));
    const db = usePostgres ? await createTestDatabaseUrl() : undefined;
    const bot = runBot({ ...minimalEnv(slack.url, port, dataDir), ...(db ? { DATABASE_URL: db.url } : {}) });
    child = bot.proc;
    try {
      const health = await eventually(() => fetch(`http://127.0.0.1:${port}/healthz`).then((r) => (r.status === 200 ? r.json() : undefined)), {
        timeoutMs: 80_000,
        what: "/healthz",
      });
      expect(health).toEqual({ ok: true });
      if (!db) expect(fs.existsSync(path.join(dataDir, "pglite"))).toBe(true);
      expect(bot.output()).toMatch(/database migrated/);
      expect(bot.output()).not.toContain("xoxb-test");
    } finally {
      child.kill("SIGTERM");
      await bot.exited;
      await db?.drop();
    }
  });

  // LOG_LEVEL=WARN once logged everything, debug included; an unknown level did too.
  it("logs at LOG_LEVEL given in any case, and refuses an unknown level naming LOG_LEVEL and the levels", { timeout: 120_000 }, async () => {
    slack = await startFakeSlack();
    const port = await freePort();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-log-level-"));
    const env = minimalEnv(slack.url, port, dataDir);
    const refused = runBot({ ...env, LOG_LEVEL: "verbose" });
    child = refused.proc;
    expect(await Promise.race([refused.exited, new Promise((resolve) => setTimeout(() => resolve("still running"), 30_000))])).toBe(1);
    expect(refused.output()).toMatch(/LOG_LEVEL \(how much the bot logs.*\) is invalid: use debug, info, warn or error/);

    const quiet = runBot({ ...env, LOG_LEVEL: "WARN" });
    child = quiet.proc;
    await eventually(() => fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.status === 200 || undefined), { timeoutMs: 80_000, what: "/healthz" });
    child.kill("SIGTERM");
    await quiet.exited;
    const levels = quiet
      .output()
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line).level);
    expect(levels.filter((level) => level === "debug" || level === "info")).toEqual([]);
  });
});
