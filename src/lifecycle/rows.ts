// The statements every run makes (read an execution, move its state, claim its notice, record an
// event or an audit row, store and post a review round), as parameterized SQL on the database
// connection itself (db/sql.ts says why). Rows come back in the same shapes as Prisma's model API
// returns them (rows.test.ts checks this on both databases); colder paths keep the model API.
import crypto from "node:crypto";
import type { Db } from "../db/database.js";
import { type SqlRunner, type SqlValue, sqlRunnerFor } from "../db/sql.js";
import type { AuditRecord, Execution, Review, WebhookEvent } from "../generated/prisma/client.js";
import type { NewExecution } from "./runs.js";

/** Execution columns the lifecycle writes after creation; only these may appear in a patch. */
const EXECUTION_PATCHABLE = [
  "kickoffId",
  "threadTs",
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
] as const satisfies readonly (keyof Execution)[];

export type ExecutionPatch = Partial<Pick<Execution, (typeof EXECUTION_PATCHABLE)[number]>>;

const PATCHABLE = new Set<string>(EXECUTION_PATCHABLE);

/** The SQL connection of a Prisma client, or a runner as given (a transaction's). */
export function runnerOf(db: Db | SqlRunner): SqlRunner {
  return typeof (db as SqlRunner).transaction === "function" && typeof (db as SqlRunner).query === "function" ? (db as SqlRunner) : sqlRunnerFor(db as Db);
}
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(id: string): boolean {
  return UUID.test(id);
}

/** Builds a statement's text and values side by side, numbering placeholders as it goes. */
class Statement {
  readonly values: SqlValue[] = [];

  /** Placeholder for a value: $n. */
  param(value: SqlValue): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }

  list(values: readonly SqlValue[]): string {
    return values.map((v) => this.param(v)).join(", ");
  }
}

/** `"col" = $n, …, "updatedAt" = $m`; column names come from the fixed list above, never from input. */
function setClause(st: Statement, patch: ExecutionPatch): string {
  const parts: string[] = [];
  for (const [column, value] of Object.entries(patch) as [string, SqlValue | undefined][]) {
    if (value === undefined) continue;
    if (!PATCHABLE.has(column)) throw new Error(`Execution.${column} cannot be patched`);
    parts.push(`"${column}" = ${st.param(value)}`);
  }
  // @updatedAt is filled in by Prisma's model API; these statements set it themselves.
  parts.push(`"updatedAt" = ${st.param(new Date())}`);
  return parts.join(", ");
}

export interface ExecutionCondition {
  /** Only when the row is in one of these states. */
  states?: readonly string[];
  /** Only while this replica holds the poll lease. */
  leaseOwner?: string;
}

function whereClause(st: Statement, id: string, cond: ExecutionCondition): string {
  const parts = [`id = ${st.param(id)}::uuid`];
  if (cond.states) parts.push(cond.states.length ? `state IN (${st.list(cond.states)})` : "FALSE");
  if (cond.leaseOwner !== undefined) parts.push(`"leaseOwner" = ${st.param(cond.leaseOwner)}`);
  return parts.join(" AND ");
}

export interface NewExecutionRow extends NewExecution {
  state: string;
  requestId: string;
  webhookSecret: string;
  humanInputToken: string;
}

export class ExecutionRows {
  private readonly sql: SqlRunner;

  constructor(db: Db | SqlRunner) {
    this.sql = runnerOf(db);
  }

  async insert(row: NewExecutionRow): Promise<Execution> {
    const now = new Date();
    const rows = await this.sql.query<Execution>(
      `INSERT INTO "Execution" (id, "crewName", "teamId", "channelId", "userId", inputs, state, "requestId", "webhookSecret", webhooks, "createdAt", "updatedAt", "nextPollAt", "humanInputToken", "enterpriseId")
       VALUES ($1::uuid, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $11, $11, $12, $13)
       RETURNING *`,
      [
        crypto.randomUUID(),
        row.crewName,
        row.teamId,
        row.channelId,
        row.userId,
        JSON.stringify(row.inputs),
        row.state,
        row.requestId,
        row.webhookSecret,
        row.webhooks,
        now,
        row.humanInputToken,
        row.enterpriseId ?? null,
      ],
    );
    return rows[0]!;
  }

  /** The execution, or null (also for an id that is not a uuid, which no execution has). */
  async find(id: string): Promise<Execution | null> {
    if (!isUuid(id)) return null;
    const rows = await this.sql.query<Execution>(`SELECT * FROM "Execution" WHERE id = $1::uuid`, [id]);
    return rows[0] ?? null;
  }

  /** Applies the patch if the condition holds; returns how many rows changed (0 or 1). */
  update(id: string, patch: ExecutionPatch, cond: ExecutionCondition = {}): Promise<number> {
    const st = new Statement();
    const text = `UPDATE "Execution" SET ${setClause(st, patch)} WHERE ${whereClause(st, id, cond)}`;
    return this.sql.execute(text, st.values);
  }

  /** As update, returning the changed row (null when the condition did not hold). */
  async updateReturning(id: string, patch: ExecutionPatch, cond: ExecutionCondition = {}): Promise<Execution | null> {
    const st = new Statement();
    const text = `UPDATE "Execution" SET ${setClause(st, patch)} WHERE ${whereClause(st, id, cond)} RETURNING *`;
    return (await this.sql.query<Execution>(text, st.values))[0] ?? null;
  }
}

export class EventRows {
  private readonly sql: SqlRunner;

  constructor(db: Db | SqlRunner) {
    this.sql = runnerOf(db);
  }

  /** Stores a callback unless the same delivery was stored before; returns its id when new. */
  async insert(executionId: string, kind: string, dedupeKey: string, payload: unknown): Promise<string | undefined> {
    const rows = await this.sql.query<{ id: string }>(
      `INSERT INTO "WebhookEvent" (id, "executionId", kind, "dedupeKey", payload, "receivedAt")
       VALUES ($1::uuid, $2::uuid, $3, $4, $5::jsonb, $6)
       ON CONFLICT ("executionId", "dedupeKey") DO NOTHING
       RETURNING id`,
      [crypto.randomUUID(), executionId, kind, dedupeKey, JSON.stringify(payload), new Date()],
    );
    return rows[0]?.id;
  }

  /** Counts a processing attempt and returns the event. */
  async startAttempt(id: string): Promise<WebhookEvent | null> {
    const rows = await this.sql.query<WebhookEvent>(`UPDATE "WebhookEvent" SET attempts = attempts + 1 WHERE id = $1::uuid RETURNING *`, [id]);
    return rows[0] ?? null;
  }

  async markProcessed(id: string): Promise<void> {
    await this.sql.execute(`UPDATE "WebhookEvent" SET "processedAt" = $1, "lastError" = NULL WHERE id = $2::uuid`, [new Date(), id]);
  }

  async markFailed(id: string, error: string): Promise<void> {
    await this.sql.execute(`UPDATE "WebhookEvent" SET "lastError" = $1 WHERE id = $2::uuid`, [error, id]);
  }
}

export type NewAuditRow = Omit<AuditRecord, "id" | "createdAt" | "detail" | "flowRequestId"> & { detail: Record<string, unknown> | null; flowRequestId?: string | null };

export async function insertAuditRow(db: Db | SqlRunner, row: NewAuditRow): Promise<AuditRecord> {
  const rows = await runnerOf(db).query<AuditRecord>(
    `INSERT INTO "AuditRecord" (id, "executionId", kind, "taskKey", round, actor, decision, feedback, "outputHash", "msToDecision", "resumeStatus", "resumeMessage", detail, "createdAt", "flowRequestId")
     VALUES ($1::uuid, $2::uuid, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::jsonb, $14, $15::uuid)
     RETURNING *`,
    [
      crypto.randomUUID(),
      row.executionId,
      row.kind,
      row.taskKey,
      row.round,
      row.actor,
      row.decision,
      row.feedback,
      row.outputHash,
      row.msToDecision,
      row.resumeStatus,
      row.resumeMessage,
      row.detail === null ? null : JSON.stringify(row.detail),
      new Date(),
      row.flowRequestId ?? null,
    ],
  );
  return rows[0]!;
}

export interface NewReviewRow {
  executionId: string;
  taskKey: string;
  taskName: string;
  agent: string | null;
  round: number;
  /** "posted" (a task message) or "pending" (a review). */
  state: string;
  resumeTaskId: string | null;
  output: string;
  outputHash: string;
}

/** What a review's message shows for a state: "deciding" looks like "pending". */
export function shownAs(state: string): string {
  return state === "deciding" ? "pending" : state;
}

const REVIEW_DECISION_COLUMNS = new Set(["decidedBy", "decision", "feedback", "decidedAt", "decidedByDeadline", "resumeStatus", "resumeMessage"]);
export type ReviewDecisionPatch = Partial<Pick<Review, "decidedBy" | "decision" | "feedback" | "decidedAt" | "decidedByDeadline" | "resumeStatus" | "resumeMessage">>;

export class ReviewRows {
  private readonly sql: SqlRunner;

  constructor(db: Db | SqlRunner) {
    this.sql = runnerOf(db);
  }

  async find(id: string): Promise<Review | null> {
    const rows = await this.sql.query<Review>(`SELECT * FROM "Review" WHERE id = $1::uuid`, [id]);
    return rows[0] ?? null;
  }

  /** The execution's most recent task output of all. */
  async latestOf(executionId: string): Promise<Review | null> {
    const rows = await this.sql.query<Review>(`SELECT * FROM "Review" WHERE "executionId" = $1::uuid ORDER BY "createdAt" DESC, round DESC LIMIT 1`, [executionId]);
    return rows[0] ?? null;
  }

  /** Moves a row between states (conditional on the current one); the moved row, or null when it was not in `from`. */
  async transition(id: string, t: { from: readonly string[]; to: string }, data: { resumeTaskId?: string } = {}): Promise<Review | null> {
    const rows = await this.sql.query<Review>(
      `UPDATE "Review" SET state = $1, "resumeTaskId" = COALESCE($2, "resumeTaskId"), "updatedAt" = $3
       WHERE id = $4::uuid AND state = ANY($5::text[]) RETURNING *`,
      [t.to, data.resumeTaskId ?? null, new Date(), id, `{${t.from.join(",")}}`],
    );
    return rows[0] ?? null;
  }

  /** Moves a row between states with the decision columns given (conditional on the current state); the moved row, or null. */
  async move(id: string, t: { from: readonly string[]; to: string }, patch: ReviewDecisionPatch = {}): Promise<Review | null> {
    const st = new Statement();
    const sets = [`state = ${st.param(t.to)}`, `"updatedAt" = ${st.param(new Date())}`];
    for (const [column, value] of Object.entries(patch) as [string, SqlValue | undefined][]) {
      if (value === undefined) continue;
      if (!REVIEW_DECISION_COLUMNS.has(column)) throw new Error(`Review.${column} cannot be patched`);
      sets.push(`"${column}" = ${st.param(value)}`);
    }
    const text = `UPDATE "Review" SET ${sets.join(", ")} WHERE id = ${st.param(id)}::uuid AND state IN (${st.list(t.from)}) RETURNING *`;
    return (await this.sql.query<Review>(text, st.values))[0] ?? null;
  }

  async setResumeTaskId(id: string, resumeTaskId: string): Promise<void> {
    await this.sql.execute(`UPDATE "Review" SET "resumeTaskId" = $1, "updatedAt" = $2 WHERE id = $3::uuid`, [resumeTaskId, new Date(), id]);
  }

  /** The execution's most recent review of this exact output, if any. */
  async latestWithOutput(executionId: string, outputHash: string): Promise<Review | null> {
    const rows = await this.sql.query<Review>(`SELECT * FROM "Review" WHERE "executionId" = $1::uuid AND "outputHash" = $2 ORDER BY "createdAt" DESC, round DESC LIMIT 1`, [
      executionId,
      outputHash,
    ]);
    return rows[0] ?? null;
  }

  /** The task's last round, if any. */
  async latestForTask(executionId: string, taskKey: string): Promise<Review | null> {
    const rows = await this.sql.query<Review>(`SELECT * FROM "Review" WHERE "executionId" = $1::uuid AND "taskKey" = $2 ORDER BY round DESC LIMIT 1`, [executionId, taskKey]);
    return rows[0] ?? null;
  }

  /** An execution's reviews still waiting for a decision, oldest first. */
  pendingOf(executionId: string): Promise<Review[]> {
    return this.sql.query<Review>(`SELECT * FROM "Review" WHERE "executionId" = $1::uuid AND state = 'pending' ORDER BY "createdAt"`, [executionId]);
  }

  /** Stores a round; undefined when another delivery (or replica) stored the same round first. */
  async insert(row: NewReviewRow): Promise<Review | undefined> {
    const rows = await this.sql.query<Review>(
      `INSERT INTO "Review" (id, "executionId", "taskKey", "taskName", agent, round, output, "outputHash", "createdAt", "updatedAt", state, "resumeTaskId")
       VALUES ($1::uuid, $2::uuid, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11)
       ON CONFLICT ("executionId", "taskKey", round) DO NOTHING
       RETURNING *`,
      [crypto.randomUUID(), row.executionId, row.taskKey, row.taskName, row.agent, row.round, row.output, row.outputHash, new Date(), row.state, row.resumeTaskId],
    );
    return rows[0];
  }
}
