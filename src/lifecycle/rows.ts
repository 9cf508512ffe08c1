// The statements every run makes (read an execution, move its state, claim its notice, record an
// event or an audit row, store and post a review round), written as parameterized SQL through Prisma's $queryRaw.
// Why: Prisma 6's client engine compiles each model query in WebAssembly on every call, about 1 ms of
// CPU, against about 0.3 ms for a raw statement (bench/README: half the bot's CPU per run was query
// compilation). Rows come back in the same shapes as the model API's (rows.test.ts checks this on
// both databases). Colder paths keep the model API.
import crypto from "node:crypto";
import type { Db } from "../db/database.js";
import { Prisma } from "../generated/prisma/client.js";
import type { AuditRecord, Execution, Review, WebhookEvent } from "../generated/prisma/client.js";
import type { NewExecution } from "./runs.js";

type Column = string | number | boolean | Date | null;

/** Execution columns the lifecycle writes after creation; only these may appear in a patch. */
const EXECUTION_PATCHABLE = [
  "kickoffId",
  "threadTs",
  "state",
  "progressTs",
  "output",
  "error",
  "completionTs",
  "noticeClaimedAt",
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
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(id: string): boolean {
  return UUID.test(id);
}

/** `"col" = $n, …, "updatedAt" = $m`; column names come from the fixed list above, never from input. */
function setClause(patch: ExecutionPatch): Prisma.Sql {
  const parts: Prisma.Sql[] = [];
  for (const [column, value] of Object.entries(patch) as [string, Column | undefined][]) {
    if (value === undefined) continue;
    if (!PATCHABLE.has(column)) throw new Error(`Execution.${column} cannot be patched`);
    parts.push(Prisma.sql`${Prisma.raw(`"${column}"`)} = ${value}`);
  }
  // @updatedAt is filled in by Prisma's model API; raw statements set it themselves (UTC, like Prisma).
  parts.push(Prisma.sql`"updatedAt" = ${new Date()}`);
  return Prisma.join(parts, ", ");
}

export interface ExecutionCondition {
  /** Only when the row is in one of these states. */
  states?: readonly string[];
  /** Only while this replica holds the poll lease. */
  leaseOwner?: string;
}

function whereClause(id: string, cond: ExecutionCondition): Prisma.Sql {
  const parts = [Prisma.sql`id = ${id}::uuid`];
  if (cond.states) parts.push(cond.states.length ? Prisma.sql`state IN (${Prisma.join([...cond.states])})` : Prisma.sql`FALSE`);
  if (cond.leaseOwner !== undefined) parts.push(Prisma.sql`"leaseOwner" = ${cond.leaseOwner}`);
  return Prisma.join(parts, " AND ");
}

export interface NewExecutionRow extends NewExecution {
  state: string;
  requestId: string;
  webhookSecret: string;
}

export class ExecutionRows {
  constructor(private readonly db: Db) {}

  async insert(row: NewExecutionRow): Promise<Execution> {
    const now = new Date();
    const rows = await this.db.$queryRaw<Execution[]>`
      INSERT INTO "Execution" (id, "crewName", "teamId", "channelId", "userId", inputs, state, "requestId", "webhookSecret", webhooks, "createdAt", "updatedAt", "nextPollAt")
      VALUES (${crypto.randomUUID()}::uuid, ${row.crewName}, ${row.teamId}, ${row.channelId}, ${row.userId}, ${JSON.stringify(row.inputs)}::jsonb,
              ${row.state}, ${row.requestId}, ${row.webhookSecret}, ${row.webhooks}, ${now}, ${now}, ${now})
      RETURNING *`;
    return rows[0]!;
  }

  /** The execution, or null (also for an id that is not a uuid, which no execution has). */
  async find(id: string): Promise<Execution | null> {
    if (!isUuid(id)) return null;
    const rows = await this.db.$queryRaw<Execution[]>`SELECT * FROM "Execution" WHERE id = ${id}::uuid`;
    return rows[0] ?? null;
  }

  /** Applies the patch if the condition holds; returns how many rows changed (0 or 1). */
  update(id: string, patch: ExecutionPatch, cond: ExecutionCondition = {}): Promise<number> {
    return this.db.$executeRaw`UPDATE "Execution" SET ${setClause(patch)} WHERE ${whereClause(id, cond)}`;
  }

  /** As update, returning the changed row (null when the condition did not hold). */
  async updateReturning(id: string, patch: ExecutionPatch, cond: ExecutionCondition = {}): Promise<Execution | null> {
    const rows = await this.db.$queryRaw<Execution[]>`UPDATE "Execution" SET ${setClause(patch)} WHERE ${whereClause(id, cond)} RETURNING *`;
    return rows[0] ?? null;
  }

  /**
   * Takes the right to post a finished run's completion notice: the run is finished, no notice is
   * posted, and nobody holds a claim newer than `staleBefore`. Returns the run when taken.
   */
  async claimNotice(id: string, finishedStates: readonly string[], now: Date, staleBefore: Date): Promise<Execution | null> {
    const rows = await this.db.$queryRaw<Execution[]>`
      UPDATE "Execution" SET "noticeClaimedAt" = ${now}, "updatedAt" = ${new Date()}
      WHERE id = ${id}::uuid AND state IN (${Prisma.join([...finishedStates])}) AND "completionTs" IS NULL
        AND ("noticeClaimedAt" IS NULL OR "noticeClaimedAt" < ${staleBefore})
      RETURNING *`;
    return rows[0] ?? null;
  }
}

export class EventRows {
  constructor(private readonly db: Db) {}

  /** Stores a callback unless the same delivery was stored before; returns its id when new. */
  async insert(executionId: string, kind: string, dedupeKey: string, payload: unknown): Promise<string | undefined> {
    const rows = await this.db.$queryRaw<{ id: string }[]>`
      INSERT INTO "WebhookEvent" (id, "executionId", kind, "dedupeKey", payload, "receivedAt")
      VALUES (${crypto.randomUUID()}::uuid, ${executionId}::uuid, ${kind}, ${dedupeKey}, ${JSON.stringify(payload)}::jsonb, ${new Date()})
      ON CONFLICT ("executionId", "dedupeKey") DO NOTHING
      RETURNING id`;
    return rows[0]?.id;
  }

  /** Counts a processing attempt and returns the event. */
  async startAttempt(id: string): Promise<WebhookEvent | null> {
    const rows = await this.db.$queryRaw<WebhookEvent[]>`UPDATE "WebhookEvent" SET attempts = attempts + 1 WHERE id = ${id}::uuid RETURNING *`;
    return rows[0] ?? null;
  }

  async markProcessed(id: string): Promise<void> {
    await this.db.$executeRaw`UPDATE "WebhookEvent" SET "processedAt" = ${new Date()}, "lastError" = NULL WHERE id = ${id}::uuid`;
  }

  async markFailed(id: string, error: string): Promise<void> {
    await this.db.$executeRaw`UPDATE "WebhookEvent" SET "lastError" = ${error} WHERE id = ${id}::uuid`;
  }
}

export type NewAuditRow = Omit<AuditRecord, "id" | "createdAt" | "detail"> & { detail: Record<string, unknown> | null };

export async function insertAuditRow(db: Db, row: NewAuditRow): Promise<AuditRecord> {
  const rows = await db.$queryRaw<AuditRecord[]>`
    INSERT INTO "AuditRecord" (id, "executionId", kind, "taskKey", round, actor, decision, feedback, "outputHash", "msToDecision", "resumeStatus", "resumeMessage", detail, "createdAt")
    VALUES (${crypto.randomUUID()}::uuid, ${row.executionId}::uuid, ${row.kind}, ${row.taskKey}, ${row.round}, ${row.actor}, ${row.decision}, ${row.feedback},
            ${row.outputHash}, ${row.msToDecision}, ${row.resumeStatus}, ${row.resumeMessage}, ${row.detail === null ? null : JSON.stringify(row.detail)}::jsonb, ${new Date()})
    RETURNING *`;
  return rows[0]!;
}

export interface NewReviewRow {
  executionId: string;
  taskKey: string;
  taskName: string;
  agent: string | null;
  round: number;
  output: string;
  outputHash: string;
  postClaimedAt: Date;
}

export class ReviewRows {
  constructor(private readonly db: Db) {}

  /** The execution's most recent review of this exact output, if any. */
  async latestWithOutput(executionId: string, outputHash: string): Promise<Review | null> {
    const rows = await this.db.$queryRaw<Review[]>`
      SELECT * FROM "Review" WHERE "executionId" = ${executionId}::uuid AND "outputHash" = ${outputHash}
      ORDER BY "createdAt" DESC, round DESC LIMIT 1`;
    return rows[0] ?? null;
  }

  /** The task's last round, if any. */
  async latestForTask(executionId: string, taskKey: string): Promise<Review | null> {
    const rows = await this.db.$queryRaw<Review[]>`
      SELECT * FROM "Review" WHERE "executionId" = ${executionId}::uuid AND "taskKey" = ${taskKey} ORDER BY round DESC LIMIT 1`;
    return rows[0] ?? null;
  }

  /** Stores a round; undefined when another delivery (or replica) stored the same round first. */
  async insert(row: NewReviewRow): Promise<Review | undefined> {
    const now = new Date();
    const rows = await this.db.$queryRaw<Review[]>`
      INSERT INTO "Review" (id, "executionId", "taskKey", "taskName", agent, round, output, "outputHash", "postClaimedAt", "createdAt", "updatedAt")
      VALUES (${crypto.randomUUID()}::uuid, ${row.executionId}::uuid, ${row.taskKey}, ${row.taskName}, ${row.agent}, ${row.round}, ${row.output},
              ${row.outputHash}, ${row.postClaimedAt}, ${now}, ${now})
      ON CONFLICT ("executionId", "taskKey", round) DO NOTHING
      RETURNING *`;
    return rows[0];
  }

  /** Records the posted message of a review. */
  async setMessage(id: string, messageTs: string, fileAttached: boolean): Promise<Review> {
    const rows = await this.db.$queryRaw<Review[]>`
      UPDATE "Review" SET "messageTs" = ${messageTs}, "fileAttached" = ${fileAttached}, "updatedAt" = ${new Date()} WHERE id = ${id}::uuid RETURNING *`;
    if (!rows[0]) throw new Error(`review ${id} does not exist`);
    return rows[0];
  }
}
