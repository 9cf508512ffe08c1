// The embedded database's engine, on a thread of its own (see pglite-thread.ts for why and for the
// protocol). Plain JavaScript because a worker is started from a file that Node runs as it is, from
// the sources (tests, `npm run dev`) as from dist/ (`npm run build` copies it).
import { parentPort, workerData } from "node:worker_threads";
import { types } from "@electric-sql/pglite";
import { openPGlite } from "./pglite-open.mjs";

/** Every value comes back as PostgreSQL's text: the caller parses it (its parsers are functions, which cannot cross threads). */
const asText = Object.fromEntries(Object.keys(types.parsers).map((oid) => [oid, (text) => text]));

const engine = openPGlite(workerData.dir, workerData.loadDataDir && new Blob([workerData.loadDataDir]));
engine.catch(() => {}); // answered to each request below
/** Open transactions by id: their PGlite handle and how to end them. */
const transactions = new Map();
let nextTransaction = 1;

function fail(err) {
  // Structured cloning keeps only an Error's message: send the fields a caller reads (code, detail…).
  const fields = {};
  for (const key of ["name", "message", "code", "detail", "hint", "severity", "constraint", "table", "column", "schema", "position"]) {
    if (err && err[key] !== undefined) fields[key] = String(err[key]);
  }
  if (!fields.message) fields.message = String(err);
  return fields;
}

const handlers = {
  async query(db, { tx, sql, params, rowMode }) {
    const on = tx ? transactions.get(tx)?.handle : db;
    if (!on) throw new Error("this transaction has ended");
    const result = await on.query(sql, params, { rowMode, parsers: asText });
    return { rows: result.rows, fields: result.fields, affectedRows: result.affectedRows };
  },
  async exec(db, { tx, sql }) {
    const on = tx ? transactions.get(tx)?.handle : db;
    if (!on) throw new Error("this transaction has ended");
    await on.exec(sql);
    return null;
  },
  async begin(db) {
    const id = nextTransaction++;
    let end;
    const ended = new Promise((resolve) => {
      end = resolve;
    });
    const started = new Promise((resolve, reject) => {
      const outcome = db.transaction(async (handle) => {
        transactions.set(id, { handle, end, outcome });
        resolve(id);
        if ((await ended) === "rollback") await handle.rollback();
      });
      outcome.catch(reject);
      outcome.finally(() => transactions.delete(id)).catch(() => {});
    });
    return started;
  },
  async end(_db, { tx, how }) {
    const open = transactions.get(tx);
    if (!open) return null;
    open.end(how);
    await open.outcome;
    return null;
  },
  async dump(db) {
    const tarball = await db.dumpDataDir("none");
    return await tarball.arrayBuffer();
  },
  async close(db) {
    await db.close();
    return null;
  },
};

parentPort.on("message", async (request) => {
  try {
    const db = await engine;
    const result = await handlers[request.op](db, request);
    parentPort.postMessage({ id: request.id, result }, result instanceof ArrayBuffer ? [result] : []);
  } catch (err) {
    parentPort.postMessage({ id: request.id, error: fail(err) });
  }
});
