// Opens the configured database (embedded PGlite or PostgreSQL), applies migrations, hands out Prisma.

import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaClient } from "../../generated/prisma/client.js";
import { isPostgresUrl, openPGlite, pgliteAdapterFactory } from "./adapters.js";
import { lockDataFolder } from "./data-lock.js";
import { applyMigrations, type MigrationSession } from "./migrate.js";
import { pgliteSqlRunner, pgSqlRunner, registerSqlRunner } from "./sql.js";

export type Db = PrismaClient;

export interface Database {
  prisma: Db;
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
}

export interface DatabaseOptions {
  /** postgres://… for PostgreSQL; unset for the embedded database. */
  databaseUrl?: string;
  /** Folder of the embedded database; unset keeps it in memory (tests). */
  dataDir?: string;
  /** Pool size for PostgreSQL. */
  poolSize?: number;
  /** Embedded and in memory only: start from these files (from dumpDataDir) instead of an empty database. */
  loadDataDir?: Blob;
}

export function openDatabase(opts: DatabaseOptions): Database {
  return isPostgresUrl(opts.databaseUrl) ? openPostgres(opts.databaseUrl, opts.poolSize ?? 10) : openEmbedded(opts.dataDir, opts.loadDataDir);
}

function openEmbedded(dataDir: string | undefined, loadDataDir: Blob | undefined): Database {
  // The engine loads asynchronously (see openPGlite); Prisma connects through it on its first query.
  // The data folder is locked first: PGlite would let a second process open it too.
  let unlock: (() => void) | undefined;
  const engine = Promise.resolve()
    .then(() => {
      if (dataDir) unlock = lockDataFolder(dataDir);
      return openPGlite(dataDir, loadDataDir);
    })
    .then(async (pglite) => ({ pglite, factory: await pgliteAdapterFactory(pglite) }));
  engine.catch(() => {}); // reported by the first query or migration that awaits it
  const adapter = {
    provider: "postgres",
    adapterName: "pglite-prisma-adapter",
    connect: async () => (await engine).factory.connect(),
    connectToShadowDb: async () => (await engine).factory.connectToShadowDb(),
  } as unknown as PrismaPg;
  const prisma = new PrismaClient({ adapter });
  const pglite = engine.then((e) => e.pglite);
  pglite.catch(() => {}); // reported where it is awaited
  registerSqlRunner(prisma, pgliteSqlRunner(pglite));
  const session: MigrationSession = {
    exec: async (sql) => void (await (await pglite).exec(sql)),
    query: async <T>(sql: string, params?: unknown[]) => (await (await pglite).query<T>(sql, params)).rows,
  };
  return {
    prisma,
    kind: "embedded",
    exclusive: !!dataDir,
    // One process owns an embedded database (its folder is locked), so no advisory lock is needed.
    migrate: () => applyMigrations(session, undefined, { advisoryLock: false }),
    close: async () => {
      await prisma.$disconnect();
      const opened = await pglite.catch(() => undefined);
      await opened?.close();
      unlock?.();
    },
    dumpDataDir: async () => (await pglite).dumpDataDir("none"),
  };
}

function openPostgres(url: string, poolSize: number): Database {
  // Idle connections keep no process alive on their own (a test worker that kept its database ends).
  const pool = new pg.Pool({ connectionString: url, max: poolSize, allowExitOnIdle: true });
  // A failed idle client must not crash the process; the pool replaces it.
  pool.on("error", () => {});
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool) });
  registerSqlRunner(prisma, pgSqlRunner(pool, pg.types));
  return {
    prisma,
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
    close: async () => {
      await prisma.$disconnect();
      await pool.end();
    },
  };
}
