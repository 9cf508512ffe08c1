// The lifecycle columns both kinds of decision request share (a review round, table Review; a flow's
// feedback request, table FlowRequest): the approvals toward N (ReviewApproval, FlowApproval), the
// lock their count takes, and the claims of reminders, escalation, reassignment and the deadline.
// One set of SQL for both: the columns have the same names in both tables, so each statement is
// written once against `Review`'s type (Kysely types each table apart) and runs on the table given.
import crypto from "node:crypto";
import { sql as raw, type Selectable } from "kysely";
import { ownerGone } from "./replicas.js";
import type { DB, Sql } from "./sql.js";

/** A table of decision requests. */
export type RequestTable = "Review" | "FlowRequest";
/** The rows each table holds. */
export type RequestRow<T extends RequestTable> = Selectable<DB[T]>;

/** Statements written once: the table's name is given, its type is Review's (their shared columns). */
const shared = (table: RequestTable) => table as "Review";
const rowOf = <T extends RequestTable>(row: unknown) => (row ?? null) as RequestRow<T> | null;

/** Each request table's approvals: the table and its column naming the request. */
const APPROVALS = { Review: { table: "ReviewApproval", key: "reviewId" }, FlowRequest: { table: "FlowApproval", key: "flowRequestId" } } as const;
const approvalsTable = (table: RequestTable) => APPROVALS[table] as (typeof APPROVALS)["Review"];

/** What the approval rules read of an approval (StoredApproval in domain/approvals.ts). */
export type ApprovalEntry = { userId: string; note: string | null; editedOutput: string | null; outcome?: string | null; createdAt: Date };

/** The request, locked until the transaction `tx` ends (its approvals are counted one at a time); the row, or null. */
export async function lockRequest<T extends RequestTable>(tx: Sql, table: T, id: string): Promise<RequestRow<T> | null> {
  return rowOf<T>(await tx.selectFrom(shared(table)).selectAll().where("id", "=", id).forUpdate().executeTakeFirst());
}

/** What recording an approval did: a new approver, a new note or edit from someone who had approved, or nothing. */
export type ApprovalAdded = "added" | "updated" | "unchanged";

/**
 * Records one person's approval. A later edit by the same person replaces their earlier edit (and a
 * new note their earlier note): "updated" when that changed anything. `outcome`: the approve-like
 * outcome chosen (flow requests only); another one moves the person's approval to it.
 */
export async function addApproval(
  db: Sql,
  table: RequestTable,
  a: { requestId: string; userId: string; note: string | null; editedOutput: string | null; outcome?: string | null },
  now: Date,
): Promise<ApprovalAdded> {
  const sql = db;
  const { table: approvals, key } = approvalsTable(table);
  const inserted = await sql
    .insertInto(approvals)
    .values({
      id: crypto.randomUUID(),
      [key]: a.requestId,
      userId: a.userId,
      note: a.note,
      editedOutput: a.editedOutput,
      ...(a.outcome !== undefined ? { outcome: a.outcome } : {}),
      createdAt: now,
    } as { id: string; reviewId: string; userId: string; createdAt: Date })
    .onConflict((oc) => oc.columns([key, "userId"]).doNothing())
    .returning("id")
    .executeTakeFirst();
  if (inserted) return "added";
  const outcome = a.outcome !== undefined ? { outcome: a.outcome } : undefined;
  if (a.note === null && a.editedOutput === null && !outcome) return "unchanged";
  const changed = await sql
    .updateTable(approvals)
    .set({ ...(a.note !== null ? { note: a.note } : {}), ...(a.editedOutput !== null ? { editedOutput: a.editedOutput, createdAt: now } : {}), ...outcome })
    .where(key, "=", a.requestId)
    .where("userId", "=", a.userId)
    .where((eb) =>
      eb.or([
        ...(a.note !== null ? [eb("note", "is distinct from", a.note)] : []),
        ...(a.editedOutput !== null ? [eb("editedOutput", "is distinct from", a.editedOutput)] : []),
        // FlowApproval's column (the table is typed as ReviewApproval, which has none).
        ...(outcome ? [eb(sql.dynamic.ref("outcome"), "is distinct from", outcome.outcome)] : []),
      ]),
    )
    .executeTakeFirst();
  return Number(changed.numUpdatedRows) > 0 ? "updated" : "unchanged";
}

/** Forgets a request's approvals (an answer they built that the flow refused for itself: counted again from none). */
export async function clearApprovals(db: Sql, table: RequestTable, requestId: string): Promise<void> {
  const { table: approvals, key } = approvalsTable(table);
  await db.deleteFrom(approvals).where(key, "=", requestId).execute();
}

/** A request's approvals, oldest first. */
export function approvalsOf(db: Sql, table: RequestTable, requestId: string): Promise<ApprovalEntry[]> {
  const { table: approvals, key } = approvalsTable(table);
  return db
    .selectFrom(approvals)
    .select(["userId", "note", "editedOutput", "createdAt"])
    .$if(table === "FlowRequest", (q) => q.select(raw<string | null>`"outcome"`.as("outcome")))
    .where(key, "=", requestId)
    .orderBy("createdAt")
    .orderBy("id")
    .execute();
}

/** Which of these requests the user has approved. */
export async function approvedBy(db: Sql, table: RequestTable, userId: string, requestIds: readonly string[]): Promise<Set<string>> {
  if (requestIds.length === 0) return new Set();
  const { table: approvals, key } = approvalsTable(table);
  const rows = await db.selectFrom(approvals).select(key).where("userId", "=", userId).where(key, "in", requestIds).execute();
  return new Set(rows.map((r) => r[key]));
}

/** Only requests of runs in these states, with a thread (and a kickoff id): a review's run must be live for its reminder or deadline. */
export interface LiveRuns {
  states: readonly string[];
  kickoff?: boolean;
}

/** Pending requests with a message (of live runs, when asked), the start of each list below. */
function pendingShown(sql: Sql, table: RequestTable, liveRuns: LiveRuns | undefined) {
  return sql
    .selectFrom(shared(table))
    .selectAll()
    .where("state", "=", "pending")
    .where("messageTs", "is not", null)
    .$if(!!liveRuns, (w) => w.where("executionId", "in", liveRunIds(sql, liveRuns!)));
}

/**
 * Pending requests, with a message, due a reminder at `now`: the next one planned is due, or none was
 * sent and the request is older than `afterMs`. Oldest first.
 */
export async function remindersDue<T extends RequestTable>(
  db: Sql,
  table: T,
  p: { now: Date; afterMs: number; max: number; limit: number; liveRuns?: LiveRuns },
): Promise<RequestRow<T>[]> {
  const firstDueBefore = new Date(p.now.getTime() - p.afterMs);
  return (await pendingShown(db, table, p.liveRuns)
    .where("remindersSent", "<", p.max)
    .where((w) => w.or([w("nextReminderAt", "<=", p.now), w.and([w("nextReminderAt", "is", null), w("remindersSent", "=", 0), w("createdAt", "<=", firstDueBefore)])]))
    .orderBy("createdAt")
    .limit(p.limit)
    .execute()) as RequestRow<T>[];
}

/**
 * Pending requests, with a message, whose deadline has passed at `now` and whose action was not taken:
 * not claimed yet, or claimed and never finished, its claim made before `staleBefore` or held by a
 * replica gone since `deadBefore` (replicas.ts). `takeoversOnly`: only the claims of gone replicas.
 * Soonest deadline first.
 */
export async function deadlinesDue<T extends RequestTable>(
  db: Sql,
  table: T,
  p: { now: Date; staleBefore: Date; deadBefore?: Date; self?: string; takeoversOnly?: boolean; limit: number; liveRuns?: LiveRuns },
): Promise<RequestRow<T>[]> {
  if (p.takeoversOnly && !p.deadBefore) return [];
  const gone = p.deadBefore ? [ownerGone(`${table}.deadlineClaimedBy`, p.deadBefore, p.self)] : [];
  return (await pendingShown(db, table, p.liveRuns)
    .where("decideBy", "<=", p.now)
    .where("deadlineDoneAt", "is", null)
    .where((w) =>
      p.takeoversOnly
        ? w.and([w("deadlineHandledAt", "is not", null), w.or(gone)])
        : w.or([w("deadlineHandledAt", "is", null), w("deadlineHandledAt", "<", p.staleBefore), ...gone]),
    )
    .orderBy("decideBy")
    .limit(p.limit)
    .execute()) as RequestRow<T>[];
}

/**
 * Decisions whose process died between the claim and the answer's delivery: in one of `states` (the
 * claim's), claimed before `before`, or held by a replica gone since `deadBefore` (replicas.ts).
 * Oldest claim first.
 */
export async function abandonedRequests<T extends RequestTable>(
  db: Sql,
  table: T,
  p: { states: readonly string[]; before: Date; deadBefore?: Date; self?: string; limit: number },
): Promise<RequestRow<T>[]> {
  return (await db
    .selectFrom(shared(table))
    .selectAll()
    .where("state", "in", [...p.states])
    .where((w) => w.or([w("decidedAt", "<", p.before), ...(p.deadBefore ? [ownerGone(`${table}.claimedBy`, p.deadBefore, p.self)] : [])]))
    .orderBy("decidedAt")
    .limit(p.limit)
    .execute()) as RequestRow<T>[];
}

/** The ids of the runs that are live: in one of these states, with a thread (and a kickoff id). */
function liveRunIds(sql: Sql, runs: LiveRuns) {
  const live = sql
    .selectFrom("Execution")
    .select("id")
    .where("state", "in", [...runs.states])
    .where("threadTs", "is not", null);
  return runs.kickoff ? live.where("kickoffId", "is not", null) : live;
}

/** The claim on reminder number `sent`: only whoever moves remindersSent from `sent - 1` sends it. */
export async function claimReminder(db: Sql, table: RequestTable, id: string, p: { sent: number; nextReminderAt: Date | null; now: Date }): Promise<boolean> {
  const result = await db
    .updateTable(shared(table))
    .set({ remindersSent: p.sent, nextReminderAt: p.nextReminderAt, updatedAt: p.now })
    .where("id", "=", id)
    .where("state", "=", "pending")
    .where("remindersSent", "=", p.sent - 1)
    .executeTakeFirst();
  return result.numUpdatedRows === 1n;
}

/** Escalates a pending request once; the escalated row, or null (decided, or escalated already). */
export async function claimEscalation<T extends RequestTable>(db: Sql, table: T, id: string, p: { to: string; now: Date }): Promise<RequestRow<T> | null> {
  return rowOf<T>(
    await db
      .updateTable(shared(table))
      .set({ escalatedAt: p.now, escalatedTo: p.to, updatedAt: p.now })
      .where("id", "=", id)
      .where("state", "=", "pending")
      .where("escalatedAt", "is", null)
      .returningAll()
      .executeTakeFirst(),
  );
}

/** Hands a pending request to someone; the reassigned row, or null (no longer pending). */
export async function claimReassignment<T extends RequestTable>(
  db: Sql,
  table: T,
  id: string,
  p: { to: string; by: string; reason: string | null; now: Date },
): Promise<RequestRow<T> | null> {
  return rowOf<T>(
    await db
      .updateTable(shared(table))
      .set({ reassignedTo: p.to, reassignedBy: p.by, reassignReason: p.reason, reassignedAt: p.now, updatedAt: p.now })
      .where("id", "=", id)
      .where("state", "=", "pending")
      .returningAll()
      .executeTakeFirst(),
  );
}

/**
 * The claim on a request's deadline action, for replica `owner`: only whoever moves deadlineHandledAt
 * from the value it read takes it. A remind counts as one of its reminders and finishes with the claim (`done`). The
 * claimed row, or null.
 */
export async function claimDeadline<T extends RequestTable>(
  db: Sql,
  table: T,
  id: string,
  p: { handledAt: Date | null; now: Date; remind: false | { nextReminderAt: Date | null }; done: boolean; owner?: string },
): Promise<RequestRow<T> | null> {
  let query = db
    .updateTable(shared(table))
    .set((eb) => ({
      deadlineHandledAt: p.now,
      deadlineClaimedBy: p.owner ?? null,
      updatedAt: p.now,
      ...(p.remind ? { remindersSent: eb("remindersSent", "+", 1), nextReminderAt: p.remind.nextReminderAt } : {}),
      ...(p.done ? { deadlineDoneAt: p.now } : {}),
    }))
    .where("id", "=", id)
    .where("state", "=", "pending")
    .where("deadlineDoneAt", "is", null);
  query = p.handledAt ? query.where("deadlineHandledAt", "=", p.handledAt) : query.where("deadlineHandledAt", "is", null);
  return rowOf<T>(await query.returningAll().executeTakeFirst());
}

/**
 * The deadline's claim given back, its action not done, while someone's decision is being sent: taken
 * again, by `decideBy`, should that decision not arrive and the request wait again. False when the
 * request is no longer being decided (that decision settled already).
 */
export async function releaseDeadline(db: Sql, table: RequestTable, id: string, p: { decideBy: Date; now: Date }): Promise<boolean> {
  const result = await db
    .updateTable(shared(table))
    .set({ deadlineHandledAt: null, deadlineClaimedBy: null, decideBy: p.decideBy, updatedAt: p.now })
    .where("id", "=", id)
    .where("state", "=", "deciding")
    .where("deadlineDoneAt", "is", null)
    .executeTakeFirst();
  return result.numUpdatedRows === 1n;
}

/** The deadline's action finished (whatever it led to): it is not taken again. */
export async function deadlineDone(db: Sql, table: RequestTable, id: string, now: Date): Promise<void> {
  await db.updateTable(shared(table)).set({ deadlineDoneAt: now, updatedAt: now }).where("id", "=", id).where("deadlineDoneAt", "is", null).execute();
}
