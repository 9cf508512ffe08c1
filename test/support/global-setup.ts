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
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-template-"));
  const file = path.join(dir, "pglite.tar");
  fs.writeFileSync(file, Buffer.from(await (await makeEmbeddedTemplate()).arrayBuffer()));
  process.env[EMBEDDED_TEMPLATE_ENV] = file;
  return async () => {
    delete process.env[EMBEDDED_TEMPLATE_ENV];
    fs.rmSync(dir, { recursive: true, force: true });
  };
}
