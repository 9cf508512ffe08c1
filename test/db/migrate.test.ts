import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { openDatabase } from "../../src/store/db/database.js";
import { applyMigrations, readMigrations } from "../../src/store/db/migrate.js";
import { prismaOf } from "../support/prisma.js";
import { createTestDatabase, createTestDatabaseUrl, usePostgres } from "../support/test-database.js";

const run = promisify(execFile);

describe("migrations", () => {
  it("applies every migration once and creates the tables the bot uses", async () => {
    const { database, drop } = await createTestDatabase();
    try {
      expect(await database.migrate()).toEqual([]);
      const applied = await prismaOf(database).$queryRaw<{ migration_name: string }[]>`SELECT migration_name FROM "_prisma_migrations" ORDER BY migration_name`;
      expect(applied.map((r) => r.migration_name)).toEqual(readMigrations().map((m) => m.name));
      expect(await prismaOf(database).execution.count()).toBe(0);
    } finally {
      await drop();
    }
  });

  it("refuses to start on a migration that was edited after it was applied", async () => {
    const { database, drop } = await createTestDatabase();
    try {
      const edited = readMigrations().map((m, i) => (i === 0 ? { ...m, checksum: "0".repeat(64) } : m));
      const session = {
        exec: async (sql: string) => void (await prismaOf(database).$executeRawUnsafe(sql)),
        query: async <T>(sql: string, params: unknown[] = []) => (await prismaOf(database).$queryRawUnsafe(sql, ...params)) as T[],
      };
      await expect(applyMigrations(session, edited, { advisoryLock: false })).rejects.toThrow(/was changed after it was applied/);
    } finally {
      await drop();
    }
  });

  it("keeps Prisma's own bookkeeping: `prisma migrate status` finds the database up to date", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-migrate-"));
    const pg = usePostgres ? await createTestDatabaseUrl() : undefined;
    const database = openDatabase(pg ? { databaseUrl: pg.url } : { dataDir });
    await database.migrate();
    await database.close();
    try {
      const env = { ...process.env, DATA_DIR: dataDir, DATABASE_URL: pg?.url ?? "" };
      const { stdout } = await run("npx", ["prisma", "migrate", "status"], { env, timeout: 60_000 });
      expect(stdout).toMatch(/Database schema is up to date/);
    } finally {
      await pg?.drop();
    }
  }, 90_000);
});
