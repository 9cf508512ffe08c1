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

/** The columns of a pending request that App Home reads: what its access rules and the Home view need (never its output or callback). */
export type HomeFlowRequest = Pick<
  FlowRequestRow,
  | "id"
  | "flowName"
  | "methodName"
  | "channelId"
  | "messageTs"
  | "teamId"
  | "enterpriseId"
  | "assigneeUserId"
  | "emit"
  | "createdAt"
  | "reassignedTo"
  | "reassignedBy"
  | "escalatedAt"
  | "escalatedTo"
  | "decideBy"
  | "onTimeout"
  | "deadlineHandledAt"
>;

/** Which posted pending requests may be one user's (App Home): a superset of what the access rules list for them. */
export interface PostedPendingFor {
  userId: string;
  /** Flows whose reviewer rules let the user answer. */
  flows: readonly string[];
  /** Escalation lists (escalatedTo) that name the user or a group of theirs. */
  escalatedTo: readonly string[];
}

/** Pending requests whose message is posted (of one workspace when given). */
function postedPending(on: On, teamId: string | undefined) {
  const query = on.selectFrom("FlowRequest").where("state", "=", "pending").where("messageTs", "is not", null);
  return teamId ? query.where("teamId", "=", teamId) : query;
}

/** The distinct flows and escalation lists (with their workspaces) of the posted pending requests: what the rules are asked about for App Home. */
export async function postedPendingKinds(
  on: On,
  teamId?: string,
): Promise<{ flows: string[]; escalations: { escalatedTo: string; teamId: string | null; enterpriseId: string | null }[] }> {
  const flows = await postedPending(on, teamId).select("flowName").distinct().execute();
  const escalations = await postedPending(on, teamId)
    .where("escalatedAt", "is not", null)
    .where("escalatedTo", "is not", null)
    .select(["escalatedTo", "teamId", "enterpriseId"])
    .distinct()
    .execute();
  return { flows: flows.map((f) => f.flowName), escalations: escalations.map((e) => ({ ...e, escalatedTo: e.escalatedTo! })) };
}

/**
 * Pending requests whose message is posted (App Home; of one workspace when given) that may be the
 * user's (`for`): assigned or reassigned to them, escalated by one of their lists, or of a flow they
 * may answer; oldest first.
 */
export async function listPostedPending(on: On, opts: { for: PostedPendingFor; teamId?: string; limit: number }): Promise<HomeFlowRequest[]> {
  const mine = opts.for;
  return postedPending(on, opts.teamId)
    .where((eb) =>
      eb.or([
        eb("assigneeUserId", "=", mine.userId),
        eb("reassignedTo", "=", mine.userId),
        ...(mine.flows.length > 0 ? [eb("flowName", "in", [...mine.flows])] : []),
        ...(mine.escalatedTo.length > 0 ? [eb.and([eb("escalatedAt", "is not", null), eb("escalatedTo", "in", [...mine.escalatedTo])])] : []),
      ]),
    )
    .select([
      "id",
      "flowName",
      "methodName",
      "channelId",
      "messageTs",
      "teamId",
      "enterpriseId",
      "assigneeUserId",
      "emit",
      "createdAt",
      "reassignedTo",
      "reassignedBy",
      "escalatedAt",
      "escalatedTo",
      "decideBy",
      "onTimeout",
      "deadlineHandledAt",
    ])
    .orderBy("createdAt", "asc")
    .orderBy("id", "asc")
    .limit(opts.limit)
    .execute();
}

// ------------------------------------------------------------------ decisions

/**
 * An answer that may have reached the flow (its call timed out, a gateway answered, its process died
 * mid-call), kept on the request opened again: a pending row with `decidedBy` set. Should a later answer
 * be refused as already answered, the request is recorded as answered by this one. `answerMessage`
 * says why on the message.
 */
export type MaybeTaken = Pick<FlowRequestRow, "decidedBy" | "outcome" | "feedback" | "decidedByDeadline" | "answerStatus" | "answerMessage">;

/** The answer a pending request keeps as one that may have reached the flow, if any. */
export function maybeTakenOf(row: FlowRequestRow): MaybeTaken | null {
  if (row.state !== "pending" || !row.decidedBy) return null;
  const { decidedBy, outcome, feedback, decidedByDeadline, answerStatus, answerMessage } = row;
  return { decidedBy, outcome, feedback, decidedByDeadline, answerStatus, answerMessage };
}

/** Opens an abandoned decision again, if it is still the one read (same decidedAt), keeping its answer as one that may have reached the flow (`note`: why). */
export async function reopenAbandoned(
  on: On,
  request: Pick<FlowRequestRow, "id" | "decidedAt">,
  move: { from: readonly string[]; to: string },
  now: Date,
  note: string,
): Promise<boolean> {
  let q = on
    .updateTable("FlowRequest")
    .set({ state: move.to, decidedAt: null, claimedBy: null, answerStatus: null, answerMessage: note, updatedAt: now })
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
  /** Answered by an earlier answer (taken_earlier): its columns replace the claim's. */
  earlier?: MaybeTaken,
): Promise<{ row: FlowRequestRow | undefined; ours: boolean }> {
  const sql = on;
  const row = await sql
    .updateTable("FlowRequest")
    .set({
      ...(earlier ? { decidedBy: earlier.decidedBy, outcome: earlier.outcome, feedback: earlier.feedback, decidedByDeadline: earlier.decidedByDeadline } : {}),
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

/**
 * A decision claimed at `claimedAt` that the flow did not take opens again (the claim undone), while
 * that claim still holds it; `maybeTaken`: the answer it keeps as one that may have reached the flow.
 */
export async function reopenFailedDecision(
  on: On,
  id: string,
  move: { from: readonly string[]; to: string },
  opts: { deadlineDone: boolean; maybeTaken: MaybeTaken | null },
  claimedAt: Date,
  now: Date,
): Promise<{ row: FlowRequestRow | undefined; ours: boolean }> {
  const sql = on;
  const kept = opts.maybeTaken;
  const moved = await sql
    .updateTable("FlowRequest")
    .set({
      state: move.to,
      decidedBy: kept?.decidedBy ?? null,
      outcome: kept?.outcome ?? null,
      feedback: kept?.feedback ?? null,
      decidedAt: null,
      decidedByDeadline: kept?.decidedByDeadline ?? false,
      answerStatus: kept?.answerStatus ?? null,
      answerMessage: kept?.answerMessage ?? null,
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
