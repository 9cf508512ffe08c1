// `npm run playground`: the real bot, the local crew service and the Slack stand-in with its web page,
// all on loopback. The bot runs as its own process from its public entry (src/main.ts) with an
// ordinary configuration; the playground only talks to it the way Slack does.
//
// Environment (all optional):
//   PLAYGROUND_PORT            the page and the stand-in's Web API (default 3100; 0 = any free port)
//   PLAYGROUND_TASK_DELAY_MS   how long each simulated task takes (default 2500)
//   PORT, DATA_DIR, …          passed to the bot; defaults: a free port, ./data/playground
//   CREW_BASE_URL + CREW_TOKEN, or CREWS_FILE: use that crew instead of the local crew service

import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";
import { type SimCrewService, type SimTask, startCrewService } from "../sim/crew-service.js";
import { type SimFlowService, startFlowService } from "../sim/flow-service.js";
import { freePort } from "./free-port.js";
import { startFakeSlack } from "./slack-standin.js";
import { mountPlayground, type PlaygroundUser } from "./web.js";
import type { PlaygroundShortcut } from "./web-messages.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const CHANNEL = { id: "C0CREWRUNS", name: "crew-runs" };
export const USERGROUP = { id: "S0EDITORS", handle: "editors" };
export const USERS: PlaygroundUser[] = [
  { id: "U0STARTER", name: "Sam Starter", role: "starts runs; not a reviewer" },
  { id: "U0REVIEWA", name: "Riya Reviewer", role: "reviewer" },
  { id: "U0REVIEWB", name: "Ben Reviewer", role: "reviewer" },
  { id: "U0OUTSIDE", name: "Omar Outsider", role: "may not decide reviews" },
  { id: "U0EDITOR", name: "Gia Editor", role: "member of @editors (a reviewer group)" },
];
const REVIEWERS = ["U0REVIEWA", "U0REVIEWB", USERGROUP.id];

/** A long report, well over what fits in one Slack message: the bot shows an excerpt and attaches a file. */
function longReport(ctx: { inputs: Record<string, string> }): string {
  const topic = ctx.inputs.topic ?? "the topic";
  const parts = [`# Full report: ${topic}`, "", "_Every source, figure and note the crew collected._", ""];
  for (let i = 1; i <= 40; i++) {
    parts.push(`## ${i}. Finding ${i} about ${topic}`, "");
    parts.push(
      `Analysts looked at ${topic} from angle ${i}. The data shows a steady trend, with a few outliers worth a second look. ` +
        "Details follow, with the numbers the crew used and where they came from. ".repeat(3),
      "",
    );
    parts.push(`- Source ${i}a: industry survey, table ${i}`, `- Source ${i}b: interview notes, page ${i + 2}`, "");
  }
  return parts.join("\n");
}

export function playgroundTasks(delayMs: number): SimTask[] {
  return [
    { id: "task-research", name: "research_task", agent: "Senior Research Analyst", humanInput: false, delayMs, steps: 3 },
    { id: "task-write", name: "writing_task", agent: "Content Writer", humanInput: true, delayMs, steps: 3 },
    { id: "task-report", name: "report_task", agent: "Reporting Analyst", humanInput: false, delayMs, steps: 2, output: longReport },
  ];
}

function intEnv(name: string, fallback: number): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 65535 * 100) {
    console.error(`playground: ${name} must be a whole number (got "${raw}")`);
    process.exit(1);
  }
  return n;
}

/** The message shortcuts the app's manifest declares (manifest.yml), offered on the page's messages. */
async function manifestShortcuts(): Promise<PlaygroundShortcut[]> {
  try {
    const manifest = parseYaml(await readFile(path.join(ROOT, "manifest.yml"), "utf8")) as { features?: { shortcuts?: unknown } };
    const list = Array.isArray(manifest?.features?.shortcuts) ? manifest.features.shortcuts : [];
    return list
      .filter((s: any) => s?.type === "message" && typeof s.callback_id === "string" && typeof s.name === "string")
      .map((s: any) => ({ callback_id: s.callback_id, name: s.name }));
  } catch (err) {
    console.error("playground: no message shortcuts (manifest.yml could not be read):", (err as Error).message);
    return [];
  }
}

async function waitForHealth(url: string, bot: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (bot.exitCode !== null) throw new Error(`the bot exited (code ${bot.exitCode}) before it was ready`);
    try {
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) });
      if (res.ok) return;
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the bot did not answer ${url}/healthz within ${timeoutMs / 1000} s`);
}

async function main(): Promise<void> {
  const env = process.env;
  const slack = await startFakeSlack({ port: intEnv("PLAYGROUND_PORT", 3100), botUserId: "U0BOT", validateBlocks: false });
  const pageUrl = slack.url.replace(/\/api\/$/, "");
  for (const u of USERS) slack.setUser(u.id, { real_name: u.name, profile: { display_name: u.name, real_name: u.name } });
  slack.setUsergroup(USERGROUP.id, ["U0EDITOR"]);
  // Everyone on the page is in its one channel: a review may be handed to any of them.
  slack.setMembers(
    CHANNEL.id,
    USERS.map((u) => u.id),
  );

  const ownCrew = !env.CREW_BASE_URL && !env.CREWS_FILE;
  let crew: SimCrewService | undefined;
  const crewEnv: Record<string, string> = {};
  if (ownCrew) {
    const token = `sim-${randomBytes(8).toString("hex")}`;
    crew = await startCrewService({ token, inputs: ["topic", "audience"], tasks: playgroundTasks(intEnv("PLAYGROUND_TASK_DELAY_MS", 2500)) });
    Object.assign(crewEnv, { CREW_BASE_URL: crew.url, CREW_TOKEN: token, CREW_NAME: env.CREW_NAME ?? "newsletter", CREW_REVIEWERS: env.CREW_REVIEWERS ?? REVIEWERS.join(",") });
  }

  const botPort = env.PORT ? intEnv("PORT", 0) : await freePort();
  const botUrl = `http://127.0.0.1:${botPort}`;
  // A local flow deployment too (unless flows are configured), whose feedback request is answered in the channel.
  let flow: SimFlowService | undefined;
  if (ownCrew && !env.FLOW_WEBHOOK_SECRET) {
    const secret = randomBytes(16).toString("hex");
    flow = await startFlowService({ secret, port: 0, targetUrl: `${botUrl}/hooks/flows/content`, deploymentName: "content-flow" });
    Object.assign(crewEnv, { FLOW_NAME: "content", FLOW_WEBHOOK_SECRET: secret, FLOW_CHANNEL: CHANNEL.id, FLOW_REVIEWERS: REVIEWERS.join(",") });
  }
  const signingSecret = randomBytes(16).toString("hex");
  const botEnv: NodeJS.ProcessEnv = {
    ...env,
    ...crewEnv,
    SLACK_BOT_TOKEN: `xoxb-playground-${randomBytes(6).toString("hex")}`,
    SLACK_SIGNING_SECRET: signingSecret,
    SLACK_API_URL: slack.url,
    SLACK_APP_TOKEN: "",
    PORT: String(botPort),
    PUBLIC_URL: botUrl,
    DATABASE_URL: env.DATABASE_URL ?? "",
    DATA_DIR: env.DATA_DIR ?? path.join(ROOT, "data", "playground"),
    LOG_LEVEL: env.LOG_LEVEL ?? "warn",
  };
  const bot = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "src", "main.ts")], { cwd: ROOT, env: botEnv, stdio: ["ignore", "inherit", "inherit"] });

  let stopping = false;
  const stop = async (code = 0) => {
    if (stopping) return;
    stopping = true;
    if (bot.exitCode === null) {
      bot.kill("SIGTERM");
      await new Promise((r) => {
        const timer = setTimeout(() => {
          bot.kill("SIGKILL");
          r(undefined);
        }, 8000);
        bot.once("exit", () => {
          clearTimeout(timer);
          r(undefined);
        });
      });
    }
    await crew?.close();
    await flow?.close();
    await slack.close();
    process.exit(code);
  };
  process.once("SIGINT", () => void stop(0));
  process.once("SIGTERM", () => void stop(0));
  bot.once("exit", (code) => {
    if (!stopping) {
      console.error(`playground: the bot stopped (exit code ${code})`);
      void stop(1);
    }
  });

  await waitForHealth(botUrl, bot, 60_000);
  await flow
    ?.send({
      method_name: "review_article",
      message: "Please check this article before it is published",
      output: "# Tidal power\n\nA short article the flow wants a person to approve.\n\n- what it is\n- where it works",
    })
    .catch((err) => console.error("playground: the flow request did not reach the bot:", (err as Error).message));
  mountPlayground(slack, {
    botUrl,
    signingSecret,
    users: USERS,
    channels: [CHANNEL],
    usergroups: [{ ...USERGROUP, members: ["U0EDITOR"] }],
    messageShortcuts: await manifestShortcuts(),
    notes: ownCrew
      ? [
          "Crew *newsletter* (local crew service): research runs on its own, writing waits for a review, the report is long (excerpt + file).",
          "Reviewers: Riya, Ben and the @editors group (Gia). Sam and Omar may not decide.",
          ...(flow ? ["Flow *content* (local flow deployment) sent one feedback request to the channel: answer it with Approved or Rejected."] : []),
        ]
      : ["Using the crew settings you gave."],
  });
  console.log(`Crewline playground: ${pageUrl}/  (bot at ${botUrl}, Slack stand-in API at ${slack.url}${crew ? `, crew service at ${crew.url}` : ""})`);
  console.log("Open the page, type /crew in #crew-runs. Ctrl-C stops everything.");
}

main().catch((err) => {
  console.error("playground failed to start:", err instanceof Error ? err.message : err);
  process.exit(1);
});
