// Vitest global setup: makes the migrated database template once per test run, before the workers
// start, and hands it to them in the environment (see test-database.ts); removes it at the end.
// Several projects run this file each: the first one makes the template, the others find it.

import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
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

export default async function setup(): Promise<(() => Promise<void>) | undefined> {
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
