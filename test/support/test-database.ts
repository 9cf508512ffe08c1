// A fresh, migrated database per test: in-memory PGlite by default, or a new database on the local
// PostgreSQL server when CREWLINE_TEST_DATABASE=postgres (see .ci/run).
//
// Each is a copy of one migrated template instead of an initdb plus every migration (2–3 s each):
// PGlite starts from the template's files (dumpDataDir / loadDataDir), PostgreSQL copies it with
// CREATE DATABASE … TEMPLATE. test/support/global-setup.ts makes the template once per test run and
// hands it to the workers in the environment; without it (the bench, a script) each process makes
// its own embedded template on first use, and PostgreSQL databases are migrated one by one.
import crypto from "node:crypto";
import fs from "node:fs";
import pg from "pg";
import { type Database, openDatabase } from "../../src/store/db/database.js";
import { prismaOf } from "./prisma.js";

export const usePostgres = process.env.CREWLINE_TEST_DATABASE === "postgres";
export const adminUrl = process.env.CREWLINE_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** A file holding the migrated embedded template (PGlite's dumpDataDir tarball). */
export const EMBEDDED_TEMPLATE_ENV = "CREWLINE_TEST_TEMPLATE_FILE";
/** The name of the migrated template database on the PostgreSQL server. */
export const POSTGRES_TEMPLATE_ENV = "CREWLINE_TEST_TEMPLATE_DB";

export interface TestDatabase {
  database: Database;
  /** postgres:// URL of the test database (PostgreSQL mode only). */
  url?: string;
  drop(): Promise<void>;
}

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

function databaseUrl(name: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** The test run's id, set by global-setup.ts, that names its databases on the PostgreSQL server. */
export const TEST_RUN_ENV = "CREWLINE_TEST_RUN";
export function testDatabasePrefix(run = process.env[TEST_RUN_ENV] ?? "solo"): string {
  return `crewline_t_${run}_`;
}

/** Drops every database a test run made on the PostgreSQL server. */
export async function dropTestRunDatabases(run: string): Promise<void> {
  await admin(async (a) => {
    const { rows } = await a.query<{ datname: string }>("SELECT datname FROM pg_database WHERE starts_with(datname, $1)", [testDatabasePrefix(run)]);
    for (const { datname } of rows) await a.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
  });
}

/** A new database on the PostgreSQL server: empty, or a copy of `template` (which nobody may be connected to). */
export async function createTestDatabaseUrl(opts: { template?: string } = {}): Promise<{ url: string; drop: () => Promise<void> }> {
  // Named after the test run (global-setup.ts), whose end drops whatever a worker left behind.
  const name = `${testDatabasePrefix()}${crypto.randomBytes(6).toString("hex")}`;
  await admin((a) => a.query(`CREATE DATABASE ${name}${opts.template ? ` TEMPLATE ${opts.template}` : ""}`));
  return {
    url: databaseUrl(name),
    drop: () => admin(async (a) => void (await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))),
  };
}

/** The migrated embedded database's files (a tarball for loadDataDir). */
export async function makeEmbeddedTemplate(): Promise<Blob> {
  const database = openDatabase({});
  try {
    await database.migrate();
    return await database.dumpDataDir!();
  } finally {
    await database.close();
  }
}

/** A migrated template database on the PostgreSQL server, closed to connections so that it can be copied; returns its name. */
export async function makePostgresTemplate(): Promise<string> {
  const { url } = await createTestDatabaseUrl();
  const name = new URL(url).pathname.slice(1);
  const database = openDatabase({ databaseUrl: url, poolSize: 1 });
  try {
    await database.migrate();
  } finally {
    await database.close();
  }
  await admin((a) => a.query(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS false`));
  return name;
}

export function dropPostgresDatabase(name: string): Promise<void> {
  return admin(async (a) => void (await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)));
}

let embeddedTemplate: Promise<Blob> | undefined;
function embeddedTemplateFiles(): Promise<Blob> {
  const file = process.env[EMBEDDED_TEMPLATE_ENV];
  embeddedTemplate ??= file ? fs.promises.readFile(file).then((bytes) => new Blob([bytes])) : makeEmbeddedTemplate();
  return embeddedTemplate;
}

// Databases given back clean, for the next test of this worker. Opening one costs 1–2 s of CPU
// (PGlite's engine starts; PostgreSQL copies the template); emptying its tables costs milliseconds.
// On globalThis so that the per-file setup (setup-file.ts) can see whether any are kept without loading this module.
const idle: { database: Database; url?: string; drop: () => Promise<void> }[] = ((globalThis as Record<string, unknown>).__crewlineIdleDatabases ??= []) as never;
let tableList: string | undefined;

/** Empties every table but the migrations' (and resets sequences), so the database reads as a fresh copy. */
async function emptyTables(database: Database): Promise<void> {
  const prisma = prismaOf(database);
  tableList ??= (
    await prisma.$queryRawUnsafe<{ name: string }[]>(
      "SELECT quote_ident(tablename) AS name FROM pg_tables WHERE schemaname = 'public' AND tablename <> '_prisma_migrations' ORDER BY tablename",
    )
  )
    .map((t) => t.name)
    .join(", ");
  if (tableList) await prisma.$executeRawUnsafe(`TRUNCATE TABLE ${tableList} RESTART IDENTITY CASCADE`);
}

async function openTestDatabase(): Promise<{ database: Database; url?: string; drop: () => Promise<void> }> {
  if (!usePostgres) {
    const database = openDatabase({ loadDataDir: await embeddedTemplateFiles() });
    // Starts the engine now (the copy needs no migration; one that is missing would be applied).
    await database.migrate();
    return { database, drop: () => database.close() };
  }
  const template = process.env[POSTGRES_TEMPLATE_ENV];
  const { url, drop } = await createTestDatabaseUrl({ template });
  const database = openDatabase({ databaseUrl: url, poolSize: 5 });
  await database.migrate();
  return {
    database,
    url,
    drop: async () => {
      await database.close();
      await drop();
    },
  };
}

/**
 * A migrated database that holds no rows. Its `drop()` empties it and keeps it for the next test of
 * this worker, unless the test closed it (a restart test): then it is dropped for good.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const opened = idle.pop() ?? (await openTestDatabase());
  const { database } = opened;
  const close = database.close;
  let closed = false;
  database.close = async () => {
    closed = true;
    await close();
  };
  return {
    database,
    ...(opened.url ? { url: opened.url } : {}),
    drop: async () => {
      database.close = close;
      if (closed) return opened.drop();
      try {
        await emptyTables(database);
        idle.push(opened);
      } catch {
        await opened.drop();
      }
    },
  };
}

/**
 * Closes (and on PostgreSQL drops) the databases kept for reuse, at the end of each test file; unless the
 * project shares modules between its files (the unit project), where they serve the worker's next file and
 * the run's end drops them.
 */
export async function closeIdleDatabases(): Promise<void> {
  if (process.env.CREWLINE_TEST_SHARE_DATABASES === "1") return;
  await Promise.all(idle.splice(0).map((d) => d.drop().catch(() => {})));
}
