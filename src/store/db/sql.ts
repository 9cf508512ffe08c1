// Plain parameterized SQL on the connection Prisma uses (the pg pool, or the PGlite instance), for
// the few statements every run makes (lifecycle/rows.ts). Why not Prisma's $queryRaw: each call
// costs about 0.4 ms of CPU there (the query is compiled in WebAssembly even when raw) against about
// 0.15 ms on the driver, and a run makes a dozen of them. Results are converted the way Prisma
// returns them (timestamps are UTC, as Prisma stores DateTime), which rows.test.ts checks.

import type { PGlite } from "@electric-sql/pglite";
import type pg from "pg";
import type { PrismaClient } from "../../generated/prisma/client.js";

export type SqlValue = string | number | boolean | Date | null;

export interface SqlRunner {
  /** Rows and the count of rows changed, of a statement with $1…$n placeholders (the store's Kysely driver runs everything through this). */
  run<T>(text: string, values: readonly unknown[]): Promise<{ rows: T[]; rowCount: number }>;
  /** Rows of a statement with $1…$n placeholders. */
  query<T>(text: string, values: readonly SqlValue[]): Promise<T[]>;
  /** Rows changed by a statement. */
  execute(text: string, values: readonly SqlValue[]): Promise<number>;
  /**
   * Runs `fn` in one transaction on one connection: everything it writes through the runner it is
   * handed commits together or not at all (a state change and the Slack effect it calls for).
   */
  transaction<T>(fn: (tx: SqlRunner) => Promise<T>): Promise<T>;
}

const TIMESTAMP_OID = 1114; // timestamp without time zone: what Prisma's DateTime maps to

/** Prisma stores DateTime as UTC wall time in `timestamp(3)`; read it back as UTC, whatever TZ says. */
export function parseUtcTimestamp(text: string): Date {
  return new Date(`${text.replace(" ", "T")}Z`);
}

/** Dates go in as UTC ISO strings: drivers would otherwise send local time with an offset, which a
 * `timestamp without time zone` column silently drops. */
function toParams(values: readonly unknown[]): unknown[] {
  return values.map((v) => (v instanceof Date ? v.toISOString() : v));
}

type PgQueryable = Pick<pg.Pool, "query"> | Pick<pg.PoolClient, "query">;

export function pgSqlRunner(pool: pg.Pool, pgTypes: typeof pg.types): SqlRunner {
  const types = {
    getTypeParser: ((oid: number, format?: string) => (oid === TIMESTAMP_OID ? parseUtcTimestamp : pgTypes.getTypeParser(oid, format as "text"))) as typeof pgTypes.getTypeParser,
  };
  const on = (db: PgQueryable): Omit<SqlRunner, "transaction"> => ({
    async run<T>(text: string, values: readonly unknown[]) {
      const result = await db.query({ text, values: toParams(values), types });
      return { rows: result.rows as T[], rowCount: result.rowCount ?? 0 };
    },
    async query<T>(text: string, values: readonly SqlValue[]) {
      return (await db.query({ text, values: toParams(values), types })).rows as T[];
    },
    async execute(text: string, values: readonly SqlValue[]) {
      return (await db.query({ text, values: toParams(values), types })).rowCount ?? 0;
    },
  });
  const runner: SqlRunner = {
    ...on(pool),
    async transaction<T>(fn: (tx: SqlRunner) => Promise<T>) {
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        // Nested transactions run inside this one.
        const tx: SqlRunner = { ...on(client), transaction: (inner) => inner(tx) };
        const result = await fn(tx);
        await client.query("COMMIT");
        return result;
      } catch (err) {
        await client.query("ROLLBACK").catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },
  };
  return runner;
}

/**
 * Lets the event loop turn before a PGlite statement. PGlite runs each statement synchronously on the
 * bot's thread and resolves its promise at once, so a chain of statements (a transaction writing a
 * megabyte-sized output, its audit row and its effects) would otherwise run as one block of microtasks:
 * with a turn between them, requests (a click, /healthz) are answered between statements.
 */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

export function pgliteSqlRunner(engine: Promise<PGlite>): SqlRunner {
  const options = { parsers: { [TIMESTAMP_OID]: parseUtcTimestamp } };
  type Queryable = Pick<PGlite, "query">;
  const on = (db: () => Promise<Queryable>): Omit<SqlRunner, "transaction"> => {
    const query = async <T>(text: string, values: readonly unknown[]) => {
      const engine = await db();
      await turn();
      return engine.query<T>(text, toParams(values), options);
    };
    return {
      async run<T>(text: string, values: readonly unknown[]) {
        const result = await query<T>(text, values);
        return { rows: result.rows, rowCount: result.affectedRows ?? 0 };
      },
      async query<T>(text: string, values: readonly SqlValue[]) {
        return (await query<T>(text, values)).rows;
      },
      async execute(text: string, values: readonly SqlValue[]) {
        return (await query(text, values)).affectedRows ?? 0;
      },
    };
  };
  return {
    ...on(() => engine),
    async transaction<T>(fn: (tx: SqlRunner) => Promise<T>) {
      return (await engine).transaction(async (t) => {
        const tx: SqlRunner = { ...on(async () => t as unknown as Queryable), transaction: (inner) => inner(tx) };
        return fn(tx);
      });
    },
  };
}

// openDatabase registers the runner of each client it makes, so that code holding only the Prisma
// client (the lifecycle) reaches the same connection without another constructor argument.
const runners = new WeakMap<PrismaClient, SqlRunner>();

export function registerSqlRunner(prisma: PrismaClient, runner: SqlRunner): void {
  runners.set(prisma, runner);
}

export function sqlRunnerFor(prisma: PrismaClient): SqlRunner {
  const runner = runners.get(prisma);
  if (!runner) throw new Error("this Prisma client was not made by openDatabase, which gives it its SQL connection");
  return runner;
}
