// The FlowRequest aggregate: flow feedback requests and their approvals (FlowApproval). Every read and
// write of these tables by the flows use case (src/usecases/flows.ts) goes through here; the rules
// (which state moves to which, what is audited, which Slack effect follows) stay with the use case,
// which passes in the states a write moves between and the time it happens (its Clock).
import crypto from "node:crypto";
import type { Selectable } from "kysely";
import { type DB, inTransaction, type Sql, sqlOf } from "./sql.js";

export type FlowRequestRow = Selectable<DB["FlowRequest"]>;
export type FlowApprovalRow = Selectable<DB["FlowApproval"]>;
/** What the approval rules read of an approval (StoredApproval in domain/approvals.ts). */
export type FlowApprovalView = Pick<FlowApprovalRow, "userId" | "note" | "editedOutput" | "createdAt">;

/** A database, a runner or a Kysely handle (possibly one transaction's). */
type On = Parameters<typeof sqlOf>[0];

export { inTransaction };

export interface NewFlowRequest {
  flowName: string;
  requestId: string;
  channelId: string;
  teamId: string | null;
  methodName: string | null;
  message: string | null;
  output: string;
  emit: readonly string[];
  deploymentName: string | null;
  flowId: string | null;
  assignedEmail: string | null;
  callbackUrl: string;
  decideBy: Date | null;
  onTimeout: string | null;
}

/** Records a request once per (flow, platform request id); undefined when it was recorded already. */
export async function insertFlowRequest(on: On, row: NewFlowRequest, now: Date): Promise<{ id: string } | undefined> {
  return sqlOf(on)
    .insertInto("FlowRequest")
    .values({ id: crypto.randomUUID(), ...row, emit: JSON.stringify(row.emit), createdAt: now, updatedAt: now })
    .onConflict((oc) => oc.columns(["flowName", "requestId"]).doNothing())
    .returning("id")
    .executeTakeFirst();
}

export async function findFlowRequest(on: On, id: string): Promise<FlowRequestRow | undefined> {
  return sqlOf(on).selectFrom("FlowRequest").selectAll().where("id", "=", id).executeTakeFirst();
}

/** The request, locked until the transaction `tx` ends (approvals of one request are counted one at a time). */
export async function lockFlowRequest(tx: Sql, id: string): Promise<FlowRequestRow | undefined> {
  return tx.selectFrom("FlowRequest").selectAll().where("id", "=", id).forUpdate().executeTakeFirst();
}

/** The latest request with this platform request id (for `/crew audit <id>`). */
export async function findFlowRequestByPlatformId(on: On, requestId: string): Promise<FlowRequestRow | undefined> {
  return sqlOf(on).selectFrom("FlowRequest").selectAll().where("requestId", "=", requestId).orderBy("createdAt", "desc").limit(1).executeTakeFirst();
}

/** Pending requests whose message is posted (App Home), oldest first. */
export async function listPostedPending(on: On, limit: number): Promise<FlowRequestRow[]> {
  return sqlOf(on).selectFrom("FlowRequest").selectAll().where("state", "=", "pending").where("messageTs", "is not", null).orderBy("createdAt", "asc").limit(limit).execute();
}

// ------------------------------------------------------------------ decisions

/** Decisions left in one of `states` since before `before` (their process died mid-call). */
export async function listAbandoned(on: On, states: readonly string[], before: Date, limit: number): Promise<FlowRequestRow[]> {
  return sqlOf(on).selectFrom("FlowRequest").selectAll().where("state", "in", states).where("decidedAt", "<", before).limit(limit).execute();
}

/** Opens an abandoned decision again, if it is still the one read (same decidedAt). */
export async function reopenAbandoned(on: On, request: Pick<FlowRequestRow, "id" | "decidedAt">, move: { from: readonly string[]; to: string }, now: Date): Promise<boolean> {
  let q = sqlOf(on)
    .updateTable("FlowRequest")
    .set({ state: move.to, decidedBy: null, outcome: null, feedback: null, decidedAt: null, updatedAt: now })
    .where("id", "=", request.id)
    .where("state", "in", move.from);
  q = request.decidedAt === null ? q.where("decidedAt", "is", null) : q.where("decidedAt", "=", request.decidedAt);
  return (await q.executeTakeFirst()).numUpdatedRows === 1n;
}

export interface DecisionClaim {
  decidedBy: string;
  outcome: string | null;
  feedback: string | null;
  decidedAt: Date;
  decidedByDeadline: boolean;
}

/** The first decision's claim (pending → deciding); false when another took it first. */
export async function claimDecision(on: On, id: string, move: { from: readonly string[]; to: string }, claim: DecisionClaim, now: Date): Promise<boolean> {
  const r = await sqlOf(on)
    .updateTable("FlowRequest")
    .set({ state: move.to, ...claim, updatedAt: now })
    .where("id", "=", id)
    .where("state", "in", move.from)
    .executeTakeFirst();
  return r.numUpdatedRows === 1n;
}

/** The flow's answer to a claimed decision (answered, or closed when it refused); the row as it is then. */
export async function settleDecision(
  on: On,
  id: string,
  move: { from: readonly string[]; to: string },
  answer: { status: number | null; message: string | null; deadlineDone: boolean },
  now: Date,
): Promise<FlowRequestRow | undefined> {
  const sql = sqlOf(on);
  const row = await sql
    .updateTable("FlowRequest")
    .set({
      state: move.to,
      answerStatus: answer.status,
      answerMessage: answer.message,
      nextReminderAt: null,
      ...(answer.deadlineDone ? { deadlineDoneAt: now } : {}),
      updatedAt: now,
    })
    .where("id", "=", id)
    .where("state", "in", move.from)
    .returningAll()
    .executeTakeFirst();
  return row ?? findFlowRequest(sql, id);
}

/** A claimed decision whose answer did not reach the flow opens again (the claim undone); the row as it is then. */
export async function reopenFailedDecision(
  on: On,
  id: string,
  move: { from: readonly string[]; to: string },
  opts: { deadlineDone: boolean },
  now: Date,
): Promise<FlowRequestRow | undefined> {
  const sql = sqlOf(on);
  await sql
    .updateTable("FlowRequest")
    .set({
      state: move.to,
      decidedBy: null,
      outcome: null,
      feedback: null,
      decidedAt: null,
      decidedByDeadline: false,
      ...(opts.deadlineDone ? { deadlineDoneAt: now } : {}),
      updatedAt: now,
    })
    .where("id", "=", id)
    .where("state", "in", move.from)
    .execute();
  return findFlowRequest(sql, id);
}

// ------------------------------------------------------------------ approvals

/**
 * One approval per person: true when it is theirs first; otherwise a note or an edit given again
 * replaces theirs (an edit also moves its time to now).
 */
export async function addFlowApproval(
  on: On,
  a: { flowRequestId: string; userId: string; outcome: string | null; note: string | null; editedOutput: string | null },
  now: Date,
): Promise<boolean> {
  const sql = sqlOf(on);
  const added = await sql
    .insertInto("FlowApproval")
    .values({ id: crypto.randomUUID(), ...a, createdAt: now })
    .onConflict((oc) => oc.columns(["flowRequestId", "userId"]).doNothing())
    .returning("id")
    .executeTakeFirst();
  if (added) return true;
  if (a.note !== null || a.editedOutput !== null) {
    await sql
      .updateTable("FlowApproval")
      .set({ ...(a.note !== null ? { note: a.note } : {}), ...(a.editedOutput !== null ? { editedOutput: a.editedOutput, createdAt: now } : {}) })
      .where("flowRequestId", "=", a.flowRequestId)
      .where("userId", "=", a.userId)
      .execute();
  }
  return false;
}

/** A request's approvals, oldest first. */
export async function listFlowApprovals(on: On, flowRequestId: string): Promise<FlowApprovalView[]> {
  return sqlOf(on)
    .selectFrom("FlowApproval")
    .select(["userId", "note", "editedOutput", "createdAt"])
    .where("flowRequestId", "=", flowRequestId)
    .orderBy("createdAt", "asc")
    .orderBy("id", "asc")
    .execute();
}

/** Which of these requests the user has approved. */
export async function approvedBy(on: On, userId: string, flowRequestIds: readonly string[]): Promise<Set<string>> {
  if (flowRequestIds.length === 0) return new Set();
  const rows = await sqlOf(on).selectFrom("FlowApproval").select("flowRequestId").where("userId", "=", userId).where("flowRequestId", "in", flowRequestIds).execute();
  return new Set(rows.map((r) => r.flowRequestId));
}

// ------------------------------------------------------------------ reminders, escalation, reassignment

/** Pending posted requests due for a reminder: their next one is due, or the first one is, `afterMs` after they came. */
export async function listRemindersDue(on: On, p: { now: Date; max: number; firstBefore: Date; limit: number }): Promise<FlowRequestRow[]> {
  return sqlOf(on)
    .selectFrom("FlowRequest")
    .selectAll()
    .where("state", "=", "pending")
    .where("messageTs", "is not", null)
    .where("remindersSent", "<", p.max)
    .where((eb) => eb.or([eb("nextReminderAt", "<=", p.now), eb.and([eb("nextReminderAt", "is", null), eb("remindersSent", "=", 0), eb("createdAt", "<=", p.firstBefore)])]))
    .orderBy("createdAt", "asc")
    .limit(p.limit)
    .execute();
}

/** The claim of reminder number `count`: only who moves remindersSent from the value read sends it. */
export async function claimReminder(
  on: On,
  request: Pick<FlowRequestRow, "id" | "remindersSent">,
  next: { count: number; nextReminderAt: Date | null },
  now: Date,
): Promise<boolean> {
  const r = await sqlOf(on)
    .updateTable("FlowRequest")
    .set({ remindersSent: next.count, nextReminderAt: next.nextReminderAt, updatedAt: now })
    .where("id", "=", request.id)
    .where("state", "=", "pending")
    .where("remindersSent", "=", request.remindersSent)
    .executeTakeFirst();
  return r.numUpdatedRows === 1n;
}

/** Escalates a pending request once (claimed on escalatedAt). */
export async function claimEscalation(on: On, id: string, escalatedTo: string, now: Date): Promise<boolean> {
  const r = await sqlOf(on)
    .updateTable("FlowRequest")
    .set({ escalatedAt: now, escalatedTo, updatedAt: now })
    .where("id", "=", id)
    .where("state", "=", "pending")
    .where("escalatedAt", "is", null)
    .executeTakeFirst();
  return r.numUpdatedRows === 1n;
}

/** Hands a pending request to someone; the row as it is then, or undefined when it is no longer pending. */
export async function reassignFlowRequest(on: On, id: string, p: { to: string; by: string; reason: string | null }, now: Date): Promise<FlowRequestRow | undefined> {
  return sqlOf(on)
    .updateTable("FlowRequest")
    .set({ reassignedTo: p.to, reassignedBy: p.by, reassignReason: p.reason, reassignedAt: now, updatedAt: now })
    .where("id", "=", id)
    .where("state", "=", "pending")
    .returningAll()
    .executeTakeFirst();
}

// ------------------------------------------------------------------ deadlines

/** Pending posted requests past their deadline, not done, and not claimed (or claimed before `stale`). */
export async function listDeadlinesDue(on: On, p: { now: Date; stale: Date; limit: number }): Promise<FlowRequestRow[]> {
  return sqlOf(on)
    .selectFrom("FlowRequest")
    .selectAll()
    .where("state", "=", "pending")
    .where("messageTs", "is not", null)
    .where("decideBy", "<=", p.now)
    .where("deadlineDoneAt", "is", null)
    .where((eb) => eb.or([eb("deadlineHandledAt", "is", null), eb("deadlineHandledAt", "<", p.stale)]))
    .orderBy("decideBy", "asc")
    .limit(p.limit)
    .execute();
}

/**
 * Claims a request's deadline action, if nobody did since it was read (same deadlineHandledAt). A
 * remind counts as a reminder; `done` also marks the action finished (it is taken in the same transaction).
 */
export async function claimDeadline(
  on: On,
  request: Pick<FlowRequestRow, "id" | "deadlineHandledAt">,
  opts: { countsAsReminder: boolean; done: boolean },
  now: Date,
): Promise<boolean> {
  let q = sqlOf(on)
    .updateTable("FlowRequest")
    .set((eb) => ({
      deadlineHandledAt: now,
      ...(opts.countsAsReminder ? { remindersSent: eb("remindersSent", "+", 1) } : {}),
      ...(opts.done ? { deadlineDoneAt: now } : {}),
      updatedAt: now,
    }))
    .where("id", "=", request.id)
    .where("state", "=", "pending")
    .where("deadlineDoneAt", "is", null);
  q = request.deadlineHandledAt === null ? q.where("deadlineHandledAt", "is", null) : q.where("deadlineHandledAt", "=", request.deadlineHandledAt);
  return (await q.executeTakeFirst()).numUpdatedRows === 1n;
}

/** The deadline's action finished (whatever it led to): it is not taken again. */
export async function markDeadlineDone(on: On, id: string, now: Date): Promise<void> {
  await sqlOf(on).updateTable("FlowRequest").set({ deadlineDoneAt: now, updatedAt: now }).where("id", "=", id).where("deadlineDoneAt", "is", null).execute();
}

/** The request whose message is (channelId, messageTs): a reply in its thread is about it. */
export async function findFlowRequestByMessage(on: On, channelId: string, messageTs: string): Promise<FlowRequestRow | undefined> {
  return sqlOf(on).selectFrom("FlowRequest").selectAll().where("messageTs", "=", messageTs).where("channelId", "=", channelId).limit(1).executeTakeFirst();
}
