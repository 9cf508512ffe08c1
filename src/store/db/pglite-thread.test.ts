import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PGliteThread } from "./pglite-thread.js";

describe("the embedded database's thread", () => {
  let db: PGliteThread;
  beforeAll(async () => {
    db = new PGliteThread(undefined);
    await db.exec(`CREATE TABLE t (id int PRIMARY KEY, body text, at timestamp(3), doc jsonb, raw bytea)`);
  }, 60_000);
  afterAll(() => db.close());

  it("returns rows parsed as PGlite parses them, and the caller's own parsers", async () => {
    await db.query(`INSERT INTO t VALUES ($1, $2, $3, $4, $5)`, [1, "ü ✓ \u{1F600}", "2026-11-25T10:00:00.123Z", JSON.stringify({ a: [1, 2] }), new Uint8Array([1, 2, 255])]);
    const { rows } = await db.query<{ id: number; body: string; at: unknown; doc: unknown; raw: Uint8Array }>(`SELECT * FROM t WHERE id = $1`, [1], {
      parsers: { 1114: (text: string) => `parsed:${text}` },
    });
    expect(rows).toEqual([{ id: 1, body: "ü ✓ \u{1F600}", at: "parsed:2026-11-25 10:00:00.123", doc: { a: [1, 2] }, raw: new Uint8Array([1, 2, 255]) }]);
    const arrays = await db.query(`SELECT id, body FROM t`, [], { rowMode: "array" });
    expect(arrays.rows).toEqual([[1, "ü ✓ \u{1F600}"]]);
    expect(arrays.fields.map((f) => f.name)).toEqual(["id", "body"]);
  });

  it("throws the engine's error with its code and constraint, and keeps working after it", async () => {
    await db.query(`INSERT INTO t (id) VALUES (2)`);
    const err = await db.query(`INSERT INTO t (id) VALUES (2)`).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "23505", constraint: "t_pkey" });
    expect((err as Error).message).toMatch(/duplicate key/);
    expect((await db.query(`SELECT count(*)::int AS n FROM t WHERE id = 2`)).rows).toEqual([{ n: 1 }]);
  });

  it("commits a transaction that returns, rolls back one that throws or calls rollback()", async () => {
    await db.transaction(async (tx) => void (await tx.query(`INSERT INTO t (id) VALUES (10)`)));
    await expect(
      db.transaction(async (tx) => {
        await tx.query(`INSERT INTO t (id) VALUES (11)`);
        throw new Error("changed my mind");
      }),
    ).rejects.toThrow("changed my mind");
    await db.transaction(async (tx) => {
      await tx.query(`INSERT INTO t (id) VALUES (12)`);
      await tx.rollback();
    });
    const { rows } = await db.query<{ id: number }>(`SELECT id FROM t WHERE id >= 10 ORDER BY id`);
    expect(rows.map((r) => r.id)).toEqual([10]);
  });

  it("keeps other statements out of an open transaction until it ends", async () => {
    const seen: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let begun!: () => void;
    const inTransaction = new Promise<void>((resolve) => {
      begun = resolve;
    });
    const tx = db.transaction(async (t) => {
      await t.query(`INSERT INTO t (id) VALUES (20)`);
      begun();
      await held;
      seen.push("transaction ends");
    });
    await inTransaction;
    const outside = db.query<{ n: number }>(`SELECT count(*)::int AS n FROM t WHERE id = 20`).then((r) => {
      seen.push("outside runs");
      return r.rows[0]!.n;
    });
    // A fixed wait: what is asserted is that nothing happens while the transaction is open.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(seen).toEqual([]);
    release();
    await tx;
    expect(await outside).toBe(1); // it saw the committed row
    expect(seen).toEqual(["transaction ends", "outside runs"]);
  });

  it("copies a database: dumpDataDir of one loads into another", async () => {
    const copy = new PGliteThread(undefined, await (await db.dumpDataDir()).arrayBuffer());
    try {
      expect((await copy.query<{ id: number }>(`SELECT id FROM t WHERE id = 10`)).rows).toEqual([{ id: 10 }]);
    } finally {
      await copy.close();
    }
  }, 60_000);

  it("answers every request after it is closed with an error, not a hang; a close is not reported as a stop", async () => {
    const stops: Error[] = [];
    const closed = new PGliteThread(undefined, undefined, (err) => stops.push(err));
    await closed.query(`SELECT 1`);
    await closed.close();
    await expect(closed.query(`SELECT 1`)).rejects.toThrow(/stopped/);
    expect(stops).toEqual([]);
  }, 60_000);

  it("reports once that its thread stopped when it was not closed, and fails the requests waiting for it", async () => {
    const stops: Error[] = [];
    const engine = new PGliteThread(undefined, undefined, (err) => stops.push(err));
    await engine.query(`SELECT 1`);
    const waiting = engine.query(`SELECT pg_sleep(2)`);
    // The thread dies as a crash would end it (an out-of-memory abort, a fault in the engine).
    await (engine as unknown as { worker: { terminate(): Promise<number> } }).worker.terminate();
    await expect(waiting).rejects.toThrow(/stopped/);
    await expect(engine.query(`SELECT 1`)).rejects.toThrow(/stopped/);
    expect(stops.map((e) => e.message)).toEqual([expect.stringMatching(/thread stopped/)]);
  }, 60_000);
});
