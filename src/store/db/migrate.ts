// Applies prisma/migrations in-process, bookkept in Prisma's own `_prisma_migrations` table so that
// `prisma migrate status|deploy` agree with it. The CLI takes 3–15 s per call here; start-up must not.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** Runs SQL that may hold several statements (simple query protocol), inside one session. */
export interface MigrationSession {
  exec(sql: string): Promise<void>;
  query<T>(sql: string, params?: unknown[]): Promise<T[]>;
}

export interface Migration {
  name: string;
  sql: string;
  checksum: string;
}

/** prisma/migrations, found from the sources (src/store/db) or the compiled code (dist/src/store/db). */
export function resolveMigrationsDir(): string {
  const candidates = ["../../../prisma/migrations", "../../../../prisma/migrations"].map((rel) => fileURLToPath(new URL(rel, import.meta.url)));
  return candidates.find((dir) => fs.existsSync(dir)) ?? candidates[0]!;
}

export function readMigrations(dir = resolveMigrationsDir()): Migration[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && fs.existsSync(path.join(dir, entry.name, "migration.sql")))
    .map((entry) => entry.name)
    .sort()
    .map((name) => {
      const sql = fs.readFileSync(path.join(dir, name, "migration.sql"), "utf8");
      return { name, sql, checksum: crypto.createHash("sha256").update(sql).digest("hex") };
    });
}

const BOOKKEEPING_TABLE = `CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;

// Same key for every replica: concurrent start-ups migrate one after another.
const LOCK_KEY = 72707369;

/** Applies pending migrations; returns the names applied. Fails on a changed or failed migration. */
export async function applyMigrations(session: MigrationSession, migrations = readMigrations(), opts: { advisoryLock: boolean } = { advisoryLock: true }): Promise<string[]> {
  if (opts.advisoryLock) await session.query("SELECT pg_advisory_lock($1)", [LOCK_KEY]);
  try {
    await session.exec(BOOKKEEPING_TABLE);
    const rows = await session.query<{ migration_name: string; checksum: string; finished_at: Date | null; rolled_back_at: Date | null }>(
      `SELECT migration_name, checksum, finished_at, rolled_back_at FROM "_prisma_migrations"`,
    );
    const applied = new Map(rows.filter((r) => !r.rolled_back_at).map((r) => [r.migration_name, r]));
    const done: string[] = [];
    for (const migration of migrations) {
      const row = applied.get(migration.name);
      if (row) {
        if (!row.finished_at) throw new Error(`Migration ${migration.name} failed earlier; resolve it with \`prisma migrate resolve\`.`);
        if (row.checksum !== migration.checksum) throw new Error(`Migration ${migration.name} was changed after it was applied.`);
        continue;
      }
      await session.exec("BEGIN");
      try {
        await session.exec(migration.sql);
        await session.query(
          `INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at, finished_at, applied_steps_count)
           VALUES ($1, $2, $3, now(), now(), 1)`,
          [crypto.randomUUID(), migration.checksum, migration.name],
        );
        await session.exec("COMMIT");
      } catch (err) {
        await session.exec("ROLLBACK");
        throw new Error(`Migration ${migration.name} failed: ${(err as Error).message}`);
      }
      done.push(migration.name);
    }
    return done;
  } finally {
    if (opts.advisoryLock) await session.query("SELECT pg_advisory_unlock($1)", [LOCK_KEY]);
  }
}
