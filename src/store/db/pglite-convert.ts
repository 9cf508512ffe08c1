// Converts an embedded database made by an earlier Crewline (PGlite 0.3, PostgreSQL 17) to the engine
// it runs now (PGlite 0.5, PostgreSQL 18). A PostgreSQL data folder opens only in the major version
// that wrote it, so the rows are copied: the old folder is opened with the old engine (kept as the
// dependency `pglite-v03` for this alone), brought to the latest migration, and each table is copied
// with COPY into a new folder migrated the same way. The old folder stays beside the new one as a
// backup (`pglite.pg17-backup-<time>`); nothing is removed. Runs once, at start, before the engine's
// thread opens the folder; a conversion cut short leaves the old folder in place and starts again, and
// one cut short while its folders were being swapped is finished at the next start (placeConverted).
import fs from "node:fs";
import path from "node:path";
import { applyMigrations, type MigrationSession } from "./migrate.js";

/** The major version of PostgreSQL the engine runs (PGlite 0.5). */
export const ENGINE_MAJOR = "18";

/** What the conversion needs of an engine (both PGlite versions offer it). */
interface Engine {
  query<T>(sql: string, params?: unknown[], options?: { blob?: Blob }): Promise<{ rows: T[]; blob?: Blob }>;
  exec(sql: string): Promise<unknown>;
  close(): Promise<void>;
}

export interface Conversion {
  from: string;
  backup: string;
  /** What was copied (unknown for a conversion finished at a later start: its copy was counted then). */
  tables?: number;
  rows?: number;
}

/** The major version of PostgreSQL that wrote the folder, or undefined for a new (empty) folder. */
export function dataFolderMajor(dir: string): string | undefined {
  const file = path.join(dir, "PG_VERSION");
  return fs.existsSync(file) ? fs.readFileSync(file, "utf8").trim() : undefined;
}

const session = (engine: Engine): MigrationSession => ({
  exec: async (sql) => void (await engine.exec(sql)),
  query: async <T>(sql: string, params?: unknown[]) => (await engine.query<T>(sql, params)).rows,
});

const ident = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * Converts `dir` (an embedded database's PGlite folder) when an older engine wrote it; returns what it
 * did, or undefined when the folder is new or already the engine's.
 */
export async function convertDataFolder(dir: string, openNew: (dir: string) => Promise<Engine>, now = new Date()): Promise<Conversion | undefined> {
  const converted = `${dir}.converted`;
  // A conversion whose copy was complete, cut short while the folders were swapped.
  if (fs.existsSync(converted)) return { from: "PostgreSQL 17", backup: placeConverted(dir, converted, now) };
  const major = dataFolderMajor(dir);
  if (!major || major === ENGINE_MAJOR) return undefined;
  if (major !== "17") throw new Error(`The embedded database in ${dir} was written by PostgreSQL ${major}, which this Crewline cannot convert.`);
  const converting = `${dir}.converting`;
  fs.rmSync(converting, { recursive: true, force: true });
  const { PGlite: OldPGlite } = await import("pglite-v03");
  const old = (await OldPGlite.create(dir)) as unknown as Engine;
  let fresh: Engine | undefined;
  let tables = 0;
  let rows = 0;
  try {
    // Both sides at the latest migration: the same tables, with the same columns in the same order.
    await applyMigrations(session(old), undefined, { advisoryLock: false });
    fresh = await openNew(converting);
    await applyMigrations(session(fresh), undefined, { advisoryLock: false });
    const names = (await fresh.query<{ name: string }>(`SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`)).rows.map((r) => r.name);
    // Foreign keys are not checked while copying (the rows were consistent where they come from).
    await fresh.exec(`SET session_replication_role = replica`);
    await fresh.exec(`TRUNCATE ${names.map(ident).join(", ")}`);
    for (const name of names) {
      const columns = (
        await fresh.query<{ name: string }>(
          `SELECT column_name AS name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position`,
          [name],
        )
      ).rows
        .map((c) => ident(c.name))
        .join(", ");
      const copied = await old.query(`COPY ${ident(name)} (${columns}) TO '/dev/blob'`);
      if (copied.blob) await fresh.query(`COPY ${ident(name)} (${columns}) FROM '/dev/blob'`, [], { blob: copied.blob });
      const [before] = (await old.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${ident(name)}`)).rows;
      const [after] = (await fresh.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${ident(name)}`)).rows;
      if (before?.n !== after?.n) throw new Error(`Converting table ${name}: ${before?.n} rows before, ${after?.n} after.`);
      tables += 1;
      rows += Number(after?.n ?? 0);
    }
    await fresh.exec(`SET session_replication_role = DEFAULT`);
    // Sequences go on from where they were (SlackEffect.seq orders a thread's messages).
    const sequences = (
      await old.query<{ name: string; last: string | null }>(`SELECT sequencename AS name, last_value::text AS last FROM pg_sequences WHERE schemaname = 'public'`)
    ).rows;
    for (const s of sequences) if (s.last !== null) await fresh.query(`SELECT setval($1, $2::bigint, true)`, [ident(s.name), s.last]);
  } finally {
    await fresh?.close();
    await old.close();
  }
  // Marked complete first: a crash between the two renames below must not leave `dir` missing, which
  // the next start would take for a new, empty database.
  fs.renameSync(converting, converted);
  return { from: `PostgreSQL ${major}`, backup: placeConverted(dir, converted, now), tables, rows };
}

/** Moves the old folder aside as the backup (unless a cut-short swap did already) and the converted one in; returns the backup. */
function placeConverted(dir: string, converted: string, now: Date): string {
  const backups = `${path.basename(dir)}.pg17-backup-`;
  let backup: string;
  if (fs.existsSync(dir)) {
    backup = `${dir}.pg17-backup-${now.toISOString().replace(/[:.]/g, "-")}`;
    fs.renameSync(dir, backup);
  } else {
    const earlier = fs
      .readdirSync(path.dirname(dir))
      .filter((name) => name.startsWith(backups))
      .sort();
    backup = path.join(path.dirname(dir), earlier.at(-1) ?? "(none)");
  }
  fs.renameSync(converted, dir);
  return backup;
}
