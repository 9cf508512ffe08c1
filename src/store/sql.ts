// The store's one way to write SQL: Kysely, typed by the tables Prisma generates from the schema
// (prisma-kysely → src/generated/kysely/db.ts), on the handle openDatabase gives (db/database.ts).
// Why not Prisma's model API: each Prisma query is compiled in WebAssembly (about 0.4 ms of CPU)
// against microseconds for Kysely, and a run makes dozens. Prisma keeps the schema, the migrations
// and the generated types.
import { type Kysely, sql } from "kysely";
import type { DB } from "../generated/kysely/db.js";

export type { DB };
/** A typed SQL handle on the database, or on one transaction of it. */
export type Sql = Kysely<DB>;

/**
 * Runs `fn` in one transaction: everything written through the handle it is given commits together
 * or not at all. Inside a transaction already, `fn` joins it.
 */
export function inTransaction<T>(db: Sql, fn: (tx: Sql) => Promise<T>): Promise<T> {
  return db.isTransaction ? fn(db) : db.transaction().execute(fn);
}

/** Whether the database answers (GET /healthz). */
export async function pingDatabase(db: Sql): Promise<void> {
  await sql`SELECT 1`.execute(db);
}
