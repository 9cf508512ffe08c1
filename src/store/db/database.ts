// Opens the configured database (embedded PGlite or PostgreSQL), applies migrations, and hands out
// the one handle the bot queries it through: a Kysely instance (store/sql.ts). Prisma owns the schema,
// the migrations and the generated types; the bot itself never builds a Prisma client.

import { PrismaPg } from "@prisma/adapter-pg";
import type { Kysely } from "kysely";
import pg from "pg";
import type { DB } from "../../generated/kysely/db.js";
import { isPostgresUrl, pgliteAdapterFactory, pgliteDir } from "./adapters.js";
import { lockDataFolder } from "./data-lock.js";
import { applyMigrations, type MigrationSession } from "./migrate.js";
import { type Conversion, convertDataFolder } from "./pglite-convert.js";
import { PreparedNames, sqlOnPGlite, sqlOnPostgres } from "./sql.js";

export interface Database {
  /** The handle every query goes through. */
  sql: Kysely<DB>;
  kind: "embedded" | "postgres";
  /**
   * No other process can be using this database: an embedded one in a data folder this process has
   * locked (data-lock.ts). Every claim found in it at start is then an earlier incarnation's.
   * (An in-memory one is private to the process, but tests share it between several bots.)
   */
  exclusive: boolean;
  /** Applies pending migrations; returns the names applied. */
  migrate(): Promise<string[]>;
  close(): Promise<void>;
  /** Embedded only: the database's files as one tarball, for `loadDataDir` (tests copy a migrated template). */
  dumpDataDir?(): Promise<Blob>;
  /**
   * A Prisma driver adapter on the same connection, for Prisma's model API in tests (which read rows
   * the way Prisma's types describe them: test/support/prisma.ts). The bot itself does not load Prisma's
   * client (about 8 MB resident).
   */
  prismaAdapter(): PrismaPg;
}

export interface DatabaseOptions {
  /** postgres://… for PostgreSQL; unset for the embedded database. */
  databaseUrl?: string;
  /** Folder of the embedded database; unset keeps it in memory (tests). */
  dataDir?: string;
  /** Pool size for PostgreSQL. */
  poolSize?: number;
  /** PostgreSQL only: false runs every statement unnamed (db/sql.ts PreparedNames says why they are named). */
  preparedStatements?: boolean;
  /** PostgreSQL only: told once if a connection pooler lost a prepared statement, after which none is prepared. */
  onPreparedStatementsLost?: () => void;
  /** Embedded and in memory only: start from these files (from dumpDataDir) instead of an empty database. */
  loadDataDir?: Blob;
  /** Embedded only: told once when a data folder of an earlier engine was converted at start (pglite-convert.ts). */
  onConverted?: (conversion: Conversion) => void;
  /** Embedded only: told once if the engine's thread stops while the database is open (nothing more can be stored). */
  onEngineStopped?: (err: Error) => void;
}

/**
 * Connections per process on PostgreSQL: the crew callbacks processed at once
 * (usecases/callbacks.ts DEFAULT_PROCESSING_CONCURRENCY), the outbox's effects and the intake share
 * them. Measured with `npm run bench -- scale-out` (50 runs in flight on one replica, three rounds
 * each): 16 connections with 8 callbacks at once beat 10 with 4 (review visible p99 about 750 ms
 * against 960 ms, recorded → processed p50 180 ms against 350 ms); 6 at once on 16 does better still.
 */
const POSTGRES_POOL_SIZE = 16;

export function openDatabase(opts: DatabaseOptions): Database {
  return isPostgresUrl(opts.databaseUrl) ? openPostgres(opts.databaseUrl, opts.poolSize ?? POSTGRES_POOL_SIZE, opts) : openEmbedded(opts);
}

function openEmbedded({ dataDir, loadDataDir, onConverted, onEngineStopped }: DatabaseOptions): Database {
  // The engine starts on its own thread (pglite-thread.ts). The data folder is locked first: PGlite
  // would let a second process open it too.
  let unlock: (() => void) | undefined;
  const pglite = Promise.resolve().then(async () => {
    if (dataDir) {
      unlock = lockDataFolder(dataDir);
      const converted = await convertDataFolder(pgliteDir(dataDir), async (dir) => {
        const { openPGlite } = await import(new URL("./pglite-open.mjs", import.meta.url).href);
        return openPGlite(dir);
      });
      if (converted) onConverted?.(converted);
    }
    // Loaded on first use, so a PostgreSQL deployment never loads the engine's code.
    const { PGliteThread } = await import("./pglite-thread.js");
    return new PGliteThread(dataDir ? pgliteDir(dataDir) : undefined, await loadDataDir?.arrayBuffer(), onEngineStopped);
  });
  pglite.catch(() => {}); // reported by the first query or migration that awaits it
  const session: MigrationSession = {
    exec: async (sql) => void (await (await pglite).exec(sql)),
    query: async <T>(sql: string, params?: unknown[]) => (await (await pglite).query<T>(sql, params)).rows,
  };
  return {
    sql: sqlOnPGlite(pglite),
    kind: "embedded",
    exclusive: !!dataDir,
    // One process owns an embedded database (its folder is locked), so no advisory lock is needed.
    migrate: () => applyMigrations(session, undefined, { advisoryLock: false }),
    close: async () => {
      const opened = await pglite.catch(() => undefined);
      await opened?.close();
      unlock?.();
    },
    dumpDataDir: async () => (await pglite).dumpDataDir(),
    prismaAdapter: () => {
      const factory = pglite.then(pgliteAdapterFactory);
      return {
        provider: "postgres",
        adapterName: "pglite-prisma-adapter",
        connect: async () => (await factory).connect(),
        connectToShadowDb: async () => (await factory).connectToShadowDb(),
      } as unknown as PrismaPg;
    },
  };
}

function openPostgres(url: string, poolSize: number, opts: Pick<DatabaseOptions, "preparedStatements" | "onPreparedStatementsLost">): Database {
  // Idle connections keep no process alive on their own (a test worker that kept its database ends).
  const pool = new pg.Pool({ connectionString: url, max: poolSize, allowExitOnIdle: true });
  // A failed idle client must not crash the process; the pool replaces it.
  pool.on("error", () => {});
  return {
    sql: sqlOnPostgres(pool, pg.types, new PreparedNames(opts.preparedStatements === false ? 0 : undefined), opts.onPreparedStatementsLost),
    kind: "postgres",
    exclusive: false,
    migrate: async () => {
      const client = await pool.connect();
      try {
        return await applyMigrations({
          exec: async (sql) => void (await client.query(sql)),
          query: async <T>(sql: string, params?: unknown[]) => (await client.query(sql, params)).rows as T[],
        });
      } finally {
        client.release();
      }
    },
    close: () => pool.end(),
    prismaAdapter: () => new PrismaPg(pool),
  };
}
