// Flow feedback requests: intake (verified, recorded durably with its post enqueued in the outbox,
// answered fast), and the flow request's side of the decision core (decisions/core.ts): its checks
// and outcome names, and the delivery of a decision to the flow's callback, exactly once. Every Slack
// effect is an outbox effect (flow.post, flow.file, flow.show, flow.reminder), performed by the
// outbox worker through FlowNotifier (slack-effects.ts).
import type { FlowConfig, ReviewerRules as RulesConfig } from "../config/config.js";
import { approvalFeedback, approvalPolicy, approvalsFor, latestEdit, type StoredApproval } from "../domain/approvals.js";
import { outcomeLeaning, outcomesOf } from "../domain/flow-outcomes.js";
import { type FlowRequestEvent, flowRequestTransition } from "../domain/states.js";
import type { Logger } from "../log/log.js";
import type { FlowRequestInput } from "../protocols/flows/request.js";
import { abandonedRequests, approvalsOf, approvedBy, clearApprovals, remindersDue } from "../store/decision-requests.js";
import * as store from "../store/flow-requests.js";
import { isUuid } from "../store/ids.js";
import { inTransaction, type Sql } from "../store/sql.js";
import { isBlank } from "../text/blank.js";
import { truncatePlain } from "../text/truncate.js";
import type { Audit } from "./audit.js";
import { DEADLINE_ACTOR, DecisionCore, type DecisionTarget } from "./decisions/core.js";
import { flowRequestTarget } from "./decisions/flow-request.js";
import { errText, type Job } from "./jobs.js";
import {
  type ClaimHolder,
  type Clock,
  type FlowCallback,
  type FlowCallbackAnswer,
  type FlowNotice,
  type FlowRequest,
  type FlowRequestContext,
  type NewEffect,
  type Outbox,
  systemClock,
  type TeamRef,
} from "./ports.js";
import { approvalsShown } from "./review-context.js";
import { describeReviewers, describeWaitingReviewers } from "./reviewer-rules.js";

export type { FlowRequest };

/** How a user is checked against a flow's reviewer rules (ReviewerRules over the flows). */
export interface FlowRules {
  rulesFor(flowName: string): RulesConfig | undefined;
  mayDecide(flowName: string, userId: string): Promise<boolean>;
  /** Whether this one request lets the user answer beyond the flow's rules (reassigned or escalated to them). */
  isGranted(request: Pick<FlowRequest, "reassignedTo" | "escalatedAt" | "escalatedTo">, userId: string, team?: TeamRef): Promise<boolean>;
}

/** What a request's access checks read: its flow, assignee, workspace, reassignment and escalation. */
export type FlowRequestAccess = Pick<FlowRequest, "flowName" | "assigneeUserId" | "teamId" | "enterpriseId" | "reassignedTo" | "escalatedAt" | "escalatedTo">;

export type FlowReassignOutcome = { kind: "reassigned"; request: FlowRequest } | { kind: "not_pending" } | { kind: "unknown_request" } | { kind: "same_person" };

export interface FlowServiceDeps {
  db: Sql;
  flows: FlowConfig[];
  /** Where its Slack effects are enqueued. */
  outbox: Outbox;
  rules: FlowRules;
  audit?: Audit;
  log: Logger;
  clock?: Clock;
  /** A decision left "deciding" this long (its process died mid-call) opens again (default 60 s, at least twice the callback time-out). */
  abandonedAfterMs?: number;
  /** Delivers an answer to the flow's callback (an undici adapter in production). */
  callback: FlowCallback;
  reminders?: { afterMs: number; max: number };
  /** This replica: named in the decisions and deadline actions it claims; a gone holder's are taken over at once. */
  holder?: ClaimHolder;
}

/** What became of a feedback request: recorded (`after` is the work once the flow has its answer), or a repeat. */
export type FlowIntakeOutcome = { kind: "recorded"; after: () => void } | { kind: "duplicate" };

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
  /** Given by a reply in the request's thread (channelId and messageTs are then the thread's): said in the audit record. */
  via?: "reply";
}

export type FlowDecisionOutcome =
  | { kind: "unknown_request" }
  | { kind: "wrong_message" }
  | { kind: "feedback_required" }
  | { kind: "unknown_outcome" }
  | { kind: "not_allowed"; who: string }
  | { kind: "approval_recorded"; request: FlowRequest; approvals: number; required: number }
  | { kind: "already_approved"; request: FlowRequest; approvals: number; required: number; updated?: boolean }
  | { kind: "approval_counted"; request: FlowRequest }
  | { kind: "already_decided"; request: FlowRequest }
  | { kind: "answered"; request: FlowRequest }
  | { kind: "closed"; request: FlowRequest; reason: string }
  | { kind: "failed"; request: FlowRequest; message: string }
  /** The flow refused the answer itself (400, 413, 422), in its words (`reason`): open again, to be answered differently. */
  | { kind: "not_taken"; request: FlowRequest; reason: string }
  /** No answer to the call (a time-out, a gateway's 502/504): the flow may have taken it; open again, remembering it. */
  | { kind: "maybe_taken"; request: FlowRequest; message: string }
  /** Refused as already answered after an earlier answer may have reached the flow: the request is answered by that one (`by`, null: its deadline; `outcome`). */
  | { kind: "taken_earlier"; request: FlowRequest; by: string | null; outcome: string | null }
  /** The flow's answer came so late that the request had been opened again meanwhile: the flow heard this answer, the request shows what happened since. */
  | { kind: "taken_over"; request: FlowRequest }
  /** The flow took the answer but Crewline could not store that: the request stays claimed until it is reopened as abandoned (a second answer is then the flow's to refuse). */
  | { kind: "unrecorded"; request: FlowRequest };

/** The text the flow receives: the chosen outcome first (so the flow can route on it), then the comment. */
export function feedbackText(outcome: string | undefined, comment: string): string {
  const c = comment.trim();
  if (!outcome) return c;
  return c ? `${outcome}\n\n${c}` : outcome;
}

/** A flow's words without any `token=` value they quote (a callback URL's response token, however it was cut). */
export function withoutTokens(text: string): string {
  return text.replace(/token=[^\s&]+/gi, "token=…");
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
  reason = truncatePlain(withoutTokens(reason.replace(/\s+/g, " ")), 300);
  const fallback: Record<number, string> = { 404: "the request no longer exists", 409: "the request was already answered", 410: "the request expired" };
  return `${status}${reason ? ` ${reason}` : fallback[status] ? ` ${fallback[status]}` : ""}`;
}

/** What came of an answer sent to the flow. */
type AnswerFate = "answered" | "taken_earlier" | "closed" | "not_taken" | "maybe_taken" | "failed";

const FATE_EVENT: Record<AnswerFate, FlowRequestEvent> = {
  answered: "answered",
  taken_earlier: "taken_earlier",
  closed: "refused",
  not_taken: "not_taken",
  maybe_taken: "answer_failed",
  failed: "answer_failed",
};

/** `earlier`: the request kept an earlier answer that may have reached the flow. */
function answerFate(answer: FlowCallbackAnswer, earlier: boolean): AnswerFate {
  if (answer.kind === "ok") return "answered";
  // Already answered, while an earlier answer may have reached it: that one is the flow's answer.
  if (answer.kind === "refused") return answer.status === 409 && earlier ? "taken_earlier" : "closed";
  if (answer.maybeTaken) return "maybe_taken";
  // A 4xx about the answer itself (the client refuses those about the request): someone may answer differently.
  const status = answer.status ?? 0;
  return status >= 400 && status < 500 && status !== 408 && status !== 429 ? "not_taken" : "failed";
}

/**
 * Said under a request opened again while its answer may have reached the flow (`by`: who gave it; null:
 * its deadline). Worded here for want of a notice kind of its own (FlowNotice lacks one); it names no outside text.
 */
function maybeTakenNotice(by: string | null, why: string): FlowNotice {
  const whose = by ? `<@${by}>'s answer` : "The deadline's automatic answer";
  return {
    kind: "text",
    text: `⚠️ ${whose} may have reached the flow: ${why}. The request is open again; answer it if the flow still waits. Should the flow say it already has an answer, the request is recorded as answered by that one.`,
  };
}

type AnsweredRow = Pick<FlowRequest, "state" | "outcome" | "decidedBy" | "decidedAt" | "decidedByDeadline">;

/** Waiting, or answered by an approve-like outcome (or an edit, on a flow without outcomes) not taken by the deadline: the only states approvals can be shown in. */
function approvalsMayShow(request: AnsweredRow): boolean {
  if (request.state === "pending" || request.state === "deciding") return true;
  return request.state === "answered" && !request.decidedByDeadline && (request.outcome === null || outcomeLeaning(request.outcome) === "approve");
}

/**
 * Whether the request's stored approvals (and edit) are what its message may show: while it waits, or
 * when the flow was sent the answer they built. Approvals stay stored after an answer that did not
 * arrive, yet a reject-like or other outcome, any deadline's answer, and an approve counted by nobody
 * (one approval required, no edit) send the flow their own words only (decide()).
 */
export function approvalsAnswered(request: AnsweredRow, approvals: readonly StoredApproval[], required: number): boolean {
  if (!approvalsMayShow(request)) return false;
  if (request.state !== "answered") return true;
  // Several required: an approve-like click always completes the count, and the flow gets all of it.
  if (request.outcome !== null && required > 1) return true;
  // Otherwise only an edit is counted: the decider's, recorded by this very decision (an edit left from
  // an answer that did not arrive is older, and a plain click after it sends no edit).
  const own = approvals.find((a) => a.userId === request.decidedBy);
  return !!own?.editedOutput && !!request.decidedAt && own.createdAt.getTime() >= request.decidedAt.getTime();
}

export class FlowRequests {
  private readonly clock: Clock;
  private readonly sql: Sql;
  private readonly byName = new Map<string, FlowConfig>();
  private readonly core: DecisionCore;
  private readonly target: DecisionTarget<FlowRequest>;

  constructor(private readonly deps: FlowServiceDeps) {
    this.clock = deps.clock ?? systemClock;
    this.sql = deps.db;
    this.core = new DecisionCore({ ...deps, clock: this.clock });
    this.target = flowRequestTarget((name) => this.flow(name));
    for (const flow of deps.flows) this.byName.set(flow.name.toLowerCase(), flow);
  }

  flow(name: string): FlowConfig | undefined {
    return this.byName.get(name.toLowerCase());
  }

  /**
   * Records a feedback request of `flow` whose signature and body the HTTP intake has checked
   * (adapters/http/flow-intake.ts); posting it to Slack happens in `after`.
   */
  async record(flow: FlowConfig, r: FlowRequestInput): Promise<FlowIntakeOutcome> {
    const now = this.clock.now();
    // The deadline starts when the request arrives (deadlinesDue acts on it).
    const decideBy = flow.decideWithinMs ? new Date(now.getTime() + flow.decideWithinMs) : null;
    const stored = await inTransaction(this.sql, async (tx) => {
      const row = await store.insertFlowRequest(
        tx,
        {
          flowName: flow.name,
          requestId: r.requestId,
          channelId: flow.channel,
          teamId: flow.team ?? null,
          enterpriseId: flow.enterprise ?? null,
          methodName: r.methodName ?? null,
          message: r.message ?? null,
          output: r.output,
          emit: r.emit,
          deploymentName: r.deploymentName ?? null,
          flowId: r.flowId ?? null,
          assignedEmail: r.assignedEmail ?? null,
          callbackUrl: r.callbackUrl,
          decideBy,
          onTimeout: decideBy ? (flow.onTimeout ?? "remind") : null,
        },
        now,
      );
      if (row) await this.deps.outbox.add(tx, { kind: "flow.post", subjectId: row.id });
      return row;
    });
    if (!stored) return { kind: "duplicate" };
    this.deps.log.info("flow feedback request recorded", { flow: flow.name, id: stored.id });
    return { kind: "recorded", after: () => this.deps.outbox.nudge() };
  }

  /**
   * Decisions abandoned mid-call (their process died) open again; posting needs no sweep (the outbox).
   * A decision whose process died while calling the flow stays "deciding" forever otherwise. Long after
   * any callback could still be running, it opens again so someone can answer; should the first call
   * have reached the flow after all, the flow refuses the second (409) and the request is recorded as
   * answered by the first (reopenInterrupted keeps it).
   * `earlierRun`: at the start of a process alone in its database, before it serves anything, every
   * decision still "deciding" was its earlier incarnation's, whose call died with it: opened at once.
   */
  async recover(earlierRun = false): Promise<void> {
    const limit = earlierRun ? 0 : Math.max(2 * this.deps.callback.timeoutMs, this.deps.abandonedAfterMs ?? 60_000);
    const now = this.clock.now();
    const before = new Date(now.getTime() - limit);
    const { from, to } = flowRequestTransition("abandoned");
    // Long abandoned, or held by a replica gone (its heartbeat stale), whose call died with it.
    const abandoned = await abandonedRequests(this.sql, "FlowRequest", {
      states: from,
      before,
      deadBefore: this.deps.holder?.deadBefore(now),
      self: this.deps.holder?.replicaId,
      limit: 100,
    });
    for (const request of abandoned) {
      if (await this.reopenInterrupted(request, { from, to }))
        this.deps.log.warn("flow decision abandoned mid-call; request is open again", { id: request.id, flow: request.flowName });
    }
  }

  /**
   * An answer cut off mid-call opens again, kept as one that may have reached the flow, in one
   * transaction with its audit row, a notice under the request and its message shown again (as
   * Reviews.recoverAbandoned does for a review); false when it was no longer the one read.
   */
  private async reopenInterrupted(request: FlowRequest, move: { from: readonly string[]; to: string }): Promise<boolean> {
    const why = "Crewline stopped while sending it, before the flow said whether it took it";
    const reopened = await inTransaction(this.sql, async (tx) => {
      if (!(await store.reopenAbandoned(tx, request, move, this.clock.now(), `An earlier answer may have reached the flow (${why}).`))) return false;
      const { ref, ...names } = this.target.audited(request);
      await this.deps.audit?.record(
        {
          ...names,
          kind: "flow_decision",
          actor: request.decidedBy,
          decision: request.outcome ?? "feedback",
          feedback: request.feedback,
          msToDecision: Math.max(0, (request.decidedAt ?? request.createdAt).getTime() - request.createdAt.getTime()),
          resumeMessage: "interrupted while being sent",
          detail: { outcome: "failed", ...ref, interrupted: true, maybeTaken: true, ...(request.decidedByDeadline ? { byDeadline: true } : {}) },
        },
        tx,
      );
      const notice = maybeTakenNotice(request.decidedByDeadline ? null : request.decidedBy, why);
      await this.deps.outbox.add(tx, { kind: "flow.reminder", subjectId: request.id, part: `abandoned:${request.decidedAt?.getTime() ?? 0}`, payload: { notice } });
      await this.deps.outbox.add(tx, this.target.show(request));
      return true;
    });
    if (reopened) this.deps.outbox.nudge();
    return reopened;
  }

  /** The decisions and deadline actions of a replica gone (its heartbeat stale), taken over at once. */
  async takeOver(): Promise<void> {
    await this.recover();
    if (this.deps.flows.some((f) => f.decideWithinMs)) await this.deadlinesDue(true);
  }

  /** A request by its id (FlowRequest.id), or null. */
  async get(id: string): Promise<FlowRequest | null> {
    return isUuid(id) ? ((await store.findFlowRequest(this.sql, id)) ?? null) : null;
  }

  /** Who may decide: the flow's reviewers and the request's assignee; undefined: anyone. */
  who(request: Pick<FlowRequest, "flowName" | "assigneeUserId">): string | undefined {
    const rules = this.deps.rules.rulesFor(request.flowName);
    if (!rules) return undefined;
    return [describeReviewers(rules), request.assigneeUserId ? `<@${request.assigneeUserId}>` : ""].filter(Boolean).join(", ");
  }

  /** What someone who may not answer the request is told: who may. */
  notAllowed(request: Pick<FlowRequest, "flowName" | "assigneeUserId">): FlowDecisionOutcome {
    return { kind: "not_allowed", who: this.who(request) ?? "the flow's reviewers" };
  }

  /** Who a request goes to directly when Slack refuses its channel: whoever it is assigned or handed to, else the flow's reviewers. */
  directRecipients(request: Pick<FlowRequest, "flowName" | "assigneeUserId" | "reassignedTo">): { users: string[]; usergroups: string[] } {
    const assigned = [request.reassignedTo, request.assigneeUserId].filter((u): u is string => !!u);
    if (assigned.length) return { users: [...new Set(assigned)], usergroups: [] };
    const rules = this.deps.rules.rulesFor(request.flowName);
    return { users: [...(rules?.users ?? [])], usergroups: [...(rules?.usergroups ?? [])] };
  }

  async mayDecide(request: FlowRequestAccess, userId: string): Promise<boolean> {
    return (await this.isGranted(request, userId)) || this.deps.rules.mayDecide(request.flowName, userId);
  }

  /** Assigned or reassigned to the user, or escalated to them or a group of theirs (looked up in the request's workspace). */
  private async isGranted(request: FlowRequestAccess, userId: string): Promise<boolean> {
    if (request.assigneeUserId === userId) return true;
    return this.deps.rules.isGranted(request, userId, request.teamId ? { teamId: request.teamId, enterpriseId: request.enterpriseId } : undefined).catch(() => false);
  }

  /** Whether the request is the user's to answer, as App Home lists it: assigned, reassigned or escalated to them, or by the flow's rules (without rules: its assignee only). */
  async isWaitingFor(request: FlowRequestAccess, userId: string): Promise<boolean> {
    return (await this.isGranted(request, userId)) || (!!this.deps.rules.rulesFor(request.flowName) && this.deps.rules.mayDecide(request.flowName, userId));
  }

  /** The approve-like outcome a request can be answered with from App Home (no feedback needed); undefined: it needs the message. */
  homeApproval(request: Pick<FlowRequest, "emit">): { index: number; outcome: string } | undefined {
    const emit = outcomesOf(request);
    const index = emit.findIndex((o) => outcomeLeaning(o) === "approve");
    return index >= 0 ? { index, outcome: emit[index]! } : undefined;
  }

  /** The first decision wins atomically; the platform hears it exactly once. */
  async decide(d: FlowDecision): Promise<FlowDecisionOutcome> {
    const request = await this.get(d.requestId);
    if (!request) return { kind: "unknown_request" };
    if (!d.byDeadline && !d.fromHome && (!request.messageTs || d.channelId !== request.channelId || d.messageTs !== request.messageTs)) return { kind: "wrong_message" };
    if (request.state !== "pending") return { kind: "already_decided", request };
    const emit = outcomesOf(request);
    const outcome = d.outcomeIndex === undefined ? undefined : emit[d.outcomeIndex];
    // An index must name one of `emit`; no index (Send feedback) only on a flow that routes on none.
    if (d.outcomeIndex === undefined ? emit.length > 0 : outcome === undefined) return { kind: "unknown_outcome" };
    const comment = isBlank(d.feedback) ? "" : d.feedback.trim();
    if (!outcome && !comment && d.editedOutput === undefined) return { kind: "feedback_required" };
    if (!d.byDeadline && !(await this.mayDecide(request, d.userId))) return this.notAllowed(request);

    // Approvals: an approve-like outcome (or an edit) counts once per person; with `approvals: N` the
    // flow hears nothing until N distinct people approved with the same outcome, which it then receives
    // (approving with another moves the person's approval to it). Reject-like outcomes decide at once.
    const required = approvalPolicy(this.flow(request.flowName)).required;
    const edited = d.editedOutput !== undefined;
    const approving = outcome ? outcomeLeaning(outcome) === "approve" : edited;
    const decidedAt = this.clock.now();
    const decision: store.DecisionClaim = {
      decidedBy: d.userId,
      outcome: outcome ?? null,
      feedback: comment || null,
      decidedAt,
      decidedByDeadline: !!d.byDeadline,
      claimedBy: this.deps.holder?.replicaId ?? null,
    };
    const decided = (current: FlowRequest | null | undefined): FlowDecisionOutcome => (current ? { kind: "already_decided", request: current } : { kind: "unknown_request" });
    return this.core.decide<FlowRequest, FlowDecisionOutcome>(this.target, request, {
      userId: d.userId,
      ...(approving && !d.byDeadline && (required > 1 || edited)
        ? {
            approval: {
              required,
              note: comment || null,
              editedOutput: d.editedOutput,
              outcome: outcome ?? null,
              audit: { kind: "flow_approval", decision: outcome ?? "feedback", feedback: comment || null },
              detail: { ...(edited ? { edited: true } : {}), ...(d.via ? { via: d.via } : {}) },
            },
          }
        : {}),
      claim: (tx) => store.claimDecision(tx, request.id, flowRequestTransition("claimed"), decision, decidedAt),
      named: {
        taken: decided,
        waiting: (how, approvals) =>
          how === "added"
            ? { kind: "approval_recorded", request, approvals, required }
            : { kind: "already_approved", request, approvals, required, ...(how === "updated" ? { updated: true } : {}) },
        lost: async (approvals) => {
          const current = await store.findFlowRequest(this.sql, request.id);
          // Two approvals completed the count at once: the other one answers, and this one is part of it.
          if (current && approvals.some((a) => a.userId === d.userId) && current.outcome === (outcome ?? null)) return { kind: "approval_counted", request: current };
          return decided(current);
        },
      },
      deliver: (approvals) => {
        const several = approvals.length > 1 || latestEdit(approvals);
        return this.deliver(request, d, { outcome, comment, decidedAt, approvals }, feedbackText(outcome, several ? approvalFeedback(approvals, "the output") : comment));
      },
    });
  }

  /** Answers the flow (its callback) with the claimed decision and settles what came of it. */
  private async deliver(
    request: FlowRequest,
    d: FlowDecision,
    c: { outcome: string | undefined; comment: string; decidedAt: Date; approvals: StoredApproval[] },
    feedback: string,
  ): Promise<FlowDecisionOutcome> {
    const answer = await this.deps.callback.answer(request.callbackUrl, feedback);
    // An earlier answer that may have reached the flow, as the request kept it before this claim.
    const earlier = store.maybeTakenOf(request);
    const fate = answerFate(answer, !!earlier);
    const reopens = fate === "not_taken" || fate === "maybe_taken" || fate === "failed";
    if (reopens) this.deps.log.warn("flow callback failed; request is open again", { id: request.id, flow: request.flowName, status: answer.status, error: answer.message });
    const message = answer.message ?? "the flow could not be reached";
    // Two answers in a row that may have reached the flow: the first is the one it would have taken.
    const kept: store.MaybeTaken | null =
      fate === "maybe_taken" && !earlier
        ? {
            decidedBy: d.userId,
            outcome: c.outcome ?? null,
            feedback: c.comment || null,
            decidedByDeadline: !!d.byDeadline,
            answerStatus: answer.status,
            answerMessage: `An earlier answer may have reached the flow (${message}).`,
          }
        : earlier;
    // Taken earlier: the audit row is that answer's, naming the one refused now.
    const taken = fate === "taken_earlier" && earlier ? earlier : undefined;
    const answerMessage = taken ? `it already had an answer, most likely an earlier one whose delivery was not confirmed (it refused a later one: ${message})` : answer.message;
    const deadlineNotice = (): NewEffect => ({
      kind: "flow.reminder",
      subjectId: request.id,
      part: `deadline-failed:${request.decideBy?.getTime() ?? 0}`,
      payload: {
        notice:
          fate === "maybe_taken" ? maybeTakenNotice(null, "the flow did not say in time whether it took it") : ({ kind: "deadline_not_delivered", message } satisfies FlowNotice),
      },
    });
    let settled: FlowRequest;
    let ours: boolean;
    try {
      ({ row: settled, ours } = await this.core.settle(this.target, request, {
        move: async (tx) => {
          const now = this.clock.now();
          const deadlineDone = !!d.byDeadline;
          const move = flowRequestTransition(FATE_EVENT[fate]);
          // Refused for itself: the approvals that built it are counted again from none, or the next approve would send it again.
          if (fate === "not_taken") await clearApprovals(tx, "FlowRequest", request.id);
          const { row, ours } = reopens
            ? await store.reopenFailedDecision(tx, request.id, move, { deadlineDone, maybeTaken: kept }, c.decidedAt, now)
            : await store.settleDecision(tx, request.id, move, { status: answer.status, message: answerMessage, deadlineDone }, c.decidedAt, now, taken);
          if (!row) throw new Error(`flow request ${request.id} vanished while it was being answered`);
          return { row, ours };
        },
        audit: {
          kind: "flow_decision",
          actor: taken?.decidedBy ?? d.userId,
          decision: (taken ? taken.outcome : c.outcome) ?? "feedback",
          feedback: taken ? taken.feedback : c.comment || null,
          msToDecision: Math.max(0, c.decidedAt.getTime() - request.createdAt.getTime()),
          resumeStatus: answer.status ? String(answer.status) : null,
          resumeMessage: answerMessage,
          detail: {
            outcome: fate === "taken_earlier" ? "answered" : reopens ? "failed" : fate,
            ...(fate === "not_taken" ? { notTaken: true } : {}),
            ...(fate === "maybe_taken" ? { maybeTaken: true } : {}),
            ...(taken ? { takenEarlier: true, refusedAnswer: { by: d.userId, decision: c.outcome ?? "feedback" } } : {}),
            ...((taken ? taken.decidedByDeadline : d.byDeadline) ? { byDeadline: true } : {}),
            ...(d.via && !taken ? { via: d.via } : {}),
          },
        },
        approvals: taken ? [] : c.approvals,
        // Opened again as it was: nothing to show, unless it now says an answer may have reached the flow, or its approvals were forgotten.
        show: !reopens || fate === "maybe_taken" || fate === "not_taken",
        taken: fate === "answered",
        // The deadline's answer did not arrive: said under the request, which is open again (its deadline is done).
        effects: reopens && d.byDeadline ? [deadlineNotice()] : [],
      }));
    } catch (err) {
      // Only an answer the flow took: a refusal not stored is an error like any other.
      if (answer.kind !== "ok") throw err;
      // The flow has its answer; only storing that failed. Saying "nothing was sent" would be wrong.
      this.deps.log.error("flow answer delivered but could not be stored", { id: request.id, err });
      return { kind: "unrecorded", request };
    }
    if (!ours) return { kind: "taken_over", request: settled };
    switch (fate) {
      case "answered":
        return { kind: "answered", request: settled };
      case "taken_earlier":
        return { kind: "taken_earlier", request: settled, by: taken!.decidedByDeadline ? null : taken!.decidedBy, outcome: taken!.outcome };
      case "closed":
        return { kind: "closed", request: settled, reason: answer.message ?? "" };
      case "not_taken":
        return { kind: "not_taken", request: settled, reason: message };
      case "maybe_taken":
        return { kind: "maybe_taken", request: settled, message };
      case "failed":
        return { kind: "failed", request: settled, message };
    }
  }

  private approvals(flowRequestId: string): Promise<StoredApproval[]> {
    return approvalsOf(this.sql, "FlowRequest", flowRequestId);
  }

  /** What the request's message shows beside its row (approvals so far, the edit): only while they can still count, or when they built the answer. */
  async context(request: FlowRequest): Promise<FlowRequestContext> {
    if (!approvalsMayShow(request)) return {};
    // Answered: only the approvals of the outcome the flow received built its answer.
    const approvals = approvalsFor(await this.approvals(request.id), request.state === "answered" ? request.outcome : undefined);
    const required = approvalPolicy(this.flow(request.flowName)).required;
    return approvalsAnswered(request, approvals, required) ? approvalsShown(approvals, required) : {};
  }

  // ------------------------------------------------------------------ reminders

  /** Reminds who may decide (or the assignee) about requests nobody answered; once per replica set (the decision core). */
  async remindDue(): Promise<number> {
    const settings = this.deps.reminders;
    if (!settings || settings.max <= 0) return 0;
    const due = await remindersDue(this.sql, "FlowRequest", { now: this.clock.now(), afterMs: settings.afterMs, max: settings.max, limit: 50 });
    return this.core.remind(this.target, due, { settings, who: (r) => this.remindWho(r), afterReminder: (r, sent) => this.escalateAfter(r, sent) });
  }

  /** Who a reminder mentions: the flow's named reviewers who have not approved yet (groups stay), its assignee and reassignee. */
  private async remindWho(request: FlowRequest): Promise<string> {
    const rules = this.deps.rules.rulesFor(request.flowName);
    const approvedBy = new Set((await this.approvals(request.id)).map((a) => a.userId));
    const mentions = [rules ? describeWaitingReviewers(rules, approvedBy) : ""];
    for (const user of [request.assigneeUserId, request.reassignedTo])
      if (user && !approvedBy.has(user) && !mentions.some((m) => m.includes(`<@${user}>`))) mentions.push(`<@${user}>`);
    return mentions.filter(Boolean).join(", ") || "Reviewers";
  }

  // ------------------------------------------------------------------ escalation, reassignment, deadlines (the decision core)

  /** After a reminder (a deadline's remind counts as one): the one that reaches REVIEW_REMINDER_MAX escalates the request to the flow's escalateTo, once. */
  private async escalateAfter(request: FlowRequest, remindersSent: number): Promise<void> {
    await this.core
      .escalate(this.target, request, remindersSent, this.deps.reminders?.max ?? 0)
      .catch((err) => this.deps.log.warn("could not escalate a flow request", { id: request.id, err: errText(err) }));
  }

  /** Hands a pending request to `to` (the caller checked that `by` may answer it): mentioned under it, they may answer it. */
  async reassign(p: { requestId: string; by: string; to: string; reason: string }): Promise<FlowReassignOutcome> {
    const request = await this.get(p.requestId);
    if (!request) return { kind: "unknown_request" };
    const outcome = await this.core.reassign(this.target, request, p);
    return outcome.kind === "reassigned" ? { kind: "reassigned", request: outcome.row } : outcome;
  }

  /**
   * Requests whose deadline passed, acted on once: reject / approve send the flow's matching outcome
   * (the reject-like or approve-like one of `emit`, or just the feedback when it routes on none)
   * through decide(), like a click; remind, or an outcome the flow does not offer, posts a reminder
   * under the request instead (counted as one). `takeoversOnly`: only the actions whose holder is gone.
   */
  async deadlinesDue(takeoversOnly = false): Promise<number> {
    const due = await this.core.dueDeadlines("FlowRequest", { staleMs: this.deps.abandonedAfterMs ?? 60_000, takeoversOnly });
    return this.core.takeDeadlines(this.target, due, {
      settings: this.deps.reminders ?? { afterMs: 0, max: 0 },
      plan: (request, now) => {
        const emit = outcomesOf(request);
        const wanted = request.onTimeout === "approve" || request.onTimeout === "reject" ? request.onTimeout : undefined;
        const index = wanted && emit.length ? emit.findIndex((o) => outcomeLeaning(o) === wanted) : -1;
        const withinMs = this.flow(request.flowName)?.decideWithinMs ?? Math.max(0, (request.decideBy ?? now).getTime() - request.createdAt.getTime());
        if (!wanted || (emit.length > 0 && index < 0)) return { kind: "remind", withinMs, ...(wanted ? { lacking: wanted } : {}), detail: () => (wanted ? { wanted } : {}) };
        // decide() answers the flow and records it (its notice when the answer did not arrive included).
        const decide = async (feedback: string) => {
          const outcome = await this.decide({ requestId: request.id, userId: DEADLINE_ACTOR, outcomeIndex: emit.length ? index : undefined, feedback, byDeadline: true });
          return outcome.kind === "already_decided" ? { beaten: true } : {};
        };
        return { kind: "decide", action: wanted, withinMs, decide };
      },
      who: (r) => this.remindWho(r),
      afterReminder: (r, sent) => this.escalateAfter(r, sent),
    });
  }

  /** A request by the platform's id (for `/crew audit <id>`). */
  async findByRequestId(requestId: string): Promise<FlowRequest | null> {
    return (await store.findFlowRequestByPlatformId(this.sql, requestId)) ?? null;
  }

  /** Pending requests this user may decide (App Home; of one workspace when given), oldest first. */
  async waitingFor(userId: string, teamId?: string): Promise<store.HomeFlowRequest[]> {
    // Only the requests that may be this user's are read, however many others wait: the rules are
    // asked once per flow and escalation list the pending requests have; isWaitingFor still decides.
    const kinds = await store.postedPendingKinds(this.sql, teamId);
    const { rules } = this.deps;
    const ruled = kinds.flows.filter((flowName) => rules.rulesFor(flowName) !== undefined);
    const decides = await Promise.all(ruled.map((flowName) => rules.mayDecide(flowName, userId)));
    const now = this.clock.now();
    const granted = await Promise.all(
      kinds.escalations.map((e) =>
        rules
          .isGranted({ reassignedTo: null, escalatedAt: now, escalatedTo: e.escalatedTo }, userId, e.teamId ? { teamId: e.teamId, enterpriseId: e.enterpriseId } : undefined)
          .catch(() => false),
      ),
    );
    const mine = {
      userId,
      flows: ruled.filter((_, i) => decides[i]),
      escalatedTo: [...new Set(kinds.escalations.filter((_, i) => granted[i]).map((e) => e.escalatedTo))],
    };
    const pending = await store.listPostedPending(this.sql, { for: mine, ...(teamId ? { teamId } : {}), limit: 500 });
    // Someone who approved a request still waiting for more approvals is not waited for.
    const ids = pending.map((r) => r.id);
    const approved = await approvedBy(this.sql, "FlowRequest", userId, ids);
    const listed: store.HomeFlowRequest[] = [];
    for (const request of pending) if (!approved.has(request.id) && (await this.isWaitingFor(request, userId))) listed.push(request);
    return listed;
  }

  /**
   * Its jobs (usecases/jobs.ts): deadlines, the recovery sweep (a first pass at start), reminders.
   * `earlierRun`: the database is this process's alone, so what is left mid-decision at start was left by
   * its earlier incarnation and is reopened at once.
   */
  jobs(opts: { reminderIntervalMs?: number; sweepMs?: number; deadlineIntervalMs?: number; earlierRun?: boolean } = {}): Job[] {
    const sweep: Job = { name: "flow recovery sweep", atStart: () => this.recover(opts.earlierRun) };
    if (this.deps.flows.length === 0) return [sweep];
    return [
      ...(this.deps.flows.some((f) => f.decideWithinMs) ? [{ name: "flow deadlines", every: { ms: opts.deadlineIntervalMs ?? 10_000, run: () => this.deadlinesDue() } }] : []),
      { ...sweep, every: { ms: opts.sweepMs ?? 30_000, run: () => this.recover() } },
      ...(this.deps.reminders && this.deps.reminders.max > 0 ? [{ name: "flow reminders", every: { ms: opts.reminderIntervalMs ?? 60_000, run: () => this.remindDue() } }] : []),
    ];
  }
}
