// The Node flags `npm start` gives the bot (package.json scripts.start), so the bench measures the bot
// as it is deployed. BENCH_NODE_FLAGS overrides them ("" = V8's defaults, to see what they cost).
import { spawnSync } from "node:child_process";
import { startScriptNodeFlags } from "../test/support/start-command.js";

export function startNodeFlags(): string[] {
  if (process.env.BENCH_NODE_FLAGS !== undefined) return process.env.BENCH_NODE_FLAGS.split(/\s+/).filter(Boolean);
  return startScriptNodeFlags();
}

/**
 * Runs this process again with those flags unless it has them already: the bench hosts the bot
 * in-process for the speed figures, and they should see the same heap settings.
 */
export function reexecWithStartFlags(): void {
  const flags = startNodeFlags();
  if (process.env.BENCH_REEXEC === "1" || flags.every((flag) => process.execArgv.includes(flag))) return;
  const child = spawnSync(process.execPath, [...flags, ...process.execArgv, ...process.argv.slice(1)], {
    stdio: "inherit",
    env: { ...process.env, BENCH_REEXEC: "1" },
  });
  process.exit(child.status ?? 1);
}
