// The store's Kysely handle runs on the same connection as Prisma, on the embedded database and
// (CREWLINE_TEST_DATABASE=postgres) on PostgreSQL: typed rows, UTC timestamps, JSON, transactions.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { prismaOf } from "../../test/support/prisma.js";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { inTransaction } from "./sql.js";

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
});
