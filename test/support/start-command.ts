// The Node flags `npm start` runs the bot with (package.json scripts.start), for tests and the bench
// that start the bot the way it is deployed.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export function startScriptNodeFlags(): string[] {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
  const [node, ...args] = pkg.scripts.start!.trim().split(/\s+/);
  if (node !== "node") throw new Error(`scripts.start should run node, not ${node}`);
  return args.filter((arg) => arg.startsWith("--"));
}
