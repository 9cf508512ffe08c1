// Flow feedback requests: intake (verified, recorded durably with its post enqueued in the outbox,
// answered fast), decisions (answered to the platform exactly once, via an atomic pending → deciding
// claim) and reminders. Every Slack effect is an outbox effect (flow.post, flow.file, flow.show,
// flow.reminder), performed by the outbox worker through FlowNotifier (slack-effects.ts).

import crypto from "node:crypto";
import type { FlowConfig, ReviewerRules as RulesConfig } from "../config.js";
import type { Db } from "../db/database.js";
import type { SqlRunner } from "../db/sql.js";
import type { FlowRequest } from "../generated/prisma/client.js";
import { JsonTooComplex, parseBoundedJson } from "../http/bounded-json.js";
import { approvalFeedback, approvalPolicy, approvalTally, latestEdit, type StoredApproval } from "../lifecycle/approvals.js";
import type { Audit } from "../lifecycle/audit.js";
import { DEADLINE_ACTOR, timeoutFeedback } from "../lifecycle/deadlines.js";
import { type Clock, systemClock } from "../lifecycle/ports.js";
import { hashOutput } from "../lifecycle/reviews.js";
import { flowRequestTransition } from "../lifecycle/states.js";
import type { Logger } from "../log.js";
import type { Outbox } from "../outbox/index.js";
import { reminderDue } from "../review/reminders.js";
import { describeReviewers, describeWaitingReviewers } from "../review/rules.js";
import { escapeMrkdwn, formatDuration, mentionIds, outcomeStyle, truncatePlain, userMention } from "../slack/blocks/index.js";
import type { TeamRef } from "../slack/clients.js";
import { isUuid } from "../store/ids.js";
import { describeDuration } from "../text/duration.js";
import { sanitizeJson } from "../text/sanitize.js";
import { parseFlowBody } from "./request.js";
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyFlowSignature } from "./signature.js";
import type { FlowRequestContext } from "./slack-effects.js";

export type { FlowRequest };

/** How a user is checked against a flow's reviewer rules (ReviewerRules over the flows). */
export interface FlowRules {
  rulesFor(flowName: string): RulesConfig | undefined;
  mayDecide(flowName: string, userId: string): Promise<boolean>;
  /** Whether this one request lets the user answer beyond the flow's rules (reassigned or escalated to them). */
  isGranted(request: Pick<FlowRequest, "reassignedTo" | "escalatedAt" | "escalatedTo">, userId: string, team?: TeamRef): Promise<boolean>;
}

/** What a request's access checks read: its flow, assignee, workspace, reassignment and escalation. */
export type FlowRequestAccess = Pick<FlowRequest, "flowName" | "assigneeUserId" | "teamId" | "reassignedTo" | "escalatedAt" | "escalatedTo">;

export type FlowReassignOutcome = { kind: "reassigned"; request: FlowRequest } | { kind: "not_pending" } | { kind: "unknown_request" } | { kind: "same_person" };

export interface FlowServiceDeps {
  db: Db;
  flows: FlowConfig[];
  /** Where its Slack effects are enqueued. */
  outbox: Outbox;
  rules: FlowRules;
  audit?: Audit;
  log: Logger;
  clock?: Clock;
  /** A decision left "deciding" this long (its process died mid-call) opens again (default 60 s, at least twice the callback time-out). */
  abandonedAfterMs?: number;
  /** The platform's callback is given this long to answer. */
  callbackTimeoutMs?: number;
  reminders?: { afterMs: number; max: number };
}

export interface IntakeAnswer {
  status: number;
  body: Record<string, unknown>;
  /** Work to do after the HTTP answer went out (posting to Slack). */
  after?: () => void;
}

export interface FlowDecision {
  requestId: string;
  userId: string;
  /** Index into the request's `emit`, or undefined for Send feedback. */
  outcomeIndex?: number;
  feedback: string;
  /** The clicked message: must be the request's own. */
  channelId?: string;
  messageTs?: string;
  /** Edit and approve: the whole output as the reviewer edited it. */
  editedOutput?: string;
  /** Taken by the request's deadline: no message or reviewer check, the same claim as a click. */
  byDeadline?: boolean;
  /** Approve clicked on App Home: not on the request's message (the handler checked it is shown to the user); reviewer rules still apply. */
  fromHome?: boolean;
}

export type FlowDecisionOutcome =
  | { kind: "unknown_request" }
  | { kind: "wrong_message" }
  | { kind: "feedback_required" }
  | { kind: "unknown_outcome" }
  | { kind: "not_allowed"; who: string }
  | { kind: "approval_recorded"; request: FlowRequest; approvals: number; required: number }
  | { kind: "already_approved"; request: FlowRequest; approvals: number; required: number }
  | { kind: "approval_counted"; request: FlowRequest }
  | { kind: "already_decided"; request: FlowRequest }
  | { kind: "answered"; request: FlowRequest }
  | { kind: "closed"; request: FlowRequest; reason: string }
  | { kind: "failed"; request: FlowRequest; message: string };

/** The text the flow receives: the chosen outcome first (so the flow can route on it), then the comment. */
export function feedbackText(outcome: string | undefined, comment: string): string {
  const c = comment.trim();
  if (!outcome) return c;
  return c ? `${outcome}\n\n${c}` : outcome;
}

/** A readable reason from a callback's error body, without echoing anything secret-looking. */
export function answerReason(status: number, body: string): string {
  let reason = "";
  try {
    const json = JSON.parse(body) as Record<string, unknown>;
    const pick = (v: unknown) => (typeof v === "string" ? v : undefined);
    reason = pick(json.message) ?? pick(json.detail) ?? pick(json.error) ?? pick(json.status) ?? "";
  } catch {
    reason = /^[^<{]/.test(body.trim()) ? body.trim() : "";
  }
  reason = truncatePlain(reason.replace(/\s+/g, " ").replace(/token=[^\s&]+/gi, "token=…"), 300);
  const fallback: Record<number, string> = { 404: "the request no longer exists", 409: "the request was already answered", 410: "the request expired" };
  return `${status}${reason ? ` ${reason}` : fallback[status] ? ` ${fallback[status]}` : ""}`;
}

export class FlowRequests {
  private readonly clock: Clock;
  private readonly byName = new Map<string, FlowConfig>();
  private reminderTimer: NodeJS.Timeout | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private readonly inflight = new Set<Promise<unknown>>();

  constructor(private readonly deps: FlowServiceDeps) {
    this.clock = deps.clock ?? systemClock;
    for (const flow of deps.flows) this.byName.set(flow.name.toLowerCase(), flow);
  }

  flow(name: string): FlowConfig | undefined {
    return this.byName.get(name.toLowerCase());
  }

  all(): FlowConfig[] {
    return this.deps.flows;
  }

  /** POST /hooks/flows/<name>: verify, record, answer; posting happens in `after`. */
  async intake(flowName: string, headers: Record<string, string | string[] | undefined>, rawBody: Buffer): Promise<IntakeAnswer> {
    const flow = this.flow(flowName);
    if (!flow) return { status: 404, body: { error: "unknown flow" } };
    const verdict = verifyFlowSignature({
      secret: flow.secret,
      timestamp: headers[TIMESTAMP_HEADER],
      signature: headers[SIGNATURE_HEADER],
      rawBody,
      nowMs: this.clock.now().getTime(),
    });
    if (!verdict.ok) {
      this.deps.log.warn("flow request refused: bad signature", { flow: flow.name, reason: verdict.reason });
      return { status: 401, body: { error: "invalid or missing signature" } };
    }
    let body: unknown;
    try {
      // Bounded before parsing (nesting, value count), then text PostgreSQL can store (like crew callbacks).
      body = sanitizeJson(parseBoundedJson(rawBody.toString("utf8")));
    } catch (err) {
      return { status: 400, body: { error: err instanceof JsonTooComplex ? `feedback request refused: ${err.message}` : "the body must be JSON" } };
    }
    const parsed = parseFlowBody(body);
    if (parsed.kind === "invalid") return { status: 400, body: { error: `malformed feedback request: ${parsed.problem}` } };
    if (parsed.kind === "ignored") {
      this.deps.log.info("flow event ignored", { flow: flow.name, eventType: parsed.eventType });
      return { status: 200, body: { ok: true, ignored: true } };
    }
    const r = parsed.request;
    const now = this.clock.now();
    // The deadline starts when the request arrives (deadlinesDue acts on it).
    const decideBy = flow.decideWithinMs ? new Date(now.getTime() + flow.decideWithinMs) : null;
    const stored = await this.deps.outbox.sql.transaction(async (tx) => {
      const [row] = await tx.query<{ id: string }>(
        `INSERT INTO "FlowRequest" (id, "flowName", "requestId", "channelId", "methodName", message, output, emit, "deploymentName", "flowId", "assignedEmail", "callbackUrl", "createdAt", "updatedAt", "teamId", "decideBy", "onTimeout")
         VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10, $11, $12, $13, $13, $14, $15, $16)
         ON CONFLICT ("flowName", "requestId") DO NOTHING RETURNING id`,
        [
          crypto.randomUUID(),
          flow.name,
          r.requestId,
          flow.channel,
          r.methodName ?? null,
          r.message ?? null,
          r.output,
          JSON.stringify(r.emit),
          r.deploymentName ?? null,
          r.flowId ?? null,
          r.assignedEmail ?? null,
          r.callbackUrl,
          now,
          flow.team ?? null,
          decideBy,
          decideBy ? (flow.onTimeout ?? "remind") : null,
        ],
      );
      if (row) await this.deps.outbox.add(tx, { kind: "flow.post", subjectId: row.id });
      return row;
    });
    if (!stored) return { status: 200, body: { ok: true, duplicate: true } };
    this.deps.log.info("flow feedback request recorded", { flow: flow.name, id: stored.id });
    return { status: 202, body: { ok: true }, after: () => this.deps.outbox.nudge() };
  }

  /** Decisions abandoned mid-call (their process died) open again; posting needs no sweep (the outbox). */
  async recover(): Promise<void> {
    await this.reopenAbandoned();
  }

  /**
   * A decision whose process died while calling the flow stays "deciding" forever otherwise. Long after
   * any callback could still be running, it opens again so someone can answer; should the first call
   * have reached the flow after all, the flow refuses the second (409) and the request closes with that.
   */
  private async reopenAbandoned(): Promise<void> {
    const limit = Math.max(2 * (this.deps.callbackTimeoutMs ?? 15_000), this.deps.abandonedAfterMs ?? 60_000);
    const before = new Date(this.clock.now().getTime() - limit);
    const { from, to } = flowRequestTransition("abandoned");
    const abandoned = await this.deps.db.flowRequest.findMany({ where: { state: { in: [...from] }, decidedAt: { lt: before } }, take: 100 });
    for (const request of abandoned) {
      const { count } = await this.deps.db.flowRequest.updateMany({
        where: { id: request.id, state: { in: [...from] }, decidedAt: request.decidedAt },
        data: { state: to, decidedBy: null, outcome: null, feedback: null, decidedAt: null },
      });
      if (count === 1) this.deps.log.warn("flow decision abandoned mid-call; request is open again", { id: request.id, flow: request.flowName });
    }
  }

  /** A request by its id (FlowRequest.id), or null. */
  get(id: string): Promise<FlowRequest | null> {
    return isUuid(id) ? this.deps.db.flowRequest.findUnique({ where: { id } }) : Promise.resolve(null);
  }

  /** Who may decide: the flow's reviewers and the request's assignee; undefined: anyone. */
  who(request: Pick<FlowRequest, "flowName" | "assigneeUserId">): string | undefined {
    const rules = this.deps.rules.rulesFor(request.flowName);
    if (!rules) return undefined;
    return [describeReviewers(rules), request.assigneeUserId ? `<@${request.assigneeUserId}>` : ""].filter(Boolean).join(", ");
  }

  async mayDecide(request: FlowRequestAccess, userId: string): Promise<boolean> {
    if (request.assigneeUserId === userId || (await this.isGranted(request, userId))) return true;
    return this.deps.rules.mayDecide(request.flowName, userId);
  }

  /** Reassigned to the user, or escalated to them or a group of theirs (looked up in the request's workspace). */
  private isGranted(request: FlowRequestAccess, userId: string): Promise<boolean> {
    return this.deps.rules.isGranted(request, userId, request.teamId ? { teamId: request.teamId } : undefined).catch(() => false);
  }

  /** Whether the request is the user's to answer, as App Home lists it: assigned, reassigned or escalated to them, or by the flow's rules (without rules: its assignee only). */
  async isWaitingFor(request: FlowRequestAccess, userId: string): Promise<boolean> {
    if (request.assigneeUserId === userId || (await this.isGranted(request, userId))) return true;
    return !!this.deps.rules.rulesFor(request.flowName) && this.deps.rules.mayDecide(request.flowName, userId);
  }

  /** The approve-like outcome a request can be answered with from App Home (no feedback needed); undefined: it needs the message. */
  homeApproval(request: Pick<FlowRequest, "emit">): { index: number; outcome: string } | undefined {
    const emit = Array.isArray(request.emit) ? (request.emit as string[]) : [];
    const index = emit.findIndex((o) => outcomeStyle(o) === "primary");
    return index >= 0 ? { index, outcome: emit[index]! } : undefined;
  }

  /** The first decision wins atomically; the platform hears it exactly once. */
  async decide(d: FlowDecision): Promise<FlowDecisionOutcome> {
    const request = isUuid(d.requestId) ? await this.deps.db.flowRequest.findUnique({ where: { id: d.requestId } }) : null;
    if (!request) return { kind: "unknown_request" };
    if (!d.byDeadline && !d.fromHome && (!request.messageTs || d.channelId !== request.channelId || d.messageTs !== request.messageTs)) return { kind: "wrong_message" };
    if (request.state !== "pending") return { kind: "already_decided", request };
    const emit = Array.isArray(request.emit) ? (request.emit as string[]) : [];
    const outcome = d.outcomeIndex === undefined ? undefined : emit[d.outcomeIndex];
    if (d.outcomeIndex !== undefined && outcome === undefined) return { kind: "unknown_outcome" };
    if (d.outcomeIndex === undefined && emit.length > 0) return { kind: "unknown_outcome" };
    const comment = d.feedback.trim();
    if (!outcome && !comment && d.editedOutput === undefined) return { kind: "feedback_required" };
    if (!d.byDeadline && !(await this.mayDecide(request, d.userId))) return { kind: "not_allowed", who: this.who(request) ?? "the flow's reviewers" };

    // Approvals: an approve-like outcome (or an edit) counts once per person; with `approvals: N` the
    // flow hears nothing until N distinct people approved. Reject-like outcomes decide at once.
    let answerComment = comment;
    let approvals: StoredApproval[] = [];
    const required = approvalPolicy(this.flow(request.flowName)).required;
    const approving = outcome ? outcomeStyle(outcome) === "primary" : d.editedOutput !== undefined;
    if (approving && !d.byDeadline && (required > 1 || d.editedOutput !== undefined)) {
      const added = await this.addApproval(request.id, d.userId, outcome ?? null, comment || null, d.editedOutput ?? null);
      approvals = await this.approvals(request.id);
      const tally = approvalTally(approvals, required);
      if (!tally.done) {
        if (added || d.editedOutput !== undefined) {
          await this.deps.audit?.record({
            executionId: null,
            flowRequestId: request.id,
            kind: "flow_approval",
            taskKey: request.methodName,
            actor: d.userId,
            decision: outcome ?? "feedback",
            feedback: comment || null,
            outputHash: hashOutput(request.output),
            msToDecision: Math.max(0, this.clock.now().getTime() - request.createdAt.getTime()),
            detail: {
              flow: request.flowName,
              requestId: request.requestId,
              approvals: tally.approvers.length,
              required,
              ...(d.editedOutput !== undefined ? { edited: true } : {}),
            },
          });
          // The message shows who approved so far.
          await this.deps.outbox.request({ kind: "flow.show", subjectId: request.id });
        }
        return { kind: added || d.editedOutput !== undefined ? "approval_recorded" : "already_approved", request, approvals: tally.approvers.length, required };
      }
      if (approvals.length > 1 || latestEdit(approvals)) answerComment = approvalFeedback(approvals, "the output");
    }

    const decidedAt = this.clock.now();
    const claim = flowRequestTransition("claimed");
    const { count } = await this.deps.db.flowRequest.updateMany({
      where: { id: request.id, state: { in: [...claim.from] } },
      data: { state: claim.to, decidedBy: d.userId, outcome: outcome ?? null, feedback: comment || null, decidedAt, decidedByDeadline: !!d.byDeadline },
    });
    if (count !== 1) {
      const current = await this.deps.db.flowRequest.findUniqueOrThrow({ where: { id: request.id } });
      // Two approvals completed the count at once: the other one answers, and this one is part of it.
      if (approvals.some((a) => a.userId === d.userId) && current.outcome === (outcome ?? null)) return { kind: "approval_counted", request: current };
      return { kind: "already_decided", request: current };
    }

    const answer = await this.answer(request.callbackUrl, feedbackText(outcome, answerComment));
    const edit = latestEdit(approvals);
    const audit = (result: string, tx?: SqlRunner) =>
      this.deps.audit?.record(
        {
          executionId: null,
          flowRequestId: request.id,
          kind: "flow_decision",
          taskKey: request.methodName,
          actor: d.userId,
          decision: outcome ?? "feedback",
          feedback: comment || null,
          outputHash: hashOutput(request.output),
          msToDecision: Math.max(0, decidedAt.getTime() - request.createdAt.getTime()),
          resumeStatus: answer.status ? String(answer.status) : null,
          resumeMessage: answer.message,
          detail: {
            outcome: result,
            flow: request.flowName,
            requestId: request.requestId,
            ...(d.byDeadline ? { byDeadline: true } : {}),
            ...(approvals.length > 1 ? { approvers: approvals.map((a) => a.userId) } : {}),
            ...(edit ? { edited: true, editedBy: edit.userId, editedOutputHash: hashOutput(edit.editedOutput) } : {}),
          },
        },
        tx,
      );

    if (answer.kind === "ok" || answer.kind === "refused") {
      const { from, to: state } = flowRequestTransition(answer.kind === "ok" ? "answered" : "refused");
      const settled = await this.deps.outbox.sql.transaction(async (tx) => {
        const [row] = await tx.query<FlowRequest>(
          `UPDATE "FlowRequest" SET state = $1, "answerStatus" = $2, "answerMessage" = $3, "nextReminderAt" = NULL, "updatedAt" = $4
           WHERE id = $5::uuid AND state = ANY($6::text[]) RETURNING *`,
          [state, answer.status, answer.message, this.clock.now(), request.id, `{${from.join(",")}}`],
        );
        await audit(state, tx);
        await this.deps.outbox.add(tx, { kind: "flow.show", subjectId: request.id });
        if (edit && state === "answered") await this.deps.outbox.add(tx, { kind: "flow.edited", subjectId: request.id });
        return row ?? (await tx.query<FlowRequest>(`SELECT * FROM "FlowRequest" WHERE id = $1::uuid`, [request.id]))[0]!;
      });
      this.deps.outbox.nudge();
      return state === "answered" ? { kind: "answered", request: settled } : { kind: "closed", request: settled, reason: answer.message ?? "" };
    }
    // 5xx, time-out or unreachable: open again, so someone can decide again.
    this.deps.log.warn("flow callback failed; request is open again", { id: request.id, flow: request.flowName, status: answer.status, error: answer.message });
    const reopen = flowRequestTransition("answer_failed");
    await this.deps.db.flowRequest.updateMany({
      where: { id: request.id, state: { in: [...reopen.from] } },
      data: { state: reopen.to, decidedBy: null, outcome: null, feedback: null, decidedAt: null, decidedByDeadline: false },
    });
    const reopened = await this.deps.db.flowRequest.findUniqueOrThrow({ where: { id: request.id } });
    await audit("failed");
    return { kind: "failed", request: reopened, message: answer.message ?? "the flow could not be reached" };
  }

  /** One approval per person (INSERT … ON CONFLICT DO NOTHING); false when they had approved already. */
  private async addApproval(flowRequestId: string, userId: string, outcome: string | null, note: string | null, editedOutput: string | null): Promise<boolean> {
    const { count } = await this.deps.db.flowApproval.createMany({ data: [{ flowRequestId, userId, outcome, note, editedOutput }], skipDuplicates: true });
    if (count === 1) return true;
    if (note !== null || editedOutput !== null) {
      await this.deps.db.flowApproval.updateMany({
        where: { flowRequestId, userId },
        data: { ...(note !== null ? { note } : {}), ...(editedOutput !== null ? { editedOutput, createdAt: this.clock.now() } : {}) },
      });
    }
    return false;
  }

  private approvals(flowRequestId: string): Promise<StoredApproval[]> {
    return this.deps.db.flowApproval.findMany({
      where: { flowRequestId },
      orderBy: [{ createdAt: "asc" }, { id: "asc" }],
      select: { userId: true, note: true, editedOutput: true, createdAt: true },
    });
  }

  /** What the request's message shows beside its row (approvals so far, the edit). */
  async context(request: FlowRequest): Promise<FlowRequestContext> {
    if (request.state === "closed") return {};
    const required = approvalPolicy(this.flow(request.flowName)).required;
    const approvals = await this.approvals(request.id);
    const edit = latestEdit(approvals);
    const context: FlowRequestContext = {};
    if (approvals.length && (required > 1 || edit)) {
      context.approvals = { required, by: approvals.map((a) => ({ userId: a.userId, ...(a.note ? { note: a.note } : {}), edited: a.editedOutput !== null })) };
    }
    if (edit) context.edit = { by: edit.userId, text: edit.editedOutput };
    return context;
  }

  /** POST {feedback, source: "slack"} to the callback; the URL is never logged or shown. */
  private async answer(callbackUrl: string, feedback: string): Promise<{ kind: "ok" | "refused" | "failed"; status: number | null; message: string | null }> {
    try {
      const res = await fetch(callbackUrl, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({ feedback, source: "slack" }),
        redirect: "error",
        signal: AbortSignal.timeout(this.deps.callbackTimeoutMs ?? 15_000),
      });
      const text = (await res.text().catch(() => "")).slice(0, 4000);
      if (res.ok) {
        let message: string | null = null;
        try {
          const json = JSON.parse(text) as Record<string, unknown>;
          message = typeof json.message === "string" ? truncatePlain(json.message, 300) : typeof json.status === "string" ? truncatePlain(json.status, 100) : null;
        } catch {
          /* an empty or non-JSON 2xx is fine */
        }
        return { kind: "ok", status: res.status, message };
      }
      if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429)
        return { kind: "refused", status: res.status, message: answerReason(res.status, text) };
      return { kind: "failed", status: res.status, message: `the flow answered ${answerReason(res.status, text)}` };
    } catch (err) {
      const timedOut = (err as Error).name === "TimeoutError";
      return { kind: "failed", status: null, message: timedOut ? "the flow did not answer in time" : "the flow could not be reached" };
    }
  }

  // ------------------------------------------------------------------ reminders

  /** Reminds who may decide (or the assignee) about requests nobody answered; once per replica set. */
  async remindDue(): Promise<number> {
    const settings = this.deps.reminders;
    if (!settings || settings.max <= 0) return 0;
    const now = this.clock.now();
    const due = await this.deps.db.flowRequest.findMany({
      where: {
        state: "pending",
        messageTs: { not: null },
        remindersSent: { lt: settings.max },
        OR: [{ nextReminderAt: { lte: now } }, { nextReminderAt: null, remindersSent: 0, createdAt: { lte: new Date(now.getTime() - settings.afterMs) } }],
      },
      orderBy: { createdAt: "asc" },
      take: 50,
    });
    let sent = 0;
    for (const request of due) {
      const count = request.remindersSent + 1;
      const who = await this.remindWho(request);
      const text = `⏰ ${who}: flow *${escapeMrkdwn(request.flowName)}* has been waiting for feedback${request.methodName ? ` on \`${escapeMrkdwn(truncatePlain(request.methodName, 80))}\`` : ""} for ${formatDuration(now.getTime() - request.createdAt.getTime())}. Answer the request above so the flow can go on.`;
      // The claim: only the replica that moves remindersSent from its value enqueues this reminder.
      const claimed = await this.deps.outbox.sql.transaction(async (tx) => {
        const moved = await tx.execute(`UPDATE "FlowRequest" SET "remindersSent" = $1, "nextReminderAt" = $2 WHERE id = $3::uuid AND state = 'pending' AND "remindersSent" = $4`, [
          count,
          count < settings.max ? reminderDue(request.createdAt, count, settings.afterMs) : null,
          request.id,
          request.remindersSent,
        ]);
        if (moved !== 1) return false;
        await this.deps.outbox.add(tx, { kind: "flow.reminder", subjectId: request.id, part: count, payload: { text } });
        return true;
      });
      if (!claimed) continue;
      sent++;
      // The last reminder may escalate the request: its mention follows the reminder.
      await this.escalateAfter(request, count).catch((err) => this.deps.log.warn("could not escalate a flow request", { id: request.id, err: errText(err) }));
    }
    if (sent) this.deps.outbox.nudge();
    return sent;
  }

  /** Who a reminder mentions: the flow's named reviewers who have not approved yet (groups stay), its assignee and reassignee. */
  private async remindWho(request: FlowRequest): Promise<string> {
    const rules = this.deps.rules.rulesFor(request.flowName);
    const approvedBy = new Set((await this.approvals(request.id)).map((a) => a.userId));
    const mentions = [rules ? describeWaitingReviewers(rules, approvedBy) : ""];
    for (const user of [request.assigneeUserId, request.reassignedTo])
      if (user && !approvedBy.has(user) && !mentions.some((m) => m.includes(`<@${user}>`))) mentions.push(userMention(user));
    return mentions.filter(Boolean).join(", ") || "Reviewers";
  }

  // ------------------------------------------------------------------ escalation and reassignment

  /**
   * After a reminder (a deadline's remind counts as one): the one that reaches REVIEW_REMINDER_MAX
   * escalates the request to the flow's escalateTo, once (claimed on escalatedAt): they are mentioned
   * under the request and may answer it from then on.
   */
  private async escalateAfter(request: FlowRequest, remindersSent: number): Promise<boolean> {
    if (remindersSent < (this.deps.reminders?.max ?? 0)) return false;
    const rules = this.flow(request.flowName)?.escalateTo;
    const ids = rules ? [...rules.users, ...rules.usergroups] : [];
    if (ids.length === 0) return false;
    const now = this.clock.now();
    const after = remindersSent === 1 ? "a reminder" : `${remindersSent} reminders`;
    const text = `🔺 ${mentionIds(ids)}: flow *${escapeMrkdwn(request.flowName)}*'s request${this.stepOf(request)} is still waiting for an answer after ${after}. You may answer it too.`;
    const escalated = await this.deps.outbox.sql.transaction(async (tx) => {
      const moved = await tx.execute(
        `UPDATE "FlowRequest" SET "escalatedAt" = $1, "escalatedTo" = $2, "updatedAt" = $1 WHERE id = $3::uuid AND state = 'pending' AND "escalatedAt" IS NULL`,
        [now, ids.join(","), request.id],
      );
      if (moved !== 1) return false;
      await this.deps.audit?.record(
        {
          executionId: null,
          flowRequestId: request.id,
          kind: "escalation",
          taskKey: request.methodName,
          actor: "crewline:escalation",
          outputHash: hashOutput(request.output),
          msToDecision: Math.max(0, now.getTime() - request.createdAt.getTime()),
          detail: { flow: request.flowName, requestId: request.requestId, escalatedTo: ids, remindersSent },
        },
        tx,
      );
      await this.deps.outbox.add(tx, { kind: "flow.reminder", subjectId: request.id, part: "escalation", payload: { text } });
      await this.deps.outbox.add(tx, { kind: "flow.show", subjectId: request.id });
      return true;
    });
    if (escalated) this.deps.outbox.nudge();
    return escalated;
  }

  /** Hands a pending request to `to` (the caller checked that `by` may answer it): mentioned under it, they may answer it. */
  async reassign(p: { requestId: string; by: string; to: string; reason: string }): Promise<FlowReassignOutcome> {
    const request = await this.get(p.requestId);
    if (!request) return { kind: "unknown_request" };
    if (request.state !== "pending") return { kind: "not_pending" };
    if (request.reassignedTo === p.to) return { kind: "same_person" };
    const now = this.clock.now();
    const reason = p.reason.trim().slice(0, 500);
    const quoted = reason ? `\n> ${escapeMrkdwn(truncatePlain(reason.replace(/\s*\n\s*/g, " "), 500))}` : "";
    const text = `↪️ ${userMention(p.by)} reassigned flow *${escapeMrkdwn(request.flowName)}*'s request${this.stepOf(request)} to ${userMention(p.to)}, who may now answer it.${quoted}`;
    const reassigned = await this.deps.outbox.sql.transaction(async (tx) => {
      const [row] = await tx.query<FlowRequest>(
        `UPDATE "FlowRequest" SET "reassignedTo" = $1, "reassignedBy" = $2, "reassignReason" = $3, "reassignedAt" = $4, "updatedAt" = $4
         WHERE id = $5::uuid AND state = 'pending' RETURNING *`,
        [p.to, p.by, reason || null, now, request.id],
      );
      if (!row) return undefined;
      await this.deps.audit?.record(
        {
          executionId: null,
          flowRequestId: request.id,
          kind: "reassignment",
          taskKey: request.methodName,
          actor: p.by,
          feedback: reason || null,
          outputHash: hashOutput(request.output),
          detail: { flow: request.flowName, requestId: request.requestId, reassignedTo: p.to, previously: request.reassignedTo ?? null },
        },
        tx,
      );
      await this.deps.outbox.add(tx, { kind: "flow.reminder", subjectId: request.id, part: `reassign:${crypto.randomUUID()}`, payload: { text } });
      await this.deps.outbox.add(tx, { kind: "flow.show", subjectId: request.id });
      return row;
    });
    if (!reassigned) return { kind: "not_pending" };
    this.deps.outbox.nudge();
    return { kind: "reassigned", request: reassigned };
  }

  private stepOf(request: Pick<FlowRequest, "methodName">): string {
    return request.methodName ? ` on \`${escapeMrkdwn(truncatePlain(request.methodName, 80))}\`` : "";
  }

  // ------------------------------------------------------------------ deadlines

  /**
   * Requests whose deadline passed, acted on once (claimed on deadlineHandledAt): reject / approve send
   * the flow's matching outcome (the reject-like or approve-like one of `emit`, or just the feedback when
   * it routes on none) through decide(), like a click; remind, or an outcome the flow does not offer,
   * posts a reminder under the request instead (counted as one).
   */
  async deadlinesDue(): Promise<number> {
    const now = this.clock.now();
    // Not claimed yet, or claimed by a process that died before the action finished.
    const stale = new Date(now.getTime() - (this.deps.abandonedAfterMs ?? 60_000));
    const due = await this.deps.db.flowRequest.findMany({
      where: {
        state: "pending",
        messageTs: { not: null },
        decideBy: { lte: now },
        deadlineDoneAt: null,
        OR: [{ deadlineHandledAt: null }, { deadlineHandledAt: { lt: stale } }],
      },
      orderBy: { decideBy: "asc" },
      take: 50,
    });
    let taken = 0;
    for (const request of due) {
      const emit = Array.isArray(request.emit) ? (request.emit as string[]) : [];
      const wanted = request.onTimeout === "approve" ? "primary" : request.onTimeout === "reject" ? "danger" : undefined;
      const index = wanted && emit.length ? emit.findIndex((o) => outcomeStyle(o) === wanted) : -1;
      const decides = !!wanted && (emit.length === 0 || index >= 0);
      const { count } = await this.deps.db.flowRequest.updateMany({
        where: { id: request.id, state: "pending", deadlineDoneAt: null, deadlineHandledAt: request.deadlineHandledAt },
        data: { deadlineHandledAt: now, ...(decides ? {} : { remindersSent: { increment: 1 } }) },
      });
      if (count !== 1) continue;
      const withinMs = this.flow(request.flowName)?.decideWithinMs ?? Math.max(0, (request.decideBy ?? now).getTime() - request.createdAt.getTime());
      try {
        if (decides) {
          const outcome = await this.decide({
            requestId: request.id,
            userId: DEADLINE_ACTOR,
            outcomeIndex: emit.length ? index : undefined,
            feedback: timeoutFeedback(wanted === "primary" ? "approve" : "reject", withinMs),
            byDeadline: true,
          });
          if (outcome.kind === "failed")
            await this.deps.outbox.request({
              kind: "flow.reminder",
              subjectId: request.id,
              part: `deadline-failed:${request.decideBy?.getTime() ?? 0}`,
              payload: { text: `⚠️ The deadline passed, but the automatic answer did not reach the flow: ${outcome.message}. The request is open again; please answer it.` },
            });
        } else {
          const who = await this.remindWho(request);
          const missing = wanted ? ` (it offers no ${wanted === "primary" ? "approve" : "reject"} outcome, so nothing was chosen for it)` : "";
          await this.deps.outbox.request({
            kind: "flow.reminder",
            subjectId: request.id,
            part: `deadline:${request.decideBy?.getTime() ?? 0}`,
            payload: {
              text: `⏰ ${who}: the deadline for flow *${escapeMrkdwn(request.flowName)}*'s request has passed (no answer within ${describeDuration(withinMs)})${missing}. Answer the request above so the flow can go on.`,
            },
          });
          await this.deps.audit?.record({
            executionId: null,
            flowRequestId: request.id,
            kind: "deadline",
            taskKey: request.methodName,
            actor: DEADLINE_ACTOR,
            outputHash: hashOutput(request.output),
            msToDecision: Math.max(0, now.getTime() - request.createdAt.getTime()),
            detail: { action: "remind", flow: request.flowName, requestId: request.requestId, ...(wanted ? { wanted: request.onTimeout } : {}) },
          });
          // The message stops announcing a deadline that has passed.
          await this.deps.outbox.request({ kind: "flow.show", subjectId: request.id });
          // Counted as a reminder: it may be the last one, which escalates the request.
          const current = await this.deps.db.flowRequest.findUnique({ where: { id: request.id } });
          if (current)
            await this.escalateAfter(current, current.remindersSent).catch((err) => this.deps.log.warn("could not escalate a flow request", { id: request.id, err: errText(err) }));
        }
        await this.deps.db.flowRequest.updateMany({ where: { id: request.id }, data: { deadlineDoneAt: this.clock.now() } });
        taken++;
      } catch (err) {
        this.deps.log.warn("could not take a flow request's deadline action", { id: request.id, err: errText(err) });
      }
    }
    return taken;
  }

  /** A request by the platform's id (for `/crew audit <id>`). */
  findByRequestId(requestId: string): Promise<FlowRequest | null> {
    return this.deps.db.flowRequest.findFirst({ where: { requestId }, orderBy: { createdAt: "desc" } });
  }

  /** Pending requests this user may decide (App Home), oldest first. */
  async waitingFor(userId: string): Promise<FlowRequest[]> {
    const pending = await this.deps.db.flowRequest.findMany({ where: { state: "pending", messageTs: { not: null } }, orderBy: { createdAt: "asc" }, take: 500 });
    // Someone who approved a request still waiting for more approvals is not waited for.
    const approved = new Set(
      (await this.deps.db.flowApproval.findMany({ where: { userId, flowRequestId: { in: pending.map((r) => r.id) } }, select: { flowRequestId: true } })).map(
        (a) => a.flowRequestId,
      ),
    );
    const mine: FlowRequest[] = [];
    for (const request of pending) if (!approved.has(request.id) && (await this.isWaitingFor(request, userId))) mine.push(request);
    return mine;
  }

  start(opts: { reminderIntervalMs?: number; sweepMs?: number; deadlineIntervalMs?: number } = {}): void {
    if (this.deps.flows.length === 0) return;
    if (this.deps.flows.some((f) => f.decideWithinMs)) {
      this.deadlineTimer = setInterval(
        () => this.track(this.deadlinesDue().catch((err) => this.deps.log.warn("flow deadlines failed", { err: errText(err) }))),
        opts.deadlineIntervalMs ?? 10_000,
      );
      this.deadlineTimer.unref();
    }
    this.sweepTimer = setInterval(() => this.track(this.recover().catch((err) => this.deps.log.warn("flow recovery sweep failed", { err: errText(err) }))), opts.sweepMs ?? 30_000);
    this.sweepTimer.unref();
    if (this.deps.reminders && this.deps.reminders.max > 0) {
      this.reminderTimer = setInterval(
        () => this.track(this.remindDue().catch((err) => this.deps.log.warn("flow reminders failed", { err: errText(err) }))),
        opts.reminderIntervalMs ?? 60_000,
      );
      this.reminderTimer.unref();
    }
  }

  async stop(): Promise<void> {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    if (this.reminderTimer) clearInterval(this.reminderTimer);
    if (this.deadlineTimer) clearInterval(this.deadlineTimer);
    await Promise.race([Promise.allSettled([...this.inflight]), new Promise((r) => setTimeout(r, 5000).unref())]);
  }

  private track(p: Promise<unknown>): void {
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p));
  }
}

function errText(err: unknown): string {
  return err instanceof Error ? err.message.slice(0, 300) : String(err).slice(0, 300);
}
