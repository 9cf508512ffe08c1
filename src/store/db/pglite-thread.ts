// The embedded database runs on a worker thread (pglite-worker.mjs), not on the bot's thread. PGlite
// executes each statement synchronously in WebAssembly: writing a crew's 2 MiB output took 80–100 ms
// of the event loop, during which no click, webhook or /healthz was answered. On its own thread the
// engine costs the bot only the copy of a statement's parameters and rows.
//
// What the bot's side offers is the part of PGlite's interface that Crewline uses (query, exec,
// transaction, dumpDataDir, close), so the SQL runner, the migrations and Prisma's PGlite adapter
// (tests read through it) talk to it as to PGlite itself. Protocol: each request carries an id and is
// answered once, with a result or an error's fields. A transaction is `begin` (answered with its id),
// statements naming that id, then `end` with commit or rollback; the engine's own transaction lock
// keeps other statements out meanwhile, as on the bot's thread before.
import { Worker } from "node:worker_threads";
import { messages, type ParserOptions, type Results, type RowMode, types } from "@electric-sql/pglite";

interface Request {
  op: "query" | "exec" | "begin" | "end" | "dump" | "close";
  tx?: number;
  sql?: string;
  params?: unknown[];
  rowMode?: RowMode;
  how?: "commit" | "rollback";
}

interface Answer {
  id: number;
  result?: unknown;
  error?: Record<string, string>;
}

interface RawResults {
  rows: unknown[];
  fields: { name: string; dataTypeID: number }[];
  affectedRows?: number;
}

export interface QueryOptions {
  rowMode?: RowMode;
  parsers?: ParserOptions;
}

/** What a statement runs on: the engine, or one of its transactions. */
export interface PGliteQueryable {
  query<T>(sql: string, params?: unknown[], options?: QueryOptions): Promise<Results<T>>;
  exec(sql: string): Promise<unknown>;
}

export interface PGliteTransaction extends PGliteQueryable {
  rollback(): Promise<void>;
  readonly closed: boolean;
}

/** Rebuilds the engine's error on this thread, as PGlite would have thrown it (code, detail, constraint…). */
function databaseError(fields: Record<string, string>): Error {
  const err = fields.code ? new messages.DatabaseError(fields.message ?? "database error", 0, "error") : new Error(fields.message);
  Object.assign(err, fields);
  return err;
}

/** Values arrive as PostgreSQL's text and are parsed here, with PGlite's parsers and the caller's. */
function parse<T>(raw: RawResults, options: QueryOptions | undefined): Results<T> {
  const { fields } = raw;
  const parsers = options?.parsers;
  const rows =
    options?.rowMode === "array"
      ? (raw.rows as (string | null)[][]).map((row) => row.map((value, i) => types.parseType(value, fields[i]!.dataTypeID, parsers)))
      : (raw.rows as Record<string, string | null>[]).map((row) => {
          for (const field of fields) row[field.name] = types.parseType(row[field.name] ?? null, field.dataTypeID, parsers);
          return row;
        });
  return { rows: rows as T[], fields, affectedRows: raw.affectedRows };
}

export class PGliteThread implements PGliteQueryable {
  private readonly worker: Worker;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (err: Error) => void }>();
  private nextId = 1;
  private exited: Error | undefined;
  private closing = false;

  /**
   * `dataDir` unset: in memory, optionally from `loadDataDir` (a tarball from dumpDataDir).
   * `onStopped`: told once if the engine's thread stops when it was not closed (every later request fails).
   */
  constructor(
    dataDir: string | undefined,
    loadDataDir?: ArrayBuffer,
    private readonly onStopped?: (err: Error) => void,
  ) {
    this.worker = new Worker(new URL("./pglite-worker.mjs", import.meta.url), {
      workerData: { dir: dataDir, loadDataDir },
      // The engine's own console output (PGlite prints nothing at its default debug level) is not
      // piped into the bot's: a piped or read stream keeps a finished process alive (the Prisma CLI
      // never exited). Errors come back as answers.
      stdout: true,
      stderr: true,
    });
    this.worker.unref(); // an idle engine keeps no process alive; a request waiting for an answer does (send)
    this.worker.on("message", (answer: Answer) => this.answer(answer));
    this.worker.on("error", (err) => this.fail(err));
    this.worker.on("exit", (code) => this.fail(new Error(`the embedded database's thread stopped (exit code ${code})`)));
  }

  query<T>(sql: string, params: unknown[] = [], options?: QueryOptions): Promise<Results<T>> {
    return this.on(undefined).query<T>(sql, params, options);
  }

  exec(sql: string): Promise<unknown> {
    return this.on(undefined).exec(sql);
  }

  /** Opens a transaction: statements on it run alone until it is ended (end() commits or rolls back). */
  async begin(): Promise<PGliteTransaction & { end(how: "commit" | "rollback"): Promise<void> }> {
    const id = (await this.send({ op: "begin" })) as number;
    let ending: Promise<unknown> | undefined;
    const end = async (how: "commit" | "rollback") => {
      ending ??= this.send({ op: "end", tx: id, how });
      await ending;
    };
    return {
      ...this.on(id),
      end,
      rollback: () => end("rollback"),
      get closed() {
        return !!ending;
      },
    };
  }

  /** Runs `fn` in one transaction: committed when it returns, rolled back when it throws or calls rollback(). */
  async transaction<T>(fn: (tx: PGliteTransaction) => Promise<T>): Promise<T> {
    const tx = await this.begin();
    try {
      const result = await fn(tx);
      await tx.end("commit");
      return result;
    } catch (err) {
      await tx.end("rollback").catch(() => {});
      throw err;
    }
  }

  async dumpDataDir(): Promise<Blob> {
    return new Blob([(await this.send({ op: "dump" })) as ArrayBuffer]);
  }

  async close(): Promise<void> {
    if (this.exited) return;
    this.closing = true;
    await this.send({ op: "close" }).catch(() => {});
    await this.worker.terminate();
  }

  private on(tx: number | undefined): PGliteQueryable {
    return {
      query: async <T>(sql: string, params: unknown[] = [], options?: QueryOptions) =>
        parse<T>((await this.send({ op: "query", tx, sql, params, rowMode: options?.rowMode })) as RawResults, options),
      exec: (sql: string) => this.send({ op: "exec", tx, sql }),
    };
  }

  private send(request: Request): Promise<unknown> {
    if (this.exited) return Promise.reject(this.exited);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ ...request, id });
    });
  }

  private answer({ id, result, error }: Answer): void {
    const waiting = this.pending.get(id);
    if (!waiting) return;
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker.unref();
    if (error) waiting.reject(databaseError(error));
    else waiting.resolve(result);
  }

  private fail(err: Error): void {
    if (!this.exited && !this.closing) this.onStopped?.(err);
    this.exited ??= err;
    for (const waiting of this.pending.values()) waiting.reject(err);
    this.pending.clear();
  }
}
