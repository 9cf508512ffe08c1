// Execution rows (one crew run each): creation, reads, conditional state moves and the poll lease.
// Every write sets updatedAt (and any other time) from the time its caller passes (the injected clock).
import crypto from "node:crypto";
import { type Selectable, sql, type Updateable } from "kysely";
import { isUuid } from "./ids.js";
import { ownerGone } from "./replicas.js";
import type { DB, Sql } from "./sql.js";

export type ExecutionRow = Selectable<DB["Execution"]>;

/** Execution columns the lifecycle writes after creation; only these may appear in a patch. */
const EXECUTION_PATCHABLE = [
  "kickoffId",
  "threadTs",
  "announcementTs",
  "state",
  "progressTs",
  "output",
  "error",
  "completionTs",
  "startedAt",
  "finishedAt",
  "nextPollAt",
  "pollBackoffMs",
  "leaseOwner",
  "leaseExpiresAt",
  "notFoundSince",
  "endSeenAt",
  "stoppedBy",
  "stopClaimedAt",
  "stopClaimedBy",
] as const satisfies readonly (keyof ExecutionRow)[];

export type ExecutionPatch = Partial<Pick<ExecutionRow, (typeof EXECUTION_PATCHABLE)[number]>>;

const PATCHABLE = new Set<string>(EXECUTION_PATCHABLE);

/**
 * Every Execution column, so that a run can be read beside another row in one statement
 * (executionBeside); the type below fails to compile when a column is missing from it.
 */
const EXECUTION_COLUMNS = [
  ...EXECUTION_PATCHABLE,
  "id",
  "crewName",
  "teamId",
  "enterpriseId",
  "channelId",
  "userId",
  "inputs",
  "requestId",
  "webhookSecret",
  "humanInputToken",
  "webhooks",
  "createdAt",
  "updatedAt",
  "movedTo",
  "movedBecause",
  "movedAt",
  "streamTs",
  "streamShown",
  "streamStoppedAt",
  "earlyTs",
  "earlyStepAt",
] as const satisfies readonly (keyof ExecutionRow)[];
const everyExecutionColumn: Exclude<keyof ExecutionRow, (typeof EXECUTION_COLUMNS)[number]> extends never ? true : never = true;
void everyExecutionColumn;

/** The prefix of the run's columns in a row read beside it (executionBeside). */
const RUN_PREFIX = "run$";

/** The run's columns to select beside another table's (joined as "Execution"), each under RUN_PREFIX. */
export const executionColumnsBeside = EXECUTION_COLUMNS.map((c) => `Execution.${c} as ${RUN_PREFIX}${c}` as const);

/** Splits a row read with executionColumnsBeside into the other table's row and the run's. */
export function executionBeside<T extends Record<string, unknown>>(row: T): { row: Omit<T, `${typeof RUN_PREFIX}${string}`>; execution: ExecutionRow } {
  const own: Record<string, unknown> = {};
  const execution: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(row)) {
    if (key.startsWith(RUN_PREFIX)) execution[key.slice(RUN_PREFIX.length)] = value;
    else own[key] = value;
  }
  return { row: own as Omit<T, `${typeof RUN_PREFIX}${string}`>, execution: execution as ExecutionRow };
}

export interface ExecutionCondition {
  /** Only when the row is in one of these states. */
  states?: readonly string[];
  /** Only while this replica holds the poll lease. */
  leaseOwner?: string;
  /** Only while no kickoff id is stored. */
  noKickoffId?: boolean;
  /** Only while the next poll is still due at this time (nobody asked for one sooner meanwhile). */
  nextPollAt?: Date;
}

export interface NewExecutionRow {
  crewName: string;
  teamId: string;
  /** Enterprise Grid org of the workspace, when there is one (finds an org-wide installation's token). */
  enterpriseId?: string | null;
  channelId: string;
  userId: string;
  inputs: Record<string, string>;
  webhooks: boolean;
  state: string;
  requestId: string;
  webhookSecret: string;
  humanInputToken: string;
}

export async function insertExecution(db: Sql, row: NewExecutionRow, now: Date): Promise<ExecutionRow> {
  return db
    .insertInto("Execution")
    .values({
      id: crypto.randomUUID(),
      crewName: row.crewName,
      teamId: row.teamId,
      enterpriseId: row.enterpriseId ?? null,
      channelId: row.channelId,
      userId: row.userId,
      inputs: JSON.stringify(row.inputs),
      state: row.state,
      requestId: row.requestId,
      webhookSecret: row.webhookSecret,
      humanInputToken: row.humanInputToken,
      webhooks: row.webhooks,
      createdAt: now,
      updatedAt: now,
      nextPollAt: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** The execution, or null (also for an id that is not a uuid, which no execution has). */
/**
 * Whether the crew was heard from about this run after `since`: a callback recorded (task, crew,
 * human input, event stream), or a step, which is not recorded itself but raises its run.progress
 * effect's `latestAt` (when the latest step arrived).
 */
export async function heardFromSince(db: Sql, executionId: string, since: Date): Promise<boolean> {
  const recorded = await db.selectFrom("WebhookEvent").select("id").where("executionId", "=", executionId).where("receivedAt", ">", since).limit(1).executeTakeFirst();
  if (recorded) return true;
  const stepped = await db
    .selectFrom("SlackEffect")
    .select("id")
    .where("subjectId", "=", executionId)
    .where("kind", "=", "run.progress")
    .where(sql<boolean>`COALESCE(("payload"->>'latestAt')::bigint, 0) > ${since.getTime()}`)
    .limit(1)
    .executeTakeFirst();
  return !!stepped;
}

export async function findExecution(db: Sql, id: string): Promise<ExecutionRow | null> {
  if (!isUuid(id)) return null;
  return (await db.selectFrom("Execution").selectAll().where("id", "=", id).executeTakeFirst()) ?? null;
}

export async function findExecutionByRequestId(db: Sql, requestId: string): Promise<ExecutionRow | null> {
  return (await db.selectFrom("Execution").selectAll().where("requestId", "=", requestId).executeTakeFirst()) ?? null;
}

export async function findExecutionByKickoffId(db: Sql, kickoffId: string): Promise<ExecutionRow | null> {
  return (await db.selectFrom("Execution").selectAll().where("kickoffId", "=", kickoffId).executeTakeFirst()) ?? null;
}

/** Executions by id (missing ids are left out). */
export async function findExecutions(db: Sql, ids: readonly string[]): Promise<Map<string, ExecutionRow>> {
  const wanted = [...new Set(ids)].filter(isUuid);
  if (!wanted.length) return new Map();
  const rows = await db.selectFrom("Execution").selectAll().where("id", "in", wanted).execute();
  return new Map(rows.map((r) => [r.id, r]));
}

/** A channel's most recent runs, newest first. */
export function recentExecutionsInChannel(db: Sql, channelId: string, take: number): Promise<ExecutionRow[]> {
  return db.selectFrom("Execution").selectAll().where("channelId", "=", channelId).orderBy("createdAt", "desc").limit(take).execute();
}

function changes(patch: ExecutionPatch, now: Date): Updateable<DB["Execution"]> {
  const set: Updateable<DB["Execution"]> = {};
  for (const [column, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    if (!PATCHABLE.has(column)) throw new Error(`Execution.${column} cannot be patched`);
    (set as Record<string, unknown>)[column] = value;
  }
  set.updatedAt = now;
  return set;
}

function conditional(sql: Sql, id: string, patch: ExecutionPatch, cond: ExecutionCondition, now: Date) {
  let query = sql.updateTable("Execution").set(changes(patch, now)).where("id", "=", id);
  if (cond.states) query = query.where("state", "in", [...cond.states]);
  if (cond.leaseOwner !== undefined) query = query.where("leaseOwner", "=", cond.leaseOwner);
  if (cond.noKickoffId) query = query.where("kickoffId", "is", null);
  if (cond.nextPollAt) query = query.where("nextPollAt", "=", cond.nextPollAt);
  return query;
}

/**
 * Runs still starting, with no kickoff id and no callback recorded, created before `before`: their
 * kickoff never answered, or its process died.
 */
export function unstartedRuns(db: Sql, p: { before: Date; limit: number }): Promise<ExecutionRow[]> {
  return db
    .selectFrom("Execution")
    .selectAll()
    .where("state", "=", "starting")
    .where("kickoffId", "is", null)
    .where("createdAt", "<", p.before)
    .where(({ not, exists, selectFrom }) => not(exists(selectFrom("WebhookEvent").select("WebhookEvent.id").whereRef("WebhookEvent.executionId", "=", "Execution.id"))))
    .orderBy("createdAt")
    .limit(p.limit)
    .execute();
}

/**
 * Whether the run is in one of `states`, holding it there until the transaction ends: a stop or finish
 * waits for the transaction, and then sees what it wrote. The lock is the one an update takes, not a
 * share lock: the transaction may go on to update the run, and two that upgraded a share lock each
 * would deadlock.
 */
export async function holdInStates(tx: Sql, id: string, states: readonly string[]): Promise<boolean> {
  if (!states.length) return false;
  return !!(await tx
    .selectFrom("Execution")
    .select("id")
    .where("id", "=", id)
    .where("state", "in", [...states])
    .forNoKeyUpdate()
    .executeTakeFirst());
}

/** Applies the patch if the condition holds; returns how many rows changed (0 or 1). */
export async function updateExecution(db: Sql, id: string, patch: ExecutionPatch, cond: ExecutionCondition, now: Date): Promise<number> {
  if (cond.states?.length === 0) return 0;
  const result = await conditional(db, id, patch, cond, now).executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** As updateExecution, returning the changed row (null when the condition did not hold). */
export async function updateExecutionReturning(db: Sql, id: string, patch: ExecutionPatch, cond: ExecutionCondition, now: Date): Promise<ExecutionRow | null> {
  if (cond.states?.length === 0) return null;
  return (await conditional(db, id, patch, cond, now).returningAll().executeTakeFirst()) ?? null;
}

/**
 * Claims the right to send a stop to the crew, once, for replica `owner`: the row must be in one of
 * `states` and carry no claim, or one younger than `staleBefore` whose holder is gone (heartbeat older
 * than `deadBefore`, replicas.ts), or a stale one (a process with no heartbeat row). The claimed row, or null.
 */
export async function claimStop(
  db: Sql,
  id: string,
  p: { userId: string; states: readonly string[]; staleBefore: Date; now: Date; owner?: string; deadBefore?: Date },
): Promise<ExecutionRow | null> {
  if (!isUuid(id) || !p.states.length) return null;
  return (
    (await db
      .updateTable("Execution")
      .set({ stoppedBy: p.userId, stopClaimedAt: p.now, stopClaimedBy: p.owner ?? null, updatedAt: p.now })
      .where("id", "=", id)
      .where("state", "in", [...p.states])
      .where((w) =>
        w.or([w("stopClaimedAt", "is", null), w("stopClaimedAt", "<", p.staleBefore), ...(p.deadBefore ? [ownerGone("Execution.stopClaimedBy", p.deadBefore, p.owner)] : [])]),
      )
      .returningAll()
      .executeTakeFirst()) ?? null
  );
}

/** Gives a stop claim back (the crew did not take the stop), unless the row is in one of `keep` (then it records who stopped it). */
export async function releaseStopClaim(db: Sql, id: string, p: { claimedAt: Date; keep: readonly string[]; now: Date }): Promise<void> {
  await db
    .updateTable("Execution")
    .set({ stoppedBy: null, stopClaimedAt: null, stopClaimedBy: null, updatedAt: p.now })
    .where("id", "=", id)
    .where("stopClaimedAt", "=", p.claimedAt)
    .where("state", "not in", [...p.keep])
    .execute();
}

/**
 * Takes up to `limit` due rows for `owner`: in one of `states`, kicked off, due at `now`, and not
 * leased by a live other replica (its lease running, its heartbeat fresher than `deadBefore`). SKIP LOCKED lets replicas take disjoint rows at the same time
 * without waiting.
 */
export function leaseDueExecutions(
  db: Sql,
  p: { owner: string; states: readonly string[]; leaseMs: number; limit: number; now: Date; deadBefore?: Date; except?: readonly string[] },
): Promise<ExecutionRow[]> {
  const sql = db;
  return sql
    .updateTable("Execution")
    .set({ leaseOwner: p.owner, leaseExpiresAt: new Date(p.now.getTime() + Math.round(p.leaseMs)), updatedAt: p.now })
    .where("id", "in", (eb) =>
      eb
        .selectFrom("Execution")
        .select("id")
        .where("state", "in", [...p.states])
        // The owner's own polls still under way are not taken again.
        .$if(!!p.except?.length, (q) => q.where("id", "not in", [...p.except!]))
        .where("kickoffId", "is not", null)
        .where("nextPollAt", "<=", p.now)
        .where((w) =>
          w.or([
            w("leaseOwner", "is", null),
            w("leaseExpiresAt", "<", p.now),
            w("leaseOwner", "=", p.owner),
            ...(p.deadBefore ? [ownerGone("Execution.leaseOwner", p.deadBefore)] : []),
          ]),
        )
        .orderBy("nextPollAt")
        .limit(Math.max(1, Math.round(p.limit)))
        .forUpdate()
        .skipLocked(),
    )
    .returningAll()
    .execute();
}
