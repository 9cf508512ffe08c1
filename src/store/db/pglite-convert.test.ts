import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { PGlite as OldPGlite } from "pglite-v03";
import { describe, expect, it } from "vitest";
import { pgliteDir } from "./adapters.js";
import { openDatabase } from "./database.js";
import { applyMigrations, readMigrations } from "./migrate.js";
import { type Conversion, convertDataFolder, dataFolderMajor } from "./pglite-convert.js";

const oldSession = (db: OldPGlite) => ({
  exec: async (sql: string) => void (await db.exec(sql)),
  query: async <T>(sql: string, params?: unknown[]) => (await db.query<T>(sql, params)).rows,
});

/** A data folder as an earlier Crewline left it: PGlite 0.3, one migration behind, with rows in it. */
async function earlierFolder(): Promise<string> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-convert-"));
  const dir = pgliteDir(dataDir);
  fs.mkdirSync(dir, { recursive: true });
  const created = new OldPGlite(dir);
  await created.waitReady;
  await created.close();
  const old = new OldPGlite(dir);
  await applyMigrations(oldSession(old), readMigrations().slice(0, -1), { advisoryLock: false });
  for (let i = 0; i < 3; i++)
    await old.query(`INSERT INTO "SlackEffect" (id, kind, "subjectId", key, payload, "updatedAt") VALUES (gen_random_uuid(), 'run.message', gen_random_uuid(), $1, $2, now())`, [
      `key-${i}`,
      i === 1 ? null : JSON.stringify({ text: `résumé ${i} 🚀 "quoted"\n\ttabbed` }),
    ]);
  await old.close();
  return dataDir;
}

describe("an embedded database made by the earlier engine (PGlite 0.3, PostgreSQL 17)", () => {
  it("is converted at start: every row kept, migrated to the latest, sequences going on, the old folder kept as a backup", async () => {
    const dataDir = await earlierFolder();
    // What a conversion cut short (the process killed) leaves: started again from the old folder.
    fs.mkdirSync(`${pgliteDir(dataDir)}.converting`);
    fs.writeFileSync(`${pgliteDir(dataDir)}.converting/PG_VERSION`, "18\n");
    const conversions: Conversion[] = [];
    const database = openDatabase({ dataDir, onConverted: (c) => conversions.push(c) });
    try {
      expect(await database.migrate()).toEqual([]);
      const rows = await database.sql.selectFrom("SlackEffect").select(["key", "payload", "seq"]).orderBy("seq").execute();
      expect(rows.map((r) => [r.key, r.payload])).toEqual([
        ["key-0", { text: 'résumé 0 🚀 "quoted"\n\ttabbed' }],
        ["key-1", null],
        ["key-2", { text: 'résumé 2 🚀 "quoted"\n\ttabbed' }],
      ]);
      // The sequence goes on after the copied rows: a new message is ordered after them.
      await database.sql
        .insertInto("SlackEffect")
        .values({ id: crypto.randomUUID(), kind: "run.message", subjectId: crypto.randomUUID(), key: "key-new", updatedAt: new Date() })
        .execute();
      const added = await database.sql.selectFrom("SlackEffect").select("seq").where("key", "=", "key-new").executeTakeFirstOrThrow();
      expect(BigInt(added.seq as never)).toBeGreaterThan(BigInt(rows[2]!.seq as never));
      // The latest migration (which the earlier folder lacked) is applied, and Prisma's bookkeeping lists every one.
      const applied = await database.sql
        .selectFrom("_prisma_migrations" as never)
        .select("migration_name" as never)
        .execute();
      expect(applied).toHaveLength(readMigrations().length);
    } finally {
      await database.close();
    }
    expect(conversions).toEqual([expect.objectContaining({ from: "PostgreSQL 17", rows: 3 + readMigrations().length })]);
    const backup = conversions[0]!.backup;
    expect(dataFolderMajor(backup)).toBe("17");
    expect(dataFolderMajor(pgliteDir(dataDir))).toBe("18");
    expect(fs.existsSync(`${pgliteDir(dataDir)}.converting`)).toBe(false);

    // Opened again: nothing more to convert, the rows are still there.
    const again = openDatabase({ dataDir, onConverted: (c) => conversions.push(c) });
    try {
      await again.migrate();
      expect(await again.sql.selectFrom("SlackEffect").select("key").execute()).toHaveLength(4);
    } finally {
      await again.close();
    }
    expect(conversions).toHaveLength(1);

    // A conversion cut short between its last two renames (the old folder already the backup, the
    // converted one not yet in its place) is finished at the next start: its rows, not a new database.
    fs.renameSync(pgliteDir(dataDir), `${pgliteDir(dataDir)}.converted`);
    const resumed = openDatabase({ dataDir, onConverted: (c) => conversions.push(c) });
    try {
      await resumed.migrate();
      expect(await resumed.sql.selectFrom("SlackEffect").select("key").execute()).toHaveLength(4);
    } finally {
      await resumed.close();
    }
    expect(conversions.at(-1)).toEqual({ from: "PostgreSQL 17", backup });
    expect(fs.existsSync(`${pgliteDir(dataDir)}.converted`)).toBe(false);
  }, 60_000);

  it("cut short after its copy but before the old folder was moved aside: the next start moves it aside and puts the copy in its place", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-convert-"));
    const dir = pgliteDir(dataDir);
    for (const [folder, version] of [
      [dir, "17"],
      [`${dir}.converted`, "18"],
    ] as const) {
      fs.mkdirSync(folder, { recursive: true });
      fs.writeFileSync(path.join(folder, "PG_VERSION"), `${version}\n`);
    }
    const conversion = await convertDataFolder(dir, () => Promise.reject(new Error("no engine is opened to finish a conversion")), new Date("2026-11-27T05:00:00Z"));
    expect(conversion).toEqual({ from: "PostgreSQL 17", backup: `${dir}.pg17-backup-2026-11-27T05-00-00-000Z` });
    expect(dataFolderMajor(dir)).toBe("18");
    expect(dataFolderMajor(conversion!.backup)).toBe("17");
    expect(fs.existsSync(`${dir}.converted`)).toBe(false);
  });
});
