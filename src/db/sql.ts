// Plain parameterized SQL on the connection Prisma uses (the pg pool, or the PGlite instance), for
// the few statements every run makes (lifecycle/rows.ts). Why not Prisma's $queryRaw: each call
// costs about 0.4 ms of CPU there (the query is compiled in WebAssembly even when raw) against about
// 0.15 ms on the driver, and a run makes a dozen of them. Results are converted the way Prisma
// returns them (timestamps are UTC, as Prisma stores DateTime), which rows.test.ts checks.

import type { PGlite } from "@electric-sql/pglite";
import type pg from "pg";
import type { PrismaClient } from "../generated/prisma/client.js";

export type SqlValue = string | number | boolean | Date | null;

export interface SqlRunner {
  /** Rows of a statement with $1…$n placeholders. */
  query<T>(text: string, values: readonly SqlValue[]): Promise<T[]>;
  /** Rows changed by a statement. */
  execute(text: string, values: readonly SqlValue[]): Promise<number>;
}

const TIMESTAMP_OID = 1114; // timestamp without time zone: what Prisma's DateTime maps to

/** Prisma stores DateTime as UTC wall time in `timestamp(3)`; read it back as UTC, whatever TZ says. */
export function parseUtcTimestamp(text: string): Date {
  return new Date(`${text.replace(" ", "T")}Z`);
}

/** Dates go in as UTC ISO strings: drivers would otherwise send local time with an offset, which a
 * `timestamp without time zone` column silently drops. */
function toParams(values: readonly SqlValue[]): (string | number | boolean | null)[] {
  return values.map((v) => (v instanceof Date ? v.toISOString() : v));
}

export function pgSqlRunner(pool: pg.Pool, pgTypes: typeof pg.types): SqlRunner {
  const types = {
    getTypeParser: ((oid: number, format?: string) => (oid === TIMESTAMP_OID ? parseUtcTimestamp : pgTypes.getTypeParser(oid, format as "text"))) as typeof pgTypes.getTypeParser,
  };
  return {
    async query<T>(text: string, values: readonly SqlValue[]) {
      return (await pool.query({ text, values: toParams(values), types })).rows as T[];
    },
    async execute(text: string, values: readonly SqlValue[]) {
      return (await pool.query({ text, values: toParams(values), types })).rowCount ?? 0;
    },
  };
}

export function pgliteSqlRunner(engine: Promise<PGlite>): SqlRunner {
  const options = { parsers: { [TIMESTAMP_OID]: parseUtcTimestamp } };
  return {
    async query<T>(text: string, values: readonly SqlValue[]) {
      return (await (await engine).query<T>(text, toParams(values), options)).rows;
    },
    async execute(text: string, values: readonly SqlValue[]) {
      return (await (await engine).query(text, toParams(values), options)).affectedRows ?? 0;
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
