// CLI entry of the local crew service: `npm run crew:sim`.
//
// Environment:
//   SIM_PORT            port to listen on (default 8787; 0 = random)
//   SIM_HOST            interface (default 127.0.0.1)
//   SIM_TOKEN           organization bearer token (default "sim-token")
//   SIM_USER_TOKEN      optional user-scoped token (GET /inputs and status only)
//   SIM_INPUTS          comma-separated declared inputs (default "topic,audience")
//   SIM_TASK_DELAY_MS   duration of each task (default 1500)
//   SIM_REVIEW          which tasks wait for human review: all | none | last (default all)
//   SIM_TASKS           optional path to a YAML/JSON file listing tasks
//   SIM_INPUTS_SHAPE    GET /inputs variant: names | objects | map (default names)
//   SIM_STATUS_PATH     spec | legacy | both (default both)
//   SIM_MODE            deployed | seed (default deployed; `--seed` is the same as SIM_MODE=seed):
//                       deployed acts like real deployments (task webhooks without task_id, a
//                       human-input webhook for tasks that wait for review, state PENDING_HUMAN_INPUT);
//                       seed keeps the seed interface (task_id in task webhooks, no human-input webhook)
//
// A SIM_TASKS file is a list (or {tasks: [...]}) of
//   { id?, name, agent, humanInput? | human_input?, delayMs?, steps?, output?, description?, expectedOutput? }
// Tasks that leave humanInput unset follow SIM_REVIEW.
//
// It can also act as a flow deployment sending human feedback requests: see FLOW_SIM_HELP
// (src/sim/flow-service.ts) or `npm run crew:sim -- --help`.

import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { defaultSimTasks, type SimCrewOptions, type SimTask, startCrewService } from "./crew-service.js";
import { FLOW_SIM_HELP, startFlowSimFromEnv } from "./flow-service.js";

const DEFAULT_TOKEN = "sim-token";

class ConfigError extends Error {}

const taskFileEntry = z
  .object({
    id: z.string().min(1).optional(),
    name: z.string().min(1),
    agent: z.string().min(1).default("Crew Agent"),
    humanInput: z.boolean().optional(),
    human_input: z.boolean().optional(),
    delayMs: z.number().int().nonnegative().optional(),
    steps: z.number().int().nonnegative().optional(),
    output: z.string().optional(),
    description: z.string().optional(),
    expectedOutput: z.string().optional(),
    expected_output: z.string().optional(),
  })
  .strict();

const taskList = z.array(taskFileEntry);
const taskFileObject = z.object({ tasks: taskList }).strict();

function intEnv(name: string, fallback: number, min = 0): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new ConfigError(`${name} must be an integer >= ${min} (got "${raw}")`);
  return n;
}

function enumEnv<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
  const raw = process.env[name]?.trim().toLowerCase();
  if (!raw) return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(`${name} must be one of ${allowed.join(", ")} (got "${raw}")`);
  }
  return raw as T;
}

async function loadTaskFile(file: string): Promise<{ task: SimTask; explicitReview: boolean }[]> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new ConfigError(`SIM_TASKS: cannot read ${file}: ${(err as Error).message}`);
  }
  let data: unknown;
  try {
    data = path.extname(file).toLowerCase() === ".json" ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new ConfigError(`SIM_TASKS: ${file} is not valid YAML/JSON: ${(err as Error).message}`);
  }
  const parsed = Array.isArray(data) ? taskList.safeParse(data) : taskFileObject.transform((o) => o.tasks).safeParse(data);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ");
    throw new ConfigError(`SIM_TASKS: ${file} does not list tasks: ${issues}`);
  }
  const entries = parsed.data;
  if (entries.length === 0) throw new ConfigError(`SIM_TASKS: ${file} lists no tasks`);
  const seen = new Set<string>();
  return entries.map((e, i) => {
    const id = e.id ?? `task-${i + 1}-${e.name.replace(/[^A-Za-z0-9_-]+/g, "-")}`;
    if (seen.has(id)) throw new ConfigError(`SIM_TASKS: duplicate task id "${id}"`);
    seen.add(id);
    const review = e.humanInput ?? e.human_input;
    const task: SimTask = { id, name: e.name, agent: e.agent };
    if (review !== undefined) task.humanInput = review;
    if (e.delayMs !== undefined) task.delayMs = e.delayMs;
    if (e.steps !== undefined) task.steps = e.steps;
    if (e.output !== undefined) task.output = e.output;
    if (e.description !== undefined) task.description = e.description;
    const expected = e.expectedOutput ?? e.expected_output;
    if (expected !== undefined) task.expectedOutput = expected;
    return { task, explicitReview: review !== undefined };
  });
}

async function config(): Promise<SimCrewOptions> {
  const port = intEnv("SIM_PORT", 8787);
  if (port > 65535) throw new ConfigError("SIM_PORT must be <= 65535");
  const delayMs = intEnv("SIM_TASK_DELAY_MS", 1500);
  const review = enumEnv("SIM_REVIEW", ["all", "none", "last"] as const, "all");
  const inputs = (process.env["SIM_INPUTS"] ?? "topic,audience")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0);

  const file = process.env["SIM_TASKS"]?.trim();
  const listed = file ? await loadTaskFile(file) : defaultSimTasks().map((task) => ({ task, explicitReview: false }));
  const tasks = listed.map(({ task, explicitReview }, i) => {
    const t: SimTask = { ...task };
    if (!explicitReview) t.humanInput = review === "all" || (review === "last" && i === listed.length - 1);
    t.delayMs ??= delayMs;
    return t;
  });

  const opts: SimCrewOptions = {
    port,
    host: process.env["SIM_HOST"]?.trim() || "127.0.0.1",
    token: process.env["SIM_TOKEN"] || DEFAULT_TOKEN,
    inputs,
    tasks,
    inputsShape: enumEnv("SIM_INPUTS_SHAPE", ["names", "objects", "map"] as const, "names"),
    statusPath: enumEnv("SIM_STATUS_PATH", ["spec", "legacy", "both"] as const, "both"),
    mode: process.argv.includes("--seed") ? "seed" : enumEnv("SIM_MODE", ["deployed", "seed"] as const, "deployed"),
  };
  const userToken = process.env["SIM_USER_TOKEN"];
  if (userToken) opts.userToken = userToken;
  return opts;
}

function usage(): string {
  const header = readFileSync(fileURLToPath(import.meta.url), "utf8")
    .split("\n")
    .filter((l) => l.startsWith("//"))
    .map((l) => l.replace(/^\/\/ ?/, ""));
  return `${header.join("\n")}\n\n${FLOW_SIM_HELP}`;
}

async function main(): Promise<void> {
  if (process.argv.includes("--help") || process.argv.includes("-h")) {
    console.log(usage());
    return;
  }
  let opts: SimCrewOptions;
  try {
    opts = await config();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`crew:sim: ${err.message}`);
      process.exit(1);
    }
    throw err;
  }

  const service = await startCrewService(opts);
  const tokenHint = process.env["SIM_TOKEN"] ? "token set via SIM_TOKEN" : `token "${DEFAULT_TOKEN}" (default; set SIM_TOKEN to change)`;
  const userHint = opts.userToken ? ", user token set via SIM_USER_TOKEN" : "";
  console.log(
    `Crew simulator listening on ${service.url} — bearer ${tokenHint}${userHint}; inputs: ${(opts.inputs ?? []).join(", ") || "(none)"}; ` +
      `${opts.tasks?.length ?? 0} tasks, review: ${
        opts.tasks
          ?.filter((t) => t.humanInput)
          .map((t) => t.name)
          .join(", ") || "none"
      }`,
  );

  const flow = await startFlowSimFromEnv(process.env, (line) => console.log(line)).catch((err: Error) => {
    console.error(`crew:sim: ${err.message}`);
    process.exit(1);
  });

  let stopping = false;
  const stop = () => {
    if (stopping) {
      process.exit(130); // second signal: give up waiting
    }
    stopping = true;
    Promise.all([service.close(), flow?.close()])
      .then(() => process.exit(0))
      .catch(() => process.exit(1));
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}

main().catch((err: unknown) => {
  console.error("crew:sim failed to start:", err instanceof Error ? err.message : err);
  process.exit(1);
});
