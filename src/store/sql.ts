// The store's one way to write SQL: Kysely, typed by the tables Prisma generates from the schema
// (prisma-kysely → src/generated/kysely/db.ts), running on the same connection as everything else
// (store/db/sql.ts's SqlRunner: the pg pool or the PGlite instance). Why not Prisma's model API on these
// paths: each Prisma query is compiled in WebAssembly (about 0.4 ms of CPU) against microseconds for
// Kysely, and a run makes dozens. Prisma keeps the schema, the migrations and the generated types.
//
// Transactions: `inTransaction(db, fn)` hands `fn` a Kysely bound to one transaction of the runner
// (commits together or not at all). Kysely's own `db.transaction()` is not used: the runner already
// owns transactions for both databases.
import {
  type CompiledQuery,
  type DatabaseConnection,
  type Driver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryResult,
  sql,
  type TransactionSettings,
} from "kysely";
import type { DB } from "../generated/kysely/db.js";
import type { Db } from "./db/database.js";
import { type SqlRunner, sqlRunnerFor } from "./db/sql.js";

export type { DB };
/** A typed SQL handle on the database, or on one transaction of it. */
export type Sql = Kysely<DB>;

class RunnerConnection implements DatabaseConnection {
  constructor(private readonly runner: SqlRunner) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const { rows, rowCount } = await this.runner.run<R>(query.sql, query.parameters);
    return { rows, numAffectedRows: BigInt(rowCount) };
  }

  // biome-ignore lint/correctness/useYield: streaming is not offered; the store reads bounded pages
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error("the store does not stream queries");
  }
}

class RunnerDriver implements Driver {
  private readonly connection: RunnerConnection;

  constructor(runner: SqlRunner) {
    this.connection = new RunnerConnection(runner);
  }
  async init(): Promise<void> {}
  async acquireConnection(): Promise<DatabaseConnection> {
    return this.connection;
  }
  async beginTransaction(_c: DatabaseConnection, _s: TransactionSettings): Promise<void> {
    throw new Error("use inTransaction() (store/sql.ts): the SQL runner owns transactions");
  }
  async commitTransaction(): Promise<void> {
    throw new Error("use inTransaction() (store/sql.ts)");
  }
  async rollbackTransaction(): Promise<void> {
    throw new Error("use inTransaction() (store/sql.ts)");
  }
  async releaseConnection(): Promise<void> {}
  async destroy(): Promise<void> {}
}

const runnerOfSql = new WeakMap<Sql, SqlRunner>();
const sqlOfRunner = new WeakMap<SqlRunner, Sql>();

/** The typed SQL handle over a runner (one per runner, cached). */
export function sqlOver(runner: SqlRunner): Sql {
  let sql = sqlOfRunner.get(runner);
  if (!sql) {
    sql = new Kysely<DB>({
      dialect: {
        createAdapter: () => new PostgresAdapter(),
        createDriver: () => new RunnerDriver(runner),
        createIntrospector: (db) => new PostgresIntrospector(db),
        createQueryCompiler: () => new PostgresQueryCompiler(),
      },
    });
    sqlOfRunner.set(runner, sql);
    runnerOfSql.set(sql, runner);
  }
  return sql;
}

/** The typed SQL handle of a database opened by openDatabase (its Prisma client names it). */
export function sqlOf(db: Db | Sql | SqlRunner): Sql {
  if (db instanceof Kysely) return db as Sql;
  if (typeof (db as SqlRunner).run === "function" && typeof (db as SqlRunner).transaction === "function") return sqlOver(db as SqlRunner);
  return sqlOver(sqlRunnerFor(db as Db));
}

/** The runner a handle runs on (for the few statements still written as text). */
export function runnerOf(sql: Sql): SqlRunner {
  const runner = runnerOfSql.get(sql);
  if (!runner) throw new Error("this Kysely handle was not made by store/sql.ts");
  return runner;
}

/**
 * Runs `fn` in one transaction: everything written through the handle it is given commits together
 * or not at all. Inside a transaction already, `fn` joins it.
 */
export function inTransaction<T>(sql: Sql, fn: (tx: Sql) => Promise<T>): Promise<T> {
  return runnerOf(sql).transaction((tx) => fn(sqlOver(tx)));
}

/** Whether the database answers (GET /healthz). */
export async function pingDatabase(db: Db | Sql | SqlRunner): Promise<void> {
  await sql`SELECT 1`.execute(sqlOf(db));
}
