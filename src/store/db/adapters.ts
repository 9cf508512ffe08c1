// Driver adapters for Prisma's JS engine: embedded PGlite by default, PostgreSQL when DATABASE_URL says so.
import fs from "node:fs";
import path from "node:path";
import type { PGlite } from "@electric-sql/pglite";
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";

export function isPostgresUrl(url: string | undefined): url is string {
  return !!url && /^postgres(ql)?:\/\//i.test(url);
}

export function pgliteDir(dataDir: string): string {
  return path.join(dataDir, "pglite");
}

// The embedded engine's code is loaded on first use, so a PostgreSQL deployment never loads it
// (about 6 MB of resident memory).
// In memory (no dataDir), it may start from a copy of another database's files (`loadDataDir`, a
// tarball from PGlite's dumpDataDir): tests copy one migrated template instead of running initdb.
export async function openPGlite(dataDir: string | undefined, loadDataDir?: Blob): Promise<PGlite> {
  const { PGlite } = await import("@electric-sql/pglite");
  if (!dataDir) return new PGlite(loadDataDir ? { loadDataDir } : undefined);
  const dir = pgliteDir(dataDir);
  fs.mkdirSync(dir, { recursive: true });
  if (!fs.existsSync(path.join(dir, "PG_VERSION"))) {
    // A new folder is closed once right after it is created: PGlite 0.3 writes some of its files
    // (global/pg_filenode.map) only when it closes, and a folder whose first process was killed
    // before closing it cannot be opened again.
    const created = new PGlite(dir);
    await created.waitReady;
    await created.close();
  }
  return new PGlite(dir);
}

export async function pgliteAdapterFactory(pglite: PGlite): Promise<PrismaPg> {
  const { PrismaPGlite } = await import("pglite-prisma-adapter");
  // pglite-prisma-adapter is typed against an older @prisma/driver-adapter-utils; the runtime contract is the same.
  return new PrismaPGlite(pglite) as unknown as PrismaPg;
}

// @prisma/adapter-pg 6.19 cannot deserialize PostgreSQL's `name` type (OID 19), which the schema
// engine reads from the catalog during `migrate` (prisma/orm#27403). Report it as text (OID 25).
const NAME_OID = 19;
const TEXT_OID = 25;
function patchNameFields<R>(result: R): R {
  const fields = (result as { fields?: { dataTypeID: number }[] } | undefined)?.fields;
  for (const field of fields ?? []) if (field.dataTypeID === NAME_OID) field.dataTypeID = TEXT_OID;
  return result;
}
function patchQuery<T extends { query: (...args: any[]) => any }>(target: T): T {
  const original = target.query.bind(target);
  target.query = ((...args: any[]) => {
    const last = args[args.length - 1];
    if (typeof last === "function") {
      args[args.length - 1] = (err: unknown, res: unknown) => last(err, res && patchNameFields(res));
      return original(...args);
    }
    const out = original(...args);
    return out && typeof out.then === "function" ? out.then(patchNameFields) : out;
  }) as T["query"];
  return target;
}
class NameAsTextPool extends pg.Pool {
  constructor(config: pg.PoolConfig) {
    super(config);
    patchQuery(this);
    this.on("connect", (client) => void patchQuery(client));
  }
}

/** Adapter for the Prisma CLI (`prisma migrate deploy|status`), chosen from the environment. */
export async function migrationAdapterFactory(env: NodeJS.ProcessEnv): Promise<PrismaPg> {
  if (isPostgresUrl(env.DATABASE_URL)) {
    return new PrismaPg(new NameAsTextPool({ connectionString: env.DATABASE_URL, max: 2 }));
  }
  return pgliteAdapterFactory(await openPGlite(env.DATA_DIR ?? "./data"));
}
