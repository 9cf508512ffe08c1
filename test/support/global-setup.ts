// Vitest global setup: makes the migrated database template once per test run, before the workers
// start, and hands it to them in the environment (see test-database.ts); removes it at the end.
// Several projects run this file each: the first one makes the template, the others find it.
// For the end-to-end project, it also transpiles the bot once for the child processes that suites
// start as replicas (replica-build.ts).

import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { buildReplicas, REPLICA_BUILD_ENV } from "./replica-build.js";
import {
  dropPostgresDatabase,
  dropTestRunDatabases,
  EMBEDDED_TEMPLATE_ENV,
  makeEmbeddedTemplate,
  makePostgresTemplate,
  POSTGRES_TEMPLATE_ENV,
  TEST_RUN_ENV,
  usePostgres,
} from "./test-database.js";

export default async function setup(project?: TestProject): Promise<(() => Promise<void>) | undefined> {
  const replicas = project?.name === "e2e" ? await replicaBuild() : undefined;
  const template = await templateSetup();
  if (!replicas && !template) return undefined;
  return async () => {
    await template?.();
    await replicas?.();
  };
}

/** The bot transpiled for the replicas' child processes, removed at the end. */
async function replicaBuild(): Promise<(() => Promise<void>) | undefined> {
  if (process.env[REPLICA_BUILD_ENV]) return undefined;
  const dir = await buildReplicas();
  process.env[REPLICA_BUILD_ENV] = dir;
  return async () => {
    delete process.env[REPLICA_BUILD_ENV];
    fs.rmSync(dir, { recursive: true, force: true });
  };
}

async function templateSetup(): Promise<(() => Promise<void>) | undefined> {
  if (usePostgres) {
    if (process.env[POSTGRES_TEMPLATE_ENV]) return undefined;
    const run = crypto.randomBytes(4).toString("hex");
    process.env[TEST_RUN_ENV] = run;
    const name = await makePostgresTemplate();
    process.env[POSTGRES_TEMPLATE_ENV] = name;
    return async () => {
      delete process.env[POSTGRES_TEMPLATE_ENV];
      delete process.env[TEST_RUN_ENV];
      await dropPostgresDatabase(name);
      // The databases workers kept for reuse until they exited.
      await dropTestRunDatabases(run);
    };
  }
  if (process.env[EMBEDDED_TEMPLATE_ENV]) return undefined;
  process.env[EMBEDDED_TEMPLATE_ENV] = await embeddedTemplateFile();
  return async () => {
    delete process.env[EMBEDDED_TEMPLATE_ENV];
  };
}

const ROOT = path.resolve(import.meta.dirname, "../..");
const TEMPLATE_PREFIX = "crewline-test-template-";

/**
 * The migrated embedded template, kept in the temporary folder from one test run to the next (CI runs
 * the unit and end-to-end projects one after the other; making it takes seconds): named by a hash of
 * what makes it, the migrations, PGlite's version and how the bot opens PGlite, so a change to any of
 * them makes a new one (and the older ones are removed).
 */
async function embeddedTemplateFile(): Promise<string> {
  const hash = crypto.createHash("sha256");
  const migrations = path.join(ROOT, "prisma/migrations");
  for (const name of fs.readdirSync(migrations, { recursive: true, encoding: "utf8" }).sort()) {
    const file = path.join(migrations, name);
    if (fs.statSync(file).isFile()) hash.update(name).update(fs.readFileSync(file));
  }
  hash.update(fs.readFileSync(path.join(ROOT, "node_modules/@electric-sql/pglite/package.json")));
  hash.update(fs.readFileSync(path.join(ROOT, "src/store/db/pglite-open.mjs")));
  const name = `${TEMPLATE_PREFIX}${hash.digest("hex").slice(0, 16)}.tar`;
  const file = path.join(os.tmpdir(), name);
  if (fs.existsSync(file)) return file;
  for (const old of fs.readdirSync(os.tmpdir()).filter((f) => f.startsWith(TEMPLATE_PREFIX) && f.endsWith(".tar"))) fs.rmSync(path.join(os.tmpdir(), old), { force: true });
  // Written aside and renamed: a run started meanwhile never reads half a file.
  const partial = `${file}.${process.pid}.partial`;
  fs.writeFileSync(partial, Buffer.from(await (await makeEmbeddedTemplate()).arrayBuffer()));
  fs.renameSync(partial, file);
  return file;
}
