// A fresh, migrated database per test file: in-memory PGlite by default, or a new database on the
// local PostgreSQL server when CREWLINE_TEST_DATABASE=postgres (see .ci/run).
import crypto from "node:crypto";
import pg from "pg";
import { type Database, openDatabase } from "../../src/store/db/database.js";

export const usePostgres = process.env.CREWLINE_TEST_DATABASE === "postgres";
export const adminUrl = process.env.CREWLINE_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

export interface TestDatabase {
  database: Database;
  /** postgres:// URL of the test database (PostgreSQL mode only). */
  url?: string;
  drop(): Promise<void>;
}

export async function createTestDatabaseUrl(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `crewline_t_${crypto.randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.end();
    },
  };
}

export async function createTestDatabase(): Promise<TestDatabase> {
  if (!usePostgres) {
    const database = openDatabase({});
    await database.migrate();
    return { database, drop: () => database.close() };
  }
  const { url, drop } = await createTestDatabaseUrl();
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
