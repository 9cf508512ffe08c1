// Driver adapters for Prisma's JS engine: embedded PGlite by default, PostgreSQL when DATABASE_URL says so.
import path from "node:path";
import type { PGlite } from "@electric-sql/pglite";
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import type { PGliteThread } from "./pglite-thread.js";

export function isPostgresUrl(url: string | undefined): url is string {
  return !!url && /^postgres(ql)?:\/\//i.test(url);
}

export function pgliteDir(dataDir: string): string {
  return path.join(dataDir, "pglite");
}

export async function pgliteAdapterFactory(pglite: PGliteThread | PGlite): Promise<PrismaPg> {
  const { PrismaPGlite } = await import("pglite-prisma-adapter");
  // pglite-prisma-adapter is typed against an older @prisma/driver-adapter-utils and PGlite itself; it uses only
  // query, exec and transaction, which the engine's thread offers as PGlite does.
  return new PrismaPGlite(pglite as never) as unknown as PrismaPg;
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
  // The CLI opens the engine on its own thread: it runs one command, and an engine on a worker thread
  // kept it from exiting.
  const { openPGlite } = await import(new URL("./pglite-open.mjs", import.meta.url).href);
  unrefEngineTimers();
  return pgliteAdapterFactory(await openPGlite(pgliteDir(env.DATA_DIR ?? "./data")));
}

/**
 * PostgreSQL arms timers while it is idle (PGlite 0.5 runs them as Node timers: its statistics are
 * flushed 10 s after the last statement), and the CLI never closes its adapter, so they held the
 * command open after it had answered. In the CLI's process only, the engine's timers do not keep it alive.
 */
function unrefEngineTimers(): void {
  const setTimer = globalThis.setTimeout;
  const engineTimer = (callback: unknown) => typeof callback === "function" && callback.toString().includes("__emscripten_timeout");
  globalThis.setTimeout = ((callback: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const timer = setTimer(callback, ms, ...args);
    if (engineTimer(callback)) timer.unref();
    return timer;
  }) as typeof setTimeout;
}
