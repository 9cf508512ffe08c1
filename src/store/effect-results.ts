// What the outbox's performers read and write on the rows their effects are about: the subject as
// it is when the effect runs, and what Slack answered (the message's ts, what it shows, whether its
// file is attached). Writes run in the transaction that completes the effect (worker.ts); their
// times come from the caller's injected clock.
//
// Only the writes that mark a message posted set updatedAt, as before: what a message shows (and
// whether its file is attached) is bookkeeping about Slack, not a change of the row's state, and
// usecases/reviews.ts compares a review's updatedAt with when a callback was observed.
import type { JsonValue } from "@prisma/client/runtime/client";
import { type Selectable, sql } from "kysely";
import { LIVE_STATES } from "../domain/states.js";
import type { Execution, FlowRequest, Review } from "../generated/prisma/client.js";
import type { ApprovalEntry } from "./decision-requests.js";
import { findReviewWithApprovals } from "./reviews.js";
import type { DB, Sql } from "./sql.js";

/** A value read from a jsonb column (already parsed by the driver), checked to be JSON. */
function jsonValue(value: unknown): JsonValue {
  if (value === null || typeof value === "string" || typeof value === "number" || typeof value === "boolean") return value;
  if (Array.isArray(value)) return value.map(jsonValue);
  if (typeof value === "object") {
    const out: Record<string, JsonValue> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = jsonValue(v);
    return out;
  }
  throw new Error(`not a JSON value: ${typeof value}`);
}

const executionOf = (row: Selectable<DB["Execution"]>): Execution => ({
  ...row,
  inputs: jsonValue(row.inputs),
  streamShown: row.streamShown == null ? null : jsonValue(row.streamShown),
});
const flowRequestOf = (row: Selectable<DB["FlowRequest"]>): FlowRequest => ({ ...row, emit: jsonValue(row.emit) });

/** A review, its run and its approvals, in one statement (every review effect reads the first two; a review message shows the approvals). */
export async function findReviewWithRun(db: Sql, id: string): Promise<{ review: Review; execution: Execution; approvals: ApprovalEntry[] } | undefined> {
  const found = await findReviewWithApprovals(db, id);
  if (!found) return undefined;
  const { execution, approvals, ...review } = found;
  return { review, execution: executionOf(execution), approvals };
}

export async function findReview(db: Sql, id: string): Promise<Review | undefined> {
  return db.selectFrom("Review").selectAll().where("id", "=", id).executeTakeFirst();
}

export async function findExecution(db: Sql, id: string): Promise<Execution | undefined> {
  const row = await db.selectFrom("Execution").selectAll().where("id", "=", id).executeTakeFirst();
  return row && executionOf(row);
}

export async function findFlowRequest(db: Sql, id: string): Promise<FlowRequest | undefined> {
  const row = await db.selectFrom("FlowRequest").selectAll().where("id", "=", id).executeTakeFirst();
  return row && flowRequestOf(row);
}

/** A review's message was posted showing `shownState`; returns the review's state now (undefined: gone). */
/** `channelId`: the channel of the message when not the run's (the direct message the run moved to). */
export async function recordReviewPosted(
  db: Sql,
  posted: { id: string; messageTs: string; shownState: string | null; now: Date; channelId?: string | null },
): Promise<string | undefined> {
  const row = await db
    .updateTable("Review")
    .set({ messageTs: posted.messageTs, channelId: posted.channelId ?? null, shownState: posted.shownState, updatedAt: posted.now })
    .where("id", "=", posted.id)
    .returning("state")
    .executeTakeFirst();
  return row?.state;
}

/** The review's message now shows `shownState`. */
export async function recordReviewShown(db: Sql, id: string, shownState: string): Promise<void> {
  await db.updateTable("Review").set({ shownState }).where("id", "=", id).execute();
}

export async function recordReviewFileAttached(db: Sql, id: string): Promise<void> {
  await db.updateTable("Review").set({ fileAttached: true }).where("id", "=", id).execute();
}

export async function recordCompletionPosted(db: Sql, posted: { executionId: string; completionTs: string; now: Date }): Promise<void> {
  await db.updateTable("Execution").set({ completionTs: posted.completionTs, updatedAt: posted.now }).where("id", "=", posted.executionId).execute();
}

export async function recordProgressPosted(db: Sql, executionId: string, progressTs: string): Promise<void> {
  await db.updateTable("Execution").set({ progressTs }).where("id", "=", executionId).execute();
}

/** The Slack user found for a flow request's assigned e-mail. */
export async function recordFlowAssignee(db: Sql, id: string, assigneeUserId: string): Promise<void> {
  await db.updateTable("FlowRequest").set({ assigneeUserId }).where("id", "=", id).execute();
}

/** A flow request's message was posted; returns the request's state now (undefined: gone). */
export async function recordFlowPosted(db: Sql, posted: { id: string; messageTs: string; now: Date }): Promise<string | undefined> {
  const row = await db.updateTable("FlowRequest").set({ messageTs: posted.messageTs, updatedAt: posted.now }).where("id", "=", posted.id).returning("state").executeTakeFirst();
  return row?.state;
}

export async function recordFlowFileAttached(db: Sql, id: string): Promise<void> {
  await db.updateTable("FlowRequest").set({ fileAttached: true }).where("id", "=", id).execute();
}

// ---------------------------------------------------------------- the live plan (message streaming)

/** Characters of a task's output the plan reads (its card shows fewer). */
const PLAN_OUTPUT_READ = 2_000;

/** The run's task outputs as its live plan reads them: every round, oldest first, outputs cut short in SQL. */
export async function planReviews(db: Sql, executionId: string) {
  return db
    .selectFrom("Review")
    .select(["taskKey", "taskName", "round", "state", "createdAt", sql<string>`left("output", ${PLAN_OUTPUT_READ})`.as("output")])
    .where("executionId", "=", executionId)
    .orderBy("createdAt")
    .orderBy("round")
    .execute();
}

/** The run's stream was started (ts) or appended to, and now shows `shown`; stopped when `stoppedAt` is given. */
export async function recordStreamShown(db: Sql, s: { executionId: string; ts: string; shown: Record<string, string>; stoppedAt?: Date }): Promise<void> {
  await db
    .updateTable("Execution")
    .set({ streamTs: s.ts, streamShown: JSON.stringify(s.shown), ...(s.stoppedAt ? { streamStoppedAt: s.stoppedAt } : {}) })
    .where("id", "=", s.executionId)
    .execute();
}

/**
 * The message that shows a run's latest step while its live plan waits for Slack to let it start was
 * posted (its ts) or updated, showing the step that arrived at `stepAt`.
 */
export async function recordEarlyProgress(db: Sql, e: { executionId: string; ts: string; stepAt: Date }): Promise<void> {
  await db.updateTable("Execution").set({ earlyTs: e.ts, earlyStepAt: e.stepAt }).where("id", "=", e.executionId).execute();
}

/** A run stopped before its live plan started: its early progress message said so, and its progress shows nothing more. */
export async function recordEarlyStopped(db: Sql, executionId: string, now: Date): Promise<void> {
  await db.updateTable("Execution").set({ streamStoppedAt: now }).where("id", "=", executionId).execute();
}

/** The live plans streaming in a workspace now (its live runs with a stream not stopped): they share its append tier. */
export async function countLiveStreams(db: Sql, teamId: string): Promise<number> {
  const row = await db
    .selectFrom("Execution")
    .select((eb) => eb.fn.countAll<string>().as("n"))
    .where("teamId", "=", teamId)
    .where("state", "in", [...LIVE_STATES])
    .where("streamTs", "is not", null)
    .where("streamStoppedAt", "is", null)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Slack refused streaming in the run's workspace: the early progress message, if any, becomes its progress message. */
export async function adoptEarlyProgress(db: Sql, executionId: string): Promise<void> {
  await db
    .updateTable("Execution")
    .set((eb) => ({ progressTs: eb.ref("earlyTs") }))
    .where("id", "=", executionId)
    .where("earlyTs", "is not", null)
    .where("progressTs", "is", null)
    .execute();
}

/** Slack said the stream is over (it stopped it itself): the next progress starts a new one. */
export async function forgetStream(db: Sql, executionId: string): Promise<void> {
  await db.updateTable("Execution").set({ streamTs: null, streamShown: null }).where("id", "=", executionId).execute();
}

/** Whether Slack refused message streaming in this workspace (every replica reads the same row). */
export async function streamingRefused(db: Sql, teamId: string): Promise<boolean> {
  const row = await db.selectFrom("StreamingRefusal").select("teamId").where("teamId", "=", teamId).executeTakeFirst();
  return !!row;
}

/** Records that Slack refused streaming in this workspace; true for the first refusal only (logged once). */
export async function recordStreamingRefused(db: Sql, r: { teamId: string; error: string; now: Date }): Promise<boolean> {
  const result = await db
    .insertInto("StreamingRefusal")
    .values({ teamId: r.teamId, error: r.error, refusedAt: r.now })
    .onConflict((oc) => oc.column("teamId").doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
}
