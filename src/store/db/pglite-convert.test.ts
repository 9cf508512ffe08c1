import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { PGlite as OldPGlite } from "pglite-v03";
import { describe, expect, it } from "vitest";
import { pgliteDir } from "./adapters.js";
import { openDatabase } from "./database.js";
import { applyMigrations, readMigrations } from "./migrate.js";
import { type Conversion, dataFolderMajor } from "./pglite-convert.js";

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
  }, 60_000);
});
