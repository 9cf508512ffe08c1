// Flow feedback requests: intake (verified, recorded durably, answered fast), posting (once, under a
// claim a successor can retake), decisions (answered to the platform exactly once, via an atomic
// pending → deciding claim) and reminders. Slack effects go through FlowSlackEffects.

import type { FlowConfig, ReviewerRules as RulesConfig } from "../config.js";
import type { Db } from "../db/database.js";
import type { FlowRequest } from "../generated/prisma/client.js";
import { JsonTooComplex, parseBoundedJson } from "../http/bounded-json.js";
import { approvalFeedback, approvalPolicy, approvalTally, latestEdit, type StoredApproval } from "../lifecycle/approvals.js";
import type { Audit } from "../lifecycle/audit.js";
import { type Clock, systemClock } from "../lifecycle/ports.js";
import { hashOutput } from "../lifecycle/reviews.js";
import { isUuid } from "../lifecycle/rows.js";
import type { Logger } from "../log.js";
import { reminderDue } from "../review/reminders.js";
import { describeReviewers } from "../review/rules.js";
import { escapeMrkdwn, formatDuration, outcomeStyle, truncatePlain } from "../slack/blocks/index.js";
import { sanitizeJson } from "../text/sanitize.js";
import { parseFlowBody } from "./request.js";
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyFlowSignature } from "./signature.js";
import type { FlowRequestContext, FlowSlackEffects } from "./slack-effects.js";

export type { FlowRequest };

/** How a user is checked against a flow's reviewer rules (ReviewerRules over the flows). */
export interface FlowRules {
  rulesFor(flowName: string): RulesConfig | undefined;
  mayDecide(flowName: string, userId: string): Promise<boolean>;
}

export interface FlowServiceDeps {
  db: Db;
  flows: FlowConfig[];
  effects: FlowSlackEffects;
  rules: FlowRules;
  audit?: Audit;
  log: Logger;
  clock?: Clock;
  /** A post claim older than this may be retaken (a replica died mid-post). */
  claimStaleMs?: number;
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
    const { count } = await this.deps.db.flowRequest.createMany({
      data: [
        {
          flowName: flow.name,
          requestId: r.requestId,
          channelId: flow.channel,
          methodName: r.methodName,
          message: r.message,
          output: r.output,
          emit: r.emit,
          deploymentName: r.deploymentName,
          flowId: r.flowId,
          assignedEmail: r.assignedEmail,
          callbackUrl: r.callbackUrl,
          // Whoever records the request posts it; a successor retakes the claim if this process dies.
          postClaimedAt: now,
        },
      ],
      skipDuplicates: true,
    });
    if (count === 0) return { status: 200, body: { ok: true, duplicate: true } };
    const stored = await this.deps.db.flowRequest.findUniqueOrThrow({ where: { flowName_requestId: { flowName: flow.name, requestId: r.requestId } } });
    this.deps.log.info("flow feedback request recorded", { flow: flow.name, id: stored.id });
    return { status: 202, body: { ok: true }, after: () => this.track(this.post(stored)) };
  }

  /** Posts a recorded request once; `claimed` when this process holds the post claim already. */
  async publish(id: string): Promise<void> {
    const now = this.clock.now();
    const { count } = await this.deps.db.flowRequest.updateMany({
      where: { id, messageTs: null, OR: [{ postClaimedAt: null }, { postClaimedAt: { lt: new Date(now.getTime() - (this.deps.claimStaleMs ?? 60_000)) } }] },
      data: { postClaimedAt: now },
    });
    if (count === 0) return;
    await this.post(await this.deps.db.flowRequest.findUniqueOrThrow({ where: { id } }));
  }

  private async post(request: FlowRequest): Promise<void> {
    try {
      let current = request;
      if (current.assignedEmail && !current.assigneeUserId) {
        const userId = await this.deps.effects.lookupByEmail(current.assignedEmail);
        if (userId) current = await this.deps.db.flowRequest.update({ where: { id: current.id }, data: { assigneeUserId: userId } });
      }
      const { ts, fileAttached } = await this.deps.effects.postRequest(current);
      await this.deps.db.flowRequest.update({ where: { id: current.id }, data: { messageTs: ts, fileAttached } });
    } catch (err) {
      // The claim stays: the recovery sweep retakes it once stale.
      this.deps.log.warn("could not post flow feedback request", { id: request.id, flow: request.flowName, err: errText(err) });
    }
  }

  /** Requests recorded but never posted (a crash, a Slack outage): posted now, once. */
  async recover(): Promise<number> {
    const stale = new Date(this.clock.now().getTime() - (this.deps.claimStaleMs ?? 60_000));
    const unposted = await this.deps.db.flowRequest.findMany({
      where: { messageTs: null, state: "pending", OR: [{ postClaimedAt: null }, { postClaimedAt: { lt: stale } }] },
      select: { id: true },
      orderBy: { createdAt: "asc" },
      take: 100,
    });
    for (const { id } of unposted) await this.publish(id);
    await this.reopenAbandoned();
    return unposted.length;
  }

  /**
   * A decision whose process died while calling the flow stays "deciding" forever otherwise. Long after
   * any callback could still be running, it opens again so someone can answer; should the first call
   * have reached the flow after all, the flow refuses the second (409) and the request closes with that.
   */
  private async reopenAbandoned(): Promise<void> {
    const limit = Math.max(2 * (this.deps.callbackTimeoutMs ?? 15_000), this.deps.claimStaleMs ?? 60_000);
    const before = new Date(this.clock.now().getTime() - limit);
    const abandoned = await this.deps.db.flowRequest.findMany({ where: { state: "deciding", decidedAt: { lt: before } }, take: 100 });
    for (const request of abandoned) {
      const { count } = await this.deps.db.flowRequest.updateMany({
        where: { id: request.id, state: "deciding", decidedAt: request.decidedAt },
        data: { state: "pending", decidedBy: null, outcome: null, feedback: null, decidedAt: null },
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

  async mayDecide(request: Pick<FlowRequest, "flowName" | "assigneeUserId">, userId: string): Promise<boolean> {
    if (request.assigneeUserId === userId) return true;
    return this.deps.rules.mayDecide(request.flowName, userId);
  }

  /** The first decision wins atomically; the platform hears it exactly once. */
  async decide(d: FlowDecision): Promise<FlowDecisionOutcome> {
    const request = isUuid(d.requestId) ? await this.deps.db.flowRequest.findUnique({ where: { id: d.requestId } }) : null;
    if (!request) return { kind: "unknown_request" };
    if (!request.messageTs || d.channelId !== request.channelId || d.messageTs !== request.messageTs) return { kind: "wrong_message" };
    if (request.state !== "pending") return { kind: "already_decided", request };
    const emit = Array.isArray(request.emit) ? (request.emit as string[]) : [];
    const outcome = d.outcomeIndex === undefined ? undefined : emit[d.outcomeIndex];
    if (d.outcomeIndex !== undefined && outcome === undefined) return { kind: "unknown_outcome" };
    if (d.outcomeIndex === undefined && emit.length > 0) return { kind: "unknown_outcome" };
    const comment = d.feedback.trim();
    if (!outcome && !comment && d.editedOutput === undefined) return { kind: "feedback_required" };
    if (!(await this.mayDecide(request, d.userId))) return { kind: "not_allowed", who: this.who(request) ?? "the flow's reviewers" };

    // Approvals: an approve-like outcome (or an edit) counts once per person; with `approvals: N` the
    // flow hears nothing until N distinct people approved. Reject-like outcomes decide at once.
    let answerComment = comment;
    let approvals: StoredApproval[] = [];
    const required = approvalPolicy(this.flow(request.flowName)).required;
    const approving = outcome ? outcomeStyle(outcome) === "primary" : d.editedOutput !== undefined;
    if (approving && (required > 1 || d.editedOutput !== undefined)) {
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
          await this.deps.effects
            .updateRequest(request, undefined, await this.context(request))
            .catch((err) => this.deps.log.warn("could not update flow request message", { id: request.id, err: errText(err) }));
        }
        return { kind: added || d.editedOutput !== undefined ? "approval_recorded" : "already_approved", request, approvals: tally.approvers.length, required };
      }
      if (approvals.length > 1 || latestEdit(approvals)) answerComment = approvalFeedback(approvals, "the output");
    }

    const decidedAt = this.clock.now();
    const { count } = await this.deps.db.flowRequest.updateMany({
      where: { id: request.id, state: "pending" },
      data: { state: "deciding", decidedBy: d.userId, outcome: outcome ?? null, feedback: comment || null, decidedAt },
    });
    if (count !== 1) {
      const current = await this.deps.db.flowRequest.findUniqueOrThrow({ where: { id: request.id } });
      // Two approvals completed the count at once: the other one answers, and this one is part of it.
      if (approvals.some((a) => a.userId === d.userId) && current.outcome === (outcome ?? null)) return { kind: "approval_counted", request: current };
      return { kind: "already_decided", request: current };
    }

    const answer = await this.answer(request.callbackUrl, feedbackText(outcome, answerComment));
    const edit = latestEdit(approvals);
    const audit = (result: string, extra: Record<string, unknown> = {}) =>
      this.deps.audit?.record({
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
          ...(approvals.length > 1 ? { approvers: approvals.map((a) => a.userId) } : {}),
          ...(edit ? { edited: true, editedBy: edit.userId, editedOutputHash: hashOutput(edit.editedOutput) } : {}),
          ...extra,
        },
      });

    if (answer.kind === "ok" || answer.kind === "refused") {
      const state = answer.kind === "ok" ? "answered" : "closed";
      const settled = await this.deps.db.flowRequest.update({
        where: { id: request.id },
        data: { state, answerStatus: answer.status, answerMessage: answer.message, nextReminderAt: null },
      });
      await audit(state);
      if (edit && state === "answered") {
        await this.deps.effects
          .attachEditedOutput(settled, { by: edit.userId, text: edit.editedOutput })
          .catch((err) => this.deps.log.warn("could not attach the edited output", { id: request.id, err: errText(err) }));
      }
      await this.deps.effects
        .updateRequest(settled, undefined, await this.context(settled))
        .catch((err) => this.deps.log.warn("could not update flow request message", { id: request.id, err: errText(err) }));
      return state === "answered" ? { kind: "answered", request: settled } : { kind: "closed", request: settled, reason: answer.message ?? "" };
    }
    // 5xx, time-out or unreachable: open again, so someone can decide again.
    this.deps.log.warn("flow callback failed; request is open again", { id: request.id, flow: request.flowName, status: answer.status, error: answer.message });
    const reopened = await this.deps.db.flowRequest.update({
      where: { id: request.id },
      data: { state: "pending", decidedBy: null, outcome: null, feedback: null, decidedAt: null },
    });
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
      const { count: claimed } = await this.deps.db.flowRequest.updateMany({
        where: { id: request.id, state: "pending", remindersSent: request.remindersSent },
        data: { remindersSent: count, nextReminderAt: count < settings.max ? reminderDue(request.createdAt, count, settings.afterMs) : null },
      });
      if (claimed !== 1) continue;
      const who = this.who(request) ?? (request.assigneeUserId ? `<@${request.assigneeUserId}>` : "Reviewers");
      const text = `⏰ ${who}: flow *${escapeMrkdwn(request.flowName)}* has been waiting for feedback${request.methodName ? ` on \`${escapeMrkdwn(truncatePlain(request.methodName, 80))}\`` : ""} for ${formatDuration(now.getTime() - request.createdAt.getTime())}. Answer the request above so the flow can go on.`;
      try {
        await this.deps.effects.remind(request, text);
        sent++;
      } catch (err) {
        this.deps.log.warn("could not post flow reminder", { id: request.id, err: errText(err) });
      }
    }
    return sent;
  }

  /** A request by the platform's id (for `/crew audit <id>`). */
  findByRequestId(requestId: string): Promise<FlowRequest | null> {
    return this.deps.db.flowRequest.findFirst({ where: { requestId }, orderBy: { createdAt: "desc" } });
  }

  /** Pending requests this user may decide (App Home), oldest first. */
  async waitingFor(userId: string): Promise<FlowRequest[]> {
    const pending = await this.deps.db.flowRequest.findMany({ where: { state: "pending", messageTs: { not: null } }, orderBy: { createdAt: "asc" }, take: 500 });
    const mine: FlowRequest[] = [];
    for (const request of pending) {
      // Without rules anyone in the channel may decide; the home lists it for its assignee only.
      const rules = this.deps.rules.rulesFor(request.flowName);
      if (request.assigneeUserId === userId || (rules && (await this.deps.rules.mayDecide(request.flowName, userId)))) mine.push(request);
    }
    return mine;
  }

  start(opts: { reminderIntervalMs?: number; sweepMs?: number } = {}): void {
    if (this.deps.flows.length === 0) return;
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
