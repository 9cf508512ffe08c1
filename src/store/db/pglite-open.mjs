// Opens PGlite in a data folder (or in memory), on whichever thread calls it: the embedded database's
// thread (pglite-worker.mjs), the Prisma CLI (adapters.ts) and the conversion of an older folder
// (pglite-convert.ts). Plain JavaScript, as the worker is.
import fs from "node:fs";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";

/**
 * PGlite's own start parameters (startParams replaces them, so they are kept), and a smaller buffer
 * cache: PostgreSQL's default 128 MB of shared buffers is most of the engine's resident memory, and
 * Crewline's tables are small. docs/benchmarks.md has the figures.
 */
export const START_PARAMS = [...PGlite.defaultStartParams, "-c", "shared_buffers=16MB"];

/** `dir` unset: in memory, optionally from `loadDataDir` (a tarball from dumpDataDir). */
export async function openPGlite(dir, loadDataDir) {
  const options = { startParams: START_PARAMS };
  if (!dir) return new PGlite({ ...options, ...(loadDataDir ? { loadDataDir } : {}) });
  fs.mkdirSync(dir, { recursive: true });
  if (!fs.existsSync(path.join(dir, "PG_VERSION"))) {
    // A new folder is closed once right after it is created: PGlite writes some of its files
    // (global/pg_filenode.map) only when it closes, and a folder whose first process was killed
    // before closing it cannot be opened again.
    const created = new PGlite(dir, options);
    await created.waitReady;
    await created.close();
  }
  return new PGlite(dir, options);
}
