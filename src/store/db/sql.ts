// Kysely drivers for the two databases: the pg pool, and the embedded engine's thread. The store speaks
// Kysely only (store/sql.ts); these turn its compiled statements into driver calls, with values
// converted the way Prisma writes them (timestamps are UTC wall time, as Prisma stores DateTime), which
// rows.test.ts checks against Prisma's model API. Transactions are Kysely's: a connection of its own on
// PostgreSQL, the engine's own transaction on PGlite (which keeps every other statement out meanwhile).
import { type CompiledQuery, type DatabaseConnection, type Driver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler, type QueryResult } from "kysely";
import type pg from "pg";
import type { DB } from "../../generated/kysely/db.js";
import type { PGliteQueryable, PGliteThread } from "./pglite-thread.js";

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

type Run = (text: string, values: unknown[]) => Promise<{ rows: unknown[]; rowCount: number }>;

class Connection implements DatabaseConnection {
  constructor(public run: Run) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const { rows, rowCount } = await this.run(query.sql, toParams(query.parameters));
    return { rows: rows as R[], numAffectedRows: BigInt(rowCount) };
  }

  // biome-ignore lint/correctness/useYield: streaming is not offered; the store reads bounded pages
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error("the store does not stream queries");
  }
}

/**
 * Statement texts prepared under a name on PostgreSQL, so that a connection parses and analyses each
 * text once instead of at every call (Kysely sends the same few hundred texts over and over). Measured
 * with 50 runs in flight on one replica (`npm run bench -- scale-out`, alternating rounds): 46-55 reviews
 * a second against 40-45, review p99 640-790 ms against 870-1,000 ms (docs/benchmarks.md). Bounded: texts
 * past the first `max` (an IN list of every length, say) run unnamed, as every text did before.
 */
export class PreparedNames {
  private readonly names = new Map<string, string | null>();
  private next = 0;
  private off = false;

  constructor(readonly max = 1000) {}

  /** The name `text` is prepared under, or undefined to run it unnamed. */
  nameOf(text: string): string | undefined {
    if (this.off) return undefined;
    const known = this.names.get(text);
    if (known !== undefined) return known ?? undefined;
    if (this.next >= this.max) return undefined;
    const name = `crewline_${this.next++}`;
    this.names.set(text, name);
    return name;
  }

  /** Runs `text` unnamed from now on (its prepared plan went stale: see isStalePlan). */
  retire(text: string): void {
    this.names.set(text, null);
  }

  /** Runs every text unnamed from now on (a pooler loses them: see lostByPooler); true the first time. */
  disable(): boolean {
    const first = !this.off;
    this.off = true;
    this.names.clear();
    return first;
  }
}

/**
 * A connection pooler in transaction mode (PgBouncer before 1.21, Supavisor) hands each transaction to
 * any server connection, where a statement prepared on another one does not exist, or one of the same
 * name does already. The first such error turns naming off for the process (nothing is lost: the
 * statement runs again unnamed), so a deployment behind one works without DATABASE_PREPARED_STATEMENTS.
 */
function lostByPooler(err: unknown): boolean {
  const { code } = (err ?? {}) as { code?: string };
  return code === "26000" || code === "42P05";
}

/**
 * A prepared `SELECT *` whose table gained or lost a column since (a newer replica migrated during a
 * rolling deploy) fails once with this; the text then runs unnamed, and is retried unless a
 * transaction it was part of is aborted by now (its caller retries that).
 */
function isStalePlan(err: unknown): boolean {
  const { code, message } = (err ?? {}) as { code?: string; message?: string };
  return code === "0A000" && (message ?? "").includes("cached plan must not change result type");
}

class PgConnection extends Connection {
  inTransaction = false;
}

class PgDriver implements Driver {
  private readonly clients = new WeakMap<Connection, pg.PoolClient>();
  private readonly types;

  constructor(
    private readonly pool: pg.Pool,
    pgTypes: typeof pg.types,
    private readonly prepared: PreparedNames,
    /** Told once when a pooler made the driver stop naming statements. */
    private readonly onPoolerFound?: () => void,
  ) {
    this.types = {
      getTypeParser: ((oid: number, format?: string) => (oid === TIMESTAMP_OID ? parseUtcTimestamp : pgTypes.getTypeParser(oid, format as "text"))) as typeof pgTypes.getTypeParser,
    };
  }
  async init(): Promise<void> {}
  async acquireConnection(): Promise<DatabaseConnection> {
    const client = await this.pool.connect();
    const query = async (text: string, values: unknown[], name?: string) => {
      const result = await client.query({ text, values, types: this.types, ...(name ? { name } : {}) });
      return { rows: result.rows, rowCount: result.rowCount ?? 0 };
    };
    const connection: PgConnection = new PgConnection(async (text, values) => {
      // BEGIN, COMMIT and other statements without values go through the simple protocol, as before.
      const name = values.length ? this.prepared.nameOf(text) : undefined;
      try {
        return await query(text, values, name);
      } catch (err) {
        if (!name) throw err;
        if (isStalePlan(err)) this.prepared.retire(text);
        else if (lostByPooler(err)) {
          if (this.prepared.disable()) this.onPoolerFound?.();
        } else throw err;
        if (connection.inTransaction) throw err;
        return query(text, values);
      }
    });
    this.clients.set(connection, client);
    return connection;
  }
  async beginTransaction(c: DatabaseConnection): Promise<void> {
    await (c as PgConnection).run("BEGIN", []);
    (c as PgConnection).inTransaction = true;
  }
  async commitTransaction(c: DatabaseConnection): Promise<void> {
    (c as PgConnection).inTransaction = false;
    await (c as PgConnection).run("COMMIT", []);
  }
  async rollbackTransaction(c: DatabaseConnection): Promise<void> {
    (c as PgConnection).inTransaction = false;
    await (c as PgConnection).run("ROLLBACK", []);
  }
  async releaseConnection(c: DatabaseConnection): Promise<void> {
    this.clients.get(c as Connection)?.release();
  }
  async destroy(): Promise<void> {}
}

/** A connection to the embedded engine: its statements run on the engine, or on the transaction it opened. */
class PGliteConnection extends Connection {
  transaction?: Awaited<ReturnType<PGliteThread["begin"]>>;

  constructor(readonly engine: PGliteThread) {
    super(async (text, values) => {
      const on: PGliteQueryable = this.transaction ?? engine;
      const result = await on.query(text, values, PGLITE_OPTIONS);
      return { rows: result.rows, rowCount: result.affectedRows ?? 0 };
    });
  }
}
const PGLITE_OPTIONS = { parsers: { [TIMESTAMP_OID]: parseUtcTimestamp } };

class PGliteDriver implements Driver {
  constructor(private readonly engine: Promise<PGliteThread>) {}
  async init(): Promise<void> {}
  async acquireConnection(): Promise<DatabaseConnection> {
    return new PGliteConnection(await this.engine);
  }
  async beginTransaction(c: DatabaseConnection): Promise<void> {
    const connection = c as PGliteConnection;
    connection.transaction = await connection.engine.begin();
  }
  async commitTransaction(c: DatabaseConnection): Promise<void> {
    await (c as PGliteConnection).transaction?.end("commit");
  }
  async rollbackTransaction(c: DatabaseConnection): Promise<void> {
    await (c as PGliteConnection).transaction?.end("rollback");
  }
  async releaseConnection(): Promise<void> {}
  async destroy(): Promise<void> {}
}

function kyselyOn(driver: Driver): Kysely<DB> {
  return new Kysely<DB>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => driver,
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  });
}

export const sqlOnPostgres = (pool: pg.Pool, pgTypes: typeof pg.types, prepared = new PreparedNames(), onPoolerFound?: () => void): Kysely<DB> =>
  kyselyOn(new PgDriver(pool, pgTypes, prepared, onPoolerFound));
export const sqlOnPGlite = (engine: Promise<PGliteThread>): Kysely<DB> => kyselyOn(new PGliteDriver(engine));
