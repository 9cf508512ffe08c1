// The FlowRequest aggregate: flow feedback requests, their intake and their decision columns (the
// approvals and the claims both kinds of decision request share are in decision-requests.ts). Every
// read and write of this table by the flows use case (src/usecases/flows.ts) goes through here; the rules
// (which state moves to which, what is audited, which Slack effect follows) stay with the use case,
// which passes in the states a write moves between and the time it happens (its Clock).
import crypto from "node:crypto";
import type { Selectable } from "kysely";
import type { Sql } from "./sql.js";
import { type DB, inTransaction } from "./sql.js";

export type FlowRequestRow = Selectable<DB["FlowRequest"]>;

/** A database, a runner or a Kysely handle (possibly one transaction's). */
type On = Sql;

export { inTransaction };

export interface NewFlowRequest {
  flowName: string;
  requestId: string;
  channelId: string;
  teamId: string | null;
  enterpriseId: string | null;
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
  return on
    .insertInto("FlowRequest")
    .values({ id: crypto.randomUUID(), ...row, emit: JSON.stringify(row.emit), createdAt: now, updatedAt: now })
    .onConflict((oc) => oc.columns(["flowName", "requestId"]).doNothing())
    .returning("id")
    .executeTakeFirst();
}

export async function findFlowRequest(on: On, id: string): Promise<FlowRequestRow | undefined> {
  return on.selectFrom("FlowRequest").selectAll().where("id", "=", id).executeTakeFirst();
}

/** The latest request with this platform request id (for `/crew audit <id>`). */
export async function findFlowRequestByPlatformId(on: On, requestId: string): Promise<FlowRequestRow | undefined> {
  return on.selectFrom("FlowRequest").selectAll().where("requestId", "=", requestId).orderBy("createdAt", "desc").limit(1).executeTakeFirst();
}

/** Pending requests whose message is posted (App Home), oldest first. */
export async function listPostedPending(on: On, limit: number): Promise<FlowRequestRow[]> {
  return on.selectFrom("FlowRequest").selectAll().where("state", "=", "pending").where("messageTs", "is not", null).orderBy("createdAt", "asc").limit(limit).execute();
}

// ------------------------------------------------------------------ decisions

/** Opens an abandoned decision again, if it is still the one read (same decidedAt). */
export async function reopenAbandoned(on: On, request: Pick<FlowRequestRow, "id" | "decidedAt">, move: { from: readonly string[]; to: string }, now: Date): Promise<boolean> {
  let q = on
    .updateTable("FlowRequest")
    .set({ state: move.to, decidedBy: null, outcome: null, feedback: null, decidedAt: null, claimedBy: null, updatedAt: now })
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
  /** The replica holding the decision while it is "deciding". */
  claimedBy: string | null;
}

/** The first decision's claim (pending → deciding); false when another took it first. */
export async function claimDecision(on: On, id: string, move: { from: readonly string[]; to: string }, claim: DecisionClaim, now: Date): Promise<boolean> {
  const r = await on
    .updateTable("FlowRequest")
    .set({ state: move.to, ...claim, updatedAt: now })
    .where("id", "=", id)
    .where("state", "in", move.from)
    .executeTakeFirst();
  return r.numUpdatedRows === 1n;
}

/**
 * The flow's answer to the decision claimed at `claimedAt` (answered, or closed when it refused), while
 * that claim still holds the request; the row as it is then, and whether it moved.
 */
export async function settleDecision(
  on: On,
  id: string,
  move: { from: readonly string[]; to: string },
  answer: { status: number | null; message: string | null; deadlineDone: boolean },
  claimedAt: Date,
  now: Date,
): Promise<{ row: FlowRequestRow | undefined; ours: boolean }> {
  const sql = on;
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
    .where("decidedAt", "=", claimedAt)
    .returningAll()
    .executeTakeFirst();
  return row ? { row, ours: true } : { row: await findFlowRequest(sql, id), ours: false };
}

/** A decision claimed at `claimedAt` whose answer did not reach the flow opens again (the claim undone), while that claim still holds it. */
export async function reopenFailedDecision(
  on: On,
  id: string,
  move: { from: readonly string[]; to: string },
  opts: { deadlineDone: boolean },
  claimedAt: Date,
  now: Date,
): Promise<{ row: FlowRequestRow | undefined; ours: boolean }> {
  const sql = on;
  const moved = await sql
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
    .where("decidedAt", "=", claimedAt)
    .executeTakeFirst();
  return { row: await findFlowRequest(sql, id), ours: moved.numUpdatedRows === 1n };
}

/** The request whose message is (channelId, messageTs): a reply in its thread is about it. */
export async function findFlowRequestByMessage(on: On, channelId: string, messageTs: string): Promise<FlowRequestRow | undefined> {
  return on.selectFrom("FlowRequest").selectAll().where("messageTs", "=", messageTs).where("channelId", "=", channelId).limit(1).executeTakeFirst();
}
