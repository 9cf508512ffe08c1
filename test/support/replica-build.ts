// The bot's sources transpiled once per test run (global-setup.ts), so that the child processes of
// test/support/replicas.ts start as `node <build>/src/main.js` instead of transpiling every module
// again through tsx at each start (about a second of CPU each, more when several start at once).
// The same transpiler as tsx (esbuild, its dependency), file by file, no bundling: the modules, their
// imports and import.meta.url are those tsx runs. Without the build (a script, a helper used outside
// vitest), replicas start through tsx as before.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** Where the build is (a folder holding src/main.js), for the workers. */
export const REPLICA_BUILD_ENV = "CREWLINE_TEST_REPLICA_BUILD";

/** The sources the bot runs: every .ts under src but the tests. */
function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(file);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts") && !entry.name.endsWith(".d.ts") ? [file] : [];
  });
}

/**
 * Transpiles src into a new temporary folder laid out like the repository (src/, and links to
 * node_modules and prisma, where the bot finds its packages and migrations); returns the folder.
 */
export async function buildReplicas(): Promise<string> {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-replica-build-"));
  const src = path.join(ROOT, "src");
  await build({
    entryPoints: sources(src),
    outdir: path.join(out, "src"),
    outbase: src,
    bundle: false,
    format: "esm",
    platform: "node",
    target: `node${process.versions.node}`,
    tsconfig: path.join(ROOT, "tsconfig.json"),
    sourcemap: "inline",
    logLevel: "error",
  });
  // What the TypeScript build copies too (package.json scripts.build), loaded next to their callers.
  for (const file of fs.readdirSync(path.join(src, "store", "db")).filter((f) => f.endsWith(".mjs")))
    fs.copyFileSync(path.join(src, "store", "db", file), path.join(out, "src", "store", "db", file));
  fs.writeFileSync(path.join(out, "package.json"), JSON.stringify({ type: "module" }));
  for (const dir of ["node_modules", "prisma"]) fs.symlinkSync(path.join(ROOT, dir), path.join(out, dir), "dir");
  return out;
}

/** How a replica is started: the run's build when there is one, otherwise the sources through tsx. */
export function replicaEntry(): string[] {
  const built = process.env[REPLICA_BUILD_ENV];
  if (built && fs.existsSync(path.join(built, "src", "main.js"))) return ["--enable-source-maps", path.join(built, "src", "main.js")];
  return ["--import", "tsx", path.join(ROOT, "src", "main.ts")];
}
