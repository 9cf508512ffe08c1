// The store's Kysely handle runs on the same connection as Prisma, on the embedded database and
// (CREWLINE_TEST_DATABASE=postgres) on PostgreSQL: typed rows, UTC timestamps, JSON, transactions.
import { sql as sql_ } from "kysely";
import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { prismaOf } from "../../test/support/prisma.js";
import { createTestDatabase, createTestDatabaseUrl, POSTGRES_TEMPLATE_ENV, type TestDatabase, usePostgres } from "../../test/support/test-database.js";
import { PreparedNames, sqlOnPostgres } from "./db/sql.js";
import { inTransaction, type Sql } from "./sql.js";

let db: TestDatabase;

describe("store SQL handle", () => {
  beforeEach(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => db.drop());

  it("writes rows the model API reads back the same, timestamps exact in UTC and JSON intact", async () => {
    const sql = db.database.sql;
    const at = new Date("2026-03-29T01:30:00.123Z"); // a daylight-saving night in many zones
    const row = await sql
      .insertInto("SlackEffect")
      .values({
        id: crypto.randomUUID(),
        kind: "review.post",
        subjectId: crypto.randomUUID(),
        key: "k1",
        payload: JSON.stringify({ who: "<@U1> ✓ 漢字" }),
        runAt: at,
        updatedAt: at,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    expect(row.runAt).toEqual(at);
    expect(row.payload).toEqual({ who: "<@U1> ✓ 漢字" });
    const viaModel = await prismaOf(db.database).slackEffect.findUniqueOrThrow({ where: { id: row.id } });
    expect(viaModel.runAt).toEqual(at);
    expect(viaModel.payload).toEqual({ who: "<@U1> ✓ 漢字" });
    const changed = await sql.updateTable("SlackEffect").set({ attempts: 3 }).where("key", "=", "k1").executeTakeFirst();
    expect(changed.numUpdatedRows).toBe(1n);
  });

  it("commits a transaction together, and rolls back every statement of one that throws", async () => {
    const sql = db.database.sql;
    const insert = (tx: typeof sql, key: string) =>
      tx.insertInto("SlackEffect").values({ id: crypto.randomUUID(), kind: "run.progress", subjectId: crypto.randomUUID(), key, updatedAt: new Date() }).execute();
    await inTransaction(sql, async (tx) => {
      await insert(tx, "a");
      await insert(tx, "b");
    });
    await expect(
      inTransaction(sql, async (tx) => {
        await insert(tx, "c");
        await insert(tx, "a"); // duplicate key
      }),
    ).rejects.toThrow();
    const keys = (await sql.selectFrom("SlackEffect").select("key").orderBy("key").execute()).map((r) => r.key);
    expect(keys).toEqual(["a", "b"]);
  });

  describe.runIf(usePostgres)("prepared statements (PostgreSQL)", () => {
    const effect = (key: string) => ({ id: crypto.randomUUID(), kind: "review.post", subjectId: crypto.randomUUID(), key, updatedAt: new Date() });
    const readAll = (sql: Sql, key: string) => sql.selectFrom("SlackEffect").selectAll().where("key", "=", key).execute();

    it("prepares a statement once per connection and runs it by name after", async () => {
      const sql = db.database.sql;
      await sql.insertInto("SlackEffect").values(effect("p1")).execute();
      // One transaction: the same connection for all three reads and the look at what it prepared.
      const prepared = await inTransaction(sql, async (tx) => {
        for (let i = 0; i < 3; i++) expect(await readAll(tx, "p1")).toHaveLength(1);
        const { rows } = await sql_`SELECT statement FROM pg_prepared_statements`.execute(tx);
        return (rows as { statement: string }[]).map((r) => r.statement);
      });
      expect(prepared.filter((s) => s.includes('from "SlackEffect" where "key" = $1'))).toHaveLength(1);
    });

    it("behind a pooler that loses prepared statements: the statement runs again unnamed, and none is named after", async () => {
      // A pooler in transaction mode hands the next statement to a server connection where its name does
      // not exist: here the server forgets its prepared statements behind the driver's back.
      const pool = new pg.Pool({ connectionString: db.url, max: 1 });
      let told = 0;
      const sql = sqlOnPostgres(pool, pg.types, new PreparedNames(), () => told++);
      try {
        await sql.insertInto("SlackEffect").values(effect("l1")).execute();
        expect(await readAll(sql, "l1")).toHaveLength(1);
        await sql_`DEALLOCATE ALL`.execute(sql);
        expect(await readAll(sql, "l1")).toHaveLength(1);
        expect(await sql.selectFrom("SlackEffect").select("key").where("key", "=", "l1").execute()).toEqual([{ key: "l1" }]);
        const { rows } = await sql_`SELECT count(*)::int AS n FROM pg_prepared_statements`.execute(sql);
        expect(rows).toEqual([{ n: 0 }]);
        expect(told).toBe(1);
      } finally {
        await pool.end();
      }
    });

    it("prepares nothing under DATABASE_PREPARED_STATEMENTS=false", async () => {
      const pool = new pg.Pool({ connectionString: db.url, max: 1 });
      const sql = sqlOnPostgres(pool, pg.types, new PreparedNames(0));
      try {
        await sql.insertInto("SlackEffect").values(effect("u1")).execute();
        expect(await readAll(sql, "u1")).toHaveLength(1);
        const { rows } = await sql_`SELECT count(*)::int AS n FROM pg_prepared_statements`.execute(sql);
        expect(rows).toEqual([{ n: 0 }]);
      } finally {
        await pool.end();
      }
    });

    it("runs a statement whose prepared plan went stale (a column added by a migration) again unnamed: at once outside a transaction, after one aborted transaction in one", async () => {
      // A database of its own (the column added must not reach other tests), on one connection, so that
      // every statement meets the plan it prepared.
      const own = await createTestDatabaseUrl({ template: process.env[POSTGRES_TEMPLATE_ENV] });
      const pool = new pg.Pool({ connectionString: own.url, max: 1 });
      const sql = sqlOnPostgres(pool, pg.types);
      const readOne = (on: Sql, key: string) => on.selectFrom("SlackEffect").selectAll().where("key", "=", key).limit(1).executeTakeFirst();
      try {
        await sql.insertInto("SlackEffect").values(effect("s1")).execute();
        expect(await readAll(sql, "s1")).toHaveLength(1);
        expect(await readOne(sql, "s1")).toBeDefined();
        await sql_`ALTER TABLE "SlackEffect" ADD COLUMN "addedLater" integer`.execute(sql);
        expect(await readOne(sql, "s1")).toHaveProperty("addedLater", null);
        await expect(inTransaction(sql, (tx) => readAll(tx, "s1"))).rejects.toThrow("cached plan must not change result type");
        expect(await inTransaction(sql, (tx) => readAll(tx, "s1"))).toHaveLength(1);
      } finally {
        await pool.end();
        await own.drop();
      }
    });
  });
});

describe("PreparedNames", () => {
  it("names each text once, up to its bound, and runs a retired text unnamed", () => {
    const names = new PreparedNames(2);
    const a = names.nameOf("select 1 where a = $1");
    expect(a).toBeDefined();
    expect(names.nameOf("select 1 where a = $1")).toBe(a);
    const b = names.nameOf("select 2 where b = $1");
    expect(b).not.toBe(a);
    expect(names.nameOf("select 3 where c = $1")).toBeUndefined();
    names.retire("select 1 where a = $1");
    expect(names.nameOf("select 1 where a = $1")).toBeUndefined();
    // Turned off (a pooler lost one): nothing is named any more, and only the first turn says so.
    expect([names.disable(), names.disable()]).toEqual([true, false]);
    expect(names.nameOf("select 2 where b = $1")).toBeUndefined();
  });
});
