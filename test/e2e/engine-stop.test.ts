import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type Crewline, createCrewline } from "../../src/app.js";
import { createLogger } from "../../src/log/log.js";
import { type FakeSlack, startFakeSlack } from "../support/fake-slack.js";
import { BOT_TOKEN, CREW_TOKEN, eventually, SIGNING_SECRET } from "../support/harness.js";

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step().catch(() => {});
  cleanup = [];
});

/** The embedded engine's worker thread, reached as the SQL runner holds it (src/store/db/sql.ts PGliteConnection). */
async function engineThread(bot: Crewline): Promise<{ terminate(): Promise<number> }> {
  return bot.database.sql.getExecutor().provideConnection(async (c) => (c as unknown as { engine: { worker: { terminate(): Promise<number> } } }).engine.worker);
}

describe("the embedded database", () => {
  // main.ts passes onFatal: process.exit(1), so a supervisor starts the bot again instead of leaving it up, refusing all work.
  it("stopping under a running bot is fatal: onFatal is called, and the log says why", { timeout: 60_000 }, async () => {
    const slack: FakeSlack = await startFakeSlack();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-engine-stop-"));
    cleanup.push(
      () => slack.close(),
      async () => fs.rmSync(dataDir, { recursive: true, force: true }),
    );
    const lines: string[] = [];
    const fatal: Error[] = [];
    const bot = createCrewline(
      {
        slack: { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET, apiUrl: slack.url },
        port: 0,
        dataDir,
        crews: [{ name: "research", baseUrl: "http://127.0.0.1:9", token: CREW_TOKEN }],
      },
      { log: createLogger("info", (line) => lines.push(line)), onFatal: (err) => fatal.push(err) },
    );
    cleanup.push(() => bot.stop());
    await bot.start();
    expect(fatal).toEqual([]);

    // The thread dies as a crash would end it (an out-of-memory abort, a fault in the engine).
    await (await engineThread(bot)).terminate();

    await eventually(() => fatal.length > 0 || undefined, { what: "onFatal" });
    expect(fatal.map((e) => e.message)).toEqual([expect.stringMatching(/embedded database's thread stopped/)]);
    expect(lines.map((l) => JSON.parse(l)).find((l) => l.level === "error" && /embedded database stopped/.test(l.msg))).toBeDefined();
  });
});
