// Review rows (one round of one task's output): storing a round, its conditional state moves, the
// decision columns, and its deadline's stamp (the claims of its reminders, deadline, escalation and
// reassignment, and its approvals, are in decision-requests.ts, shared with flow requests). Every
// write sets updatedAt (and any other time) from the time its caller passes (the injected clock).
import crypto from "node:crypto";
import { type Selectable, sql, type Updateable } from "kysely";
import { jsonArrayFrom } from "kysely/helpers/postgres";
import { parseUtcTimestamp } from "./db/sql.js";
import type { ApprovalEntry } from "./decision-requests.js";
import { type ExecutionRow, executionBeside, executionColumnsBeside, findExecutions } from "./executions.js";
import { isUuid } from "./ids.js";
import type { DB, Sql } from "./sql.js";

export type ReviewRow = Selectable<DB["Review"]>;
/** A review with the run it belongs to. */
export type ReviewWithExecution = ReviewRow & { execution: ExecutionRow };

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

const REVIEW_DECISION_COLUMNS = new Set(["decidedBy", "decision", "feedback", "decidedAt", "claimedBy", "decidedByDeadline", "resumeStatus", "resumeMessage"]);
/** The decision's columns; claimedBy: the replica holding it while it is "deciding". */
export type ReviewDecisionPatch = Partial<
  Pick<ReviewRow, "decidedBy" | "decision" | "feedback" | "decidedAt" | "claimedBy" | "decidedByDeadline" | "resumeStatus" | "resumeMessage">
>;

/** A state move: only from one of `from`, to `to`. */
export interface ReviewMove {
  from: readonly string[];
  to: string;
}

export async function findReview(db: Sql, id: string): Promise<ReviewRow | null> {
  if (!isUuid(id)) return null;
  return (await db.selectFrom("Review").selectAll().where("id", "=", id).executeTakeFirst()) ?? null;
}

/** The review and its run, or null: one statement (read for every review message and every decision). */
export async function findReviewWithExecution(db: Sql, id: string): Promise<ReviewWithExecution | null> {
  if (!isUuid(id)) return null;
  const found = await reviewAndRunQuery(db, id).executeTakeFirst();
  if (!found) return null;
  const { row, execution } = executionBeside(found);
  return { ...(row as ReviewRow), execution };
}

const reviewAndRunQuery = (db: Sql, id: string) =>
  db.selectFrom("Review").innerJoin("Execution", "Execution.id", "Review.executionId").selectAll("Review").select(executionColumnsBeside).where("Review.id", "=", id);

/**
 * The review, its run and its approvals in recording order, or null: one statement where two were
 * (every review message the outbox renders shows the approvals: review-context.ts).
 */
export async function findReviewWithApprovals(db: Sql, id: string): Promise<(ReviewWithExecution & { approvals: ApprovalEntry[] }) | null> {
  if (!isUuid(id)) return null;
  const found = await reviewAndRunQuery(db, id)
    .select((eb) =>
      jsonArrayFrom(
        eb
          .selectFrom("ReviewApproval")
          .select(["ReviewApproval.userId", "ReviewApproval.note", "ReviewApproval.editedOutput", "ReviewApproval.createdAt"])
          .whereRef("ReviewApproval.reviewId", "=", "Review.id")
          .orderBy("ReviewApproval.createdAt")
          .orderBy("ReviewApproval.id"),
      ).as("approvals"),
    )
    .executeTakeFirst();
  if (!found) return null;
  const { approvals, ...rest } = found;
  const { row, execution } = executionBeside(rest);
  // JSON has no timestamps: createdAt comes back as the column's UTC wall time in text.
  return { ...(row as ReviewRow), execution, approvals: approvals.map((a) => ({ ...a, createdAt: parseUtcTimestamp(String(a.createdAt)) })) };
}

/** The execution's most recent task output of all. */
export async function latestReviewOf(db: Sql, executionId: string): Promise<ReviewRow | null> {
  return (
    (await db.selectFrom("Review").selectAll().where("executionId", "=", executionId).orderBy("createdAt", "desc").orderBy("round", "desc").limit(1).executeTakeFirst()) ?? null
  );
}

const withOutputQuery = (db: Sql, executionId: string, outputHash: string) =>
  db.selectFrom("Review").selectAll().where("executionId", "=", executionId).where("outputHash", "=", outputHash).orderBy("createdAt", "desc").orderBy("round", "desc").limit(1);
const forTaskQuery = (db: Sql, executionId: string, taskKey: string) =>
  db.selectFrom("Review").selectAll().where("executionId", "=", executionId).where("taskKey", "=", taskKey).orderBy("round", "desc").limit(1);

/** The execution's most recent review of this exact output, if any. */
export async function latestReviewWithOutput(db: Sql, executionId: string, outputHash: string): Promise<ReviewRow | null> {
  return (await withOutputQuery(db, executionId, outputHash).executeTakeFirst()) ?? null;
}

/** The task's last round, if any. */
export async function latestReviewForTask(db: Sql, executionId: string, taskKey: string): Promise<ReviewRow | null> {
  return (await forTaskQuery(db, executionId, taskKey).executeTakeFirst()) ?? null;
}

/**
 * latestReviewWithOutput and latestReviewForTask in one statement (a task output arriving asks both:
 * reviews.ts, store).
 */
export async function latestWithOutputAndForTask(
  db: Sql,
  executionId: string,
  outputHash: string,
  taskKey: string,
): Promise<{ withOutput: ReviewRow | null; forTask: ReviewRow | null }> {
  const withOutput = withOutputQuery(db, executionId, outputHash).select(sql<string>`'output'`.as("which"));
  const forTask = forTaskQuery(db, executionId, taskKey).select(sql<string>`'task'`.as("which"));
  const rows = await db
    .selectFrom(withOutput.as("o"))
    .selectAll()
    .unionAll(db.selectFrom(forTask.as("t")).selectAll())
    .execute();
  const row = (which: string): ReviewRow | null => {
    const found = rows.find((r) => r.which === which);
    if (!found) return null;
    const { which: _, ...review } = found;
    return review;
  };
  return { withOutput: row("output"), forTask: row("task") };
}

/** One round of a task (what the next round's message shows of it). */
export async function findRound(
  db: Sql,
  executionId: string,
  taskKey: string,
  round: number,
): Promise<Pick<ReviewRow, "round" | "output" | "feedback" | "decidedBy" | "decision"> | null> {
  return (
    (await db
      .selectFrom("Review")
      .select(["round", "output", "feedback", "decidedBy", "decision"])
      .where("executionId", "=", executionId)
      .where("taskKey", "=", taskKey)
      .where("round", "=", round)
      .executeTakeFirst()) ?? null
  );
}

/** Stores a round; undefined when another delivery (or replica) stored the same round first. */
export async function insertReview(db: Sql, row: NewReviewRow, now: Date): Promise<ReviewRow | undefined> {
  return db
    .insertInto("Review")
    .values({ id: crypto.randomUUID(), ...row, createdAt: now, updatedAt: now })
    .onConflict((oc) => oc.columns(["executionId", "taskKey", "round"]).doNothing())
    .returningAll()
    .executeTakeFirst();
}

/**
 * Moves a review from one of `move.from` to `move.to`, with `patch`; null when it was in none of them.
 * `claimedAt`: only while the decision claimed at that time still holds it (a claim taken over by the
 * recovery sweep has another decidedAt, or none once the review opened again).
 */
export async function moveReview(
  db: Sql,
  id: string,
  move: ReviewMove,
  now: Date,
  patch: ReviewDecisionPatch & { resumeTaskId?: string } = {},
  claimedAt?: Date,
): Promise<ReviewRow | null> {
  if (!move.from.length) return null;
  const set: Updateable<DB["Review"]> = { state: move.to, updatedAt: now };
  for (const [column, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    if (!REVIEW_DECISION_COLUMNS.has(column) && column !== "resumeTaskId") throw new Error(`Review.${column} cannot be patched`);
    (set as Record<string, unknown>)[column] = value;
  }
  return (
    (await db
      .updateTable("Review")
      .set(set)
      .where("id", "=", id)
      .where("state", "in", [...move.from])
      .$if(claimedAt !== undefined, (q) => q.where("decidedAt", "=", claimedAt!))
      .returningAll()
      .executeTakeFirst()) ?? null
  );
}

export async function setResumeTaskId(db: Sql, id: string, resumeTaskId: string, now: Date): Promise<void> {
  await db.updateTable("Review").set({ resumeTaskId, updatedAt: now }).where("id", "=", id).execute();
}

/**
 * Locks the run's reviews in one of `states` (in a transaction, until it ends), before a write to the
 * run's own row: the order in which a review's promotion takes them (the review, then the run). A
 * transaction ending the run that took the run first and then its reviews could wait on a promotion
 * that waits on it: PostgreSQL would break that deadlock by failing one of them.
 */
export async function lockReviewsOf(tx: Sql, executionId: string, states: readonly string[]): Promise<void> {
  if (!states.length) return;
  await tx
    .selectFrom("Review")
    .select("id")
    .where("executionId", "=", executionId)
    .where("state", "in", [...states])
    .forNoKeyUpdate()
    .execute();
}

/** Moves every review of an execution in one of `from` to `to`; returns the ids moved. */
export async function moveReviewsOf(db: Sql, executionId: string, move: ReviewMove, now: Date): Promise<string[]> {
  if (!move.from.length) return [];
  const rows = await db
    .updateTable("Review")
    .set({ state: move.to, updatedAt: now })
    .where("executionId", "=", executionId)
    .where("state", "in", [...move.from])
    .returning("id")
    .execute();
  return rows.map((r) => r.id);
}

/**
 * Closes the rounds of a task before `round` that `move` moves (reviews still undecided), with `message`
 * as the crew's word on them; their ids and reminder counts.
 */
export async function closeEarlierRounds(
  db: Sql,
  p: { executionId: string; taskKey: string; round: number; move: ReviewMove; message: string; now: Date },
): Promise<{ id: string; remindersSent: number }[]> {
  if (!p.move.from.length) return [];
  return db
    .updateTable("Review")
    .set({ state: p.move.to, resumeMessage: p.message, updatedAt: p.now })
    .where("executionId", "=", p.executionId)
    .where("taskKey", "=", p.taskKey)
    .where("round", "<", p.round)
    .where("state", "in", [...p.move.from])
    .returning(["id", "remindersSent"])
    .execute();
}

/** Stamps a review's deadline once (a later promotion keeps the first); the row as it is now. */
export async function stampDeadline(db: Sql, id: string, deadline: { decideBy: Date; onTimeout: string }, now: Date): Promise<ReviewRow | null> {
  const sql = db;
  const stamped = await sql
    .updateTable("Review")
    .set({ decideBy: deadline.decideBy, onTimeout: deadline.onTimeout, updatedAt: now })
    .where("id", "=", id)
    .where("decideBy", "is", null)
    .returningAll()
    .executeTakeFirst();
  return stamped ?? (await findReview(sql, id));
}

/** Attaches each review's run (reviews whose run is gone are left out). */
export async function withExecutions(db: Sql, reviews: ReviewRow[]): Promise<ReviewWithExecution[]> {
  const executions = await findExecutions(
    db,
    reviews.map((r) => r.executionId),
  );
  return reviews.flatMap((r) => {
    const execution = executions.get(r.executionId);
    return execution ? [{ ...r, execution }] : [];
  });
}

/** Takes over an abandoned decision for replica `owner`: only whoever moves decidedAt from the value it read takes it. */
export async function retakeDecision(db: Sql, id: string, p: { seen: Date; now: Date; owner?: string }): Promise<boolean> {
  const result = await db
    .updateTable("Review")
    .set({ decidedAt: p.now, claimedBy: p.owner ?? null, updatedAt: p.now })
    .where("id", "=", id)
    .where("state", "=", "deciding")
    .where("decidedAt", "=", p.seen)
    .executeTakeFirst();
  return result.numUpdatedRows === 1n;
}

/**
 * The reviews a reply in the thread (channelId, threadTs) may be about, newest first: those of the run
 * whose thread it is, and a review posted in a direct message (a moved run) whose own thread it is.
 */
export async function reviewsInThread(db: Sql, p: { channelId: string; threadTs: string; limit: number }): Promise<ReviewWithExecution[]> {
  const sql = db;
  // Runs started from messages of the thread share it: the newest, as many as reviews are read (their
  // ids only: a finished run's row carries its output, and only the runs of the reviews found are read).
  const runs = await sql
    .selectFrom("Execution")
    .select("id")
    .where("channelId", "=", p.channelId)
    .where("threadTs", "=", p.threadTs)
    .orderBy("createdAt", "desc")
    .limit(p.limit)
    .execute();
  const ofRuns = runs.length
    ? await sql
        .selectFrom("Review")
        .selectAll()
        .where(
          "executionId",
          "in",
          runs.map((r) => r.id),
        )
        .where("state", "!=", "posted")
        .orderBy("createdAt", "desc")
        .limit(p.limit)
        .execute()
    : [];
  const moved = await sql.selectFrom("Review").selectAll().where("channelId", "=", p.channelId).where("messageTs", "=", p.threadTs).limit(1).execute();
  const executions = await findExecutions(
    db,
    [...ofRuns, ...moved].map((r) => r.executionId),
  );
  return [...ofRuns, ...moved].flatMap((review) => {
    const execution = executions.get(review.executionId);
    return execution ? [{ ...review, execution }] : [];
  });
}

/** The execution's reviews waiting for a decision (pending, or one being sent), oldest first. */
export function openReviewsOf(db: Sql, executionId: string): Promise<ReviewRow[]> {
  if (!isUuid(executionId)) return Promise.resolve([]);
  return db.selectFrom("Review").selectAll().where("executionId", "=", executionId).where("state", "in", ["pending", "deciding"]).orderBy("createdAt").execute();
}

/**
 * The tasks (crew and task name) whose output a crew waited on since `since` (their review became
 * decidable), the most recent last, at most `limit`: what a process that starts knows of them.
 */
export async function recentlyAwaitedTasks(db: Sql, p: { since: Date; limit: number }): Promise<{ crewName: string; taskName: string }[]> {
  const rows = await db
    .selectFrom("Review as r")
    .innerJoin("Execution as e", "e.id", "r.executionId")
    .select(["e.crewName", "r.taskName"])
    .select((eb) => eb.fn.max("r.createdAt").as("last"))
    .where("r.state", "in", ["pending", "deciding", "approved", "rejected"])
    .where("r.createdAt", ">=", p.since)
    .groupBy(["e.crewName", "r.taskName"])
    .orderBy("last", "desc")
    .limit(p.limit)
    .execute();
  return rows.reverse().map(({ crewName, taskName }) => ({ crewName, taskName }));
}
