// The decision core: one lifecycle for both kinds of decision request, a crew's review round and a
// flow's feedback request. Reminders toward whoever may decide, escalation after the last one, a
// hand-over to someone else (reassignment), the deadline and its action, and the approvals counted
// toward N: each is a claim on the request's row (store/decision-requests.ts: one set of SQL for both
// tables), with its audit row and its Slack effects in the same transaction. What differs between
// the kinds is the small port DecisionTarget: its table, what its audit rows name, and which outbox
// effect shows or notices it (crew-review.ts, flow-request.ts).
import crypto from "node:crypto";
import type { ReviewerRules as RulesConfig } from "../../config/config.js";
import { approvalsFor, approvalTally, latestEdit, type StoredApproval } from "../../domain/approvals.js";
import type { Logger } from "../../log/log.js";
import {
  type ApprovalAdded,
  addApproval,
  approvalsOf,
  claimDeadline,
  claimEscalation,
  claimReassignment,
  claimReminder,
  deadlineDone,
  deadlinesDue,
  type LiveRuns,
  lockRequest,
  type RequestTable,
  releaseDeadline,
} from "../../store/decision-requests.js";
import { inTransaction, type Sql } from "../../store/sql.js";
import { describeDuration } from "../../text/duration.js";
import type { Audit } from "../audit.js";
import { type ClaimHolder, type Clock, type NewEffect, type Outbox, systemClock } from "../ports.js";

/** The actor recorded for decisions taken by a deadline (never a Slack user id). */
export const DEADLINE_ACTOR = "crewline:deadline";
/** The actor recorded for escalations. */
const ESCALATION_ACTOR = "crewline:escalation";

/** What every decision request has (the lifecycle columns both tables share). */
export interface RequestBase {
  id: string;
  state: string;
  createdAt: Date;
  remindersSent: number;
  decideBy: Date | null;
  deadlineHandledAt: Date | null;
  reassignedTo: string | null;
}

/** What an audit row about a request names: its run or flow request, task, round and output; `ref` starts every row's detail. */
export interface AuditRef {
  executionId: string | null;
  flowRequestId?: string;
  taskKey: string | null;
  round?: number;
  outputHash: string;
  ref: Record<string, unknown>;
}

/** A notice under a request: an escalation or a reassignment (the kind words it with its own names). */
export type RequestNotice = { kind: "escalation"; ids: string[]; reminders: number } | { kind: "reassignment"; to: string; by: string; reason?: string };

/** How a kind of decision request is stored, audited and shown: the port of the core. */
export interface DecisionTarget<R extends RequestBase> {
  table: RequestTable;
  audited(r: R): AuditRef;
  /** The effect that shows its message again (from its row). */
  show(r: R): NewEffect;
  /** The effect of a notice under it; `part` keys it (one per escalation, one per reassignment). */
  notice(r: R, notice: RequestNotice, part: string): NewEffect;
  /** The effect of reminder number `count`. */
  reminder(r: R, count: number, facts: { who: string; waitedMs: number }): NewEffect;
  /** The effect of the reminder its deadline posts (an action it cannot take is `lacking`). */
  deadlineNotice(r: R, facts: { who: string; withinMs: number; lacking?: "approve" | "reject" }): NewEffect;
  /** The effect that attaches the edited version after an edit and approve. */
  edited(r: R, by: string): NewEffect;
  /** Whom it is escalated to after its last reminder (escalateTo); undefined: nobody. */
  escalateTo(r: R): RulesConfig | undefined;
}

export interface DecisionCoreDeps {
  db: Sql;
  outbox: Outbox;
  audit?: Audit;
  log: Logger;
  clock?: Clock;
  /** This replica, named in the deadline claims it makes (unset: claims name no holder, and go by their age alone). */
  holder?: ClaimHolder;
}

export type ReassignResult<R> = { kind: "reassigned"; row: R } | { kind: "not_pending" } | { kind: "same_person" };

/** A reminder's facts and what follows it (escalation, after the last one). */
export interface ReminderRound<R> {
  /** Reminders per request at most, and the wait before the first (then twice as long each time). */
  settings: { afterMs: number; max: number };
  who(r: R): Promise<string>;
  afterReminder(r: R, remindersSent: number): Promise<unknown>;
}

/** What a passed deadline does with one request. */
export type DeadlinePlan =
  | { kind: "decide"; action: "approve" | "reject"; withinMs: number; decide(feedback: string): Promise<DeadlineDecided> }
  | { kind: "remind"; withinMs: number; lacking?: "approve" | "reject"; detail(claimed: RequestBase): Record<string, unknown> };

/** How long a person whose decision did not arrive has to decide again before a passed deadline acts. */
export const DEADLINE_AFTER_FAILED_DECISION_MS = 5 * 60_000;

/**
 * What a deadline's decision led to: `notice`, a thread notice to post (its answer did not arrive);
 * `beaten`, someone's decision was under way or made first, so the deadline stands (released) in case
 * that decision does not arrive and the request waits again.
 */
export type DeadlineDecided = { notice?: NewEffect; beaten?: boolean };

/** An output's sha256: what audit rows and round detection name an output by. */
export function hashOutput(output: string): string {
  return crypto.createHash("sha256").update(output).digest("hex");
}

/**
 * When the reminder after reminder number `sent` is due, that one sent at `now`: afterMs, then 2·afterMs
 * later, then 4·afterMs later… (null: `sent` was the last). Counted from when the last one went (not from
 * the request's creation), so reminders a stopped bot missed are not all posted at once on its return,
 * and a deadline's reminder (counted as one) is followed by the next in turn.
 */
function nextReminderDue(now: Date, sent: number, { afterMs, max }: ReminderRound<unknown>["settings"]): Date | null {
  return sent < max ? new Date(now.getTime() + afterMs * 2 ** sent) : null;
}

export class DecisionCore {
  private readonly sql: Sql;
  private readonly clock: Clock;

  constructor(private readonly deps: DecisionCoreDeps) {
    this.sql = deps.db;
    this.clock = deps.clock ?? systemClock;
  }

  /** Its audit row, in the transaction `tx`: what the request names, then the row's own facts. */
  private audit<R extends RequestBase>(tx: Sql, target: DecisionTarget<R>, r: R, kind: string, row: Record<string, unknown>, detail: Record<string, unknown>, first?: string) {
    const { ref, ...names } = target.audited(r);
    // A decision's detail names its outcome first (`first`), then the request.
    const lead = first ? { [first]: detail[first] } : {};
    return this.deps.audit?.record({ ...names, kind, ...row, detail: { ...lead, ...ref, ...detail } } as Parameters<Audit["record"]>[0], tx);
  }

  private waited(r: RequestBase, now: Date): number {
    return Math.max(0, now.getTime() - r.createdAt.getTime());
  }

  /**
   * After a reminder (a deadline's remind counts as one): the one that reaches the maximum escalates
   * the request to its escalateTo, once (claimed on escalatedAt): they are mentioned under it and may
   * decide it from then on. The claim, its audit row and its Slack effects are one transaction.
   */
  async escalate<R extends RequestBase>(target: DecisionTarget<R>, r: R, remindersSent: number, reminderMax: number): Promise<boolean> {
    if (remindersSent < reminderMax) return false;
    const rules = target.escalateTo(r);
    const ids = rules ? [...rules.users, ...rules.usergroups] : [];
    if (ids.length === 0) return false;
    const now = this.clock.now();
    const escalated = await inTransaction(this.sql, async (tx) => {
      const claimed = await claimEscalation(tx, target.table, r.id, { to: ids.join(","), now });
      if (!claimed) return false;
      await this.audit(tx, target, r, "escalation", { actor: ESCALATION_ACTOR, msToDecision: this.waited(r, now) }, { escalatedTo: ids, remindersSent });
      await this.deps.outbox.add(tx, target.notice(r, { kind: "escalation", ids, reminders: remindersSent }, "escalation"));
      await this.deps.outbox.add(tx, target.show(r));
      return true;
    });
    if (escalated) this.deps.outbox.nudge();
    return escalated;
  }

  /** Hands a pending request to `to` (the caller checked that `by` may decide it): mentioned under it, they may decide it. */
  async reassign<R extends RequestBase>(target: DecisionTarget<R>, r: R, p: { by: string; to: string; reason: string }): Promise<ReassignResult<R>> {
    if (r.state !== "pending") return { kind: "not_pending" };
    if (r.reassignedTo === p.to) return { kind: "same_person" };
    const now = this.clock.now();
    const reason = p.reason.trim().slice(0, 500);
    const reassigned = await inTransaction(this.sql, async (tx) => {
      const row = await claimReassignment(tx, target.table, r.id, { to: p.to, by: p.by, reason: reason || null, now });
      if (!row) return null;
      await this.audit(tx, target, r, "reassignment", { actor: p.by, feedback: reason || null }, { reassignedTo: p.to, previously: r.reassignedTo ?? null });
      const notice = { kind: "reassignment", to: p.to, by: p.by, ...(reason ? { reason } : {}) } as const;
      await this.deps.outbox.add(tx, target.notice(r, notice, `reassign:${crypto.randomUUID()}`));
      await this.deps.outbox.add(tx, target.show(r));
      return { ...r, ...row } as R;
    });
    if (!reassigned) return { kind: "not_pending" };
    this.deps.outbox.nudge();
    return { kind: "reassigned", row: reassigned };
  }

  /**
   * Reminds who may decide about each request due (listed by the caller): each reminder is claimed
   * on remindersSent, so with several replicas it is posted once; the last may escalate. How many were sent.
   */
  async remind<R extends RequestBase>(target: DecisionTarget<R>, due: R[], round: ReminderRound<R>): Promise<number> {
    const now = this.clock.now();
    let sent = 0;
    for (const r of due) {
      const count = r.remindersSent + 1;
      try {
        // Read before the transaction: who to mention may take other reads.
        const who = await round.who(r);
        // The claim: only the replica that moves remindersSent from its value enqueues this reminder.
        const claimed = await inTransaction(this.sql, async (tx) => {
          if (!(await claimReminder(tx, target.table, r.id, { sent: count, nextReminderAt: nextReminderDue(now, count, round.settings), now }))) return false;
          await this.deps.outbox.add(tx, target.reminder(r, count, { who, waitedMs: now.getTime() - r.createdAt.getTime() }));
          return true;
        });
        if (!claimed) continue;
        sent++;
        // The last reminder may escalate the request: its mention follows the reminder.
        await round.afterReminder({ ...r, remindersSent: count }, count);
      } catch (err) {
        // One request's failure (a read, its claim) leaves the others their reminders; it is tried next pass.
        this.deps.log.warn("could not remind about a request", { id: r.id, table: target.table, err });
      }
    }
    if (sent) this.deps.outbox.nudge();
    return sent;
  }

  /**
   * The requests whose deadline passed: not claimed yet, or claimed by a process that died before the
   * action finished (its claim older than `staleMs`, or its holder gone). `takeoversOnly`: only the
   * actions whose holder is gone.
   */
  dueDeadlines<T extends RequestTable>(table: T, { staleMs, ...p }: { staleMs: number; takeoversOnly: boolean; liveRuns?: LiveRuns }) {
    const now = this.clock.now();
    const { holder } = this.deps;
    return deadlinesDue(this.sql, table, { ...p, now, staleBefore: new Date(now.getTime() - staleMs), deadBefore: holder?.deadBefore(now), self: holder?.replicaId, limit: 50 });
  }

  /**
   * Takes each passed deadline (listed by the caller) once, claimed on deadlineHandledAt: a decision
   * goes through the kind's decide, like a click (the claim keeps other replicas off meanwhile); a
   * remind posts a reminder under the request instead, counted as one, in one transaction with its
   * claim, its audit row and the message that stops announcing the deadline. How many were taken.
   */
  async takeDeadlines<R extends RequestBase>(target: DecisionTarget<R>, due: R[], plans: { plan(r: R, now: Date): DeadlinePlan } & ReminderRound<R>): Promise<number> {
    const now = this.clock.now();
    let taken = 0;
    for (const r of due) {
      const plan = plans.plan(r, now);
      try {
        if (plan.kind === "decide") {
          if (!(await claimDeadline(this.sql, target.table, r.id, { handledAt: r.deadlineHandledAt, now, remind: false, done: false, owner: this.deps.holder?.replicaId })))
            continue;
          const { notice, beaten } = await plan.decide(timeoutFeedback(plan.action, plan.withinMs));
          // Whatever it led to (decided, refused, failed), it is done. Beaten by someone's decision still
          // being sent, it is given back: should that decision not arrive, the request waits again, and
          // its deadline acts a while later, leaving the person time to decide again first.
          await inTransaction(this.sql, async (tx) => {
            if (notice) await this.deps.outbox.add(tx, notice);
            const at = this.clock.now();
            const released = beaten && (await releaseDeadline(tx, target.table, r.id, { decideBy: new Date(at.getTime() + DEADLINE_AFTER_FAILED_DECISION_MS), now: at }));
            if (!released) await deadlineDone(tx, target.table, r.id, at);
          });
          if (notice) this.deps.outbox.nudge();
        } else {
          const who = await plans.who(r);
          const current = await inTransaction(this.sql, async (tx) => {
            const claimed = await claimDeadline(tx, target.table, r.id, {
              handledAt: r.deadlineHandledAt,
              now,
              // Counted as a reminder: the next one follows it in turn (none after the last).
              remind: { nextReminderAt: nextReminderDue(now, r.remindersSent + 1, plans.settings) },
              done: true,
              owner: this.deps.holder?.replicaId,
            });
            if (!claimed) return null;
            await this.audit(tx, target, r, "deadline", { actor: DEADLINE_ACTOR, msToDecision: this.waited(r, now) }, { action: "remind", ...plan.detail(claimed) });
            await this.deps.outbox.add(tx, target.deadlineNotice(r, { who, withinMs: plan.withinMs, ...(plan.lacking ? { lacking: plan.lacking } : {}) }));
            // The message stops announcing a deadline that has passed.
            await this.deps.outbox.add(tx, target.show(r));
            return { ...r, ...claimed } as R;
          });
          if (!current) continue;
          this.deps.outbox.nudge();
          // Counted as a reminder: it may be the last one, which escalates the request.
          await plans.afterReminder(current, current.remindersSent);
        }
        taken++;
      } catch (err) {
        this.deps.log.warn("could not take a deadline's action", { id: r.id, table: target.table, err });
      }
    }
    return taken;
  }

  /**
   * What happens when someone decides, up to the delivery: an approval (not the deadline's) is counted
   * toward N first, in one transaction that stores it once per person, counts, and, while more are
   * needed, audits it and shows it on the message. The request's row is locked meanwhile, so approvals
   * given at the same moment are counted one after the other, and the one that completes the count
   * claims the decision in the same transaction. Anything else claims it at once. The first claim
   * wins (pending → deciding) and is delivered by its kind exactly once; a lost claim is named by it.
   */
  async decide<R extends RequestBase, O>(target: DecisionTarget<R>, r: R, call: DecisionCall<R, O>): Promise<O> {
    const a = call.approval;
    if (!a) return (await call.claim(this.sql)) ? call.deliver([]) : call.named.lost([]);
    const step = await inTransaction(this.sql, async (tx) => {
      const locked = (await lockRequest(tx, target.table, r.id)) as R | null;
      if (locked?.state !== "pending") return { kind: "taken" as const, current: locked };
      const now = this.clock.now();
      const added = await addApproval(tx, target.table, { requestId: r.id, userId: call.userId, note: a.note, editedOutput: a.editedOutput ?? null, outcome: a.outcome }, now);
      // Only the approvals of the same outcome count with it (a flow's; a review's all count).
      const approvals = approvalsFor(await approvalsOf(tx, target.table, r.id), a.outcome);
      const tally = approvalTally(approvals, a.required);
      if (tally.done) return { kind: "complete" as const, approvals, claimed: await call.claim(tx) };
      // An edit is recorded (audited, shown) even when it repeats the person's earlier one.
      const how = added === "unchanged" && a.editedOutput !== undefined ? "updated" : added;
      const recorded = how !== "unchanged";
      if (recorded) {
        const { kind, ...row } = a.audit;
        await this.audit(
          tx,
          target,
          r,
          kind,
          { actor: call.userId, ...row, msToDecision: this.waited(r, now) },
          { approvals: tally.approvers.length, required: tally.required, ...a.detail },
        );
        // The message shows who approved so far ("1 of 2 approvals").
        await this.deps.outbox.add(tx, target.show(r));
      }
      return { kind: "waiting" as const, how, recorded, approvals: tally.approvers.length };
    });
    if (step.kind === "taken") return call.named.taken(step.current);
    if (step.kind === "waiting") {
      if (step.recorded) this.deps.outbox.nudge();
      return call.named.waiting(step.how, step.approvals);
    }
    return step.claimed ? call.deliver(step.approvals) : call.named.lost(step.approvals);
  }

  /**
   * What came of a claimed decision, in one transaction: the request's new state (`move`, with its
   * run's when it has one), the decision's audit row, the message shown again from its row (unless
   * it opened again), the edited version after an edit and approve that was taken, and any notice.
   * Returns the row as it is now; `ours` false: the claim had been taken over, and nothing moved.
   */
  async settle<R extends RequestBase>(target: DecisionTarget<R>, r: R, s: Settlement<R>): Promise<{ row: R; ours: boolean }> {
    const edit = latestEdit(s.approvals);
    const settled = await inTransaction(this.sql, async (tx) => {
      const { row, ours } = await s.move(tx);
      const { kind, detail, ...facts } = s.audit;
      await this.audit(
        tx,
        target,
        r,
        kind,
        facts,
        {
          ...detail,
          ...(s.approvals.length > 1 ? { approvers: s.approvals.map((a) => a.userId) } : {}),
          ...(edit ? { edited: true, editedBy: edit.userId, editedOutputHash: hashOutput(edit.editedOutput) } : {}),
          ...s.detailAfter,
          // The crew (or flow) heard it all the same: the trail says so.
          ...(ours ? {} : { claimTakenOver: true }),
        },
        "outcome",
      );
      if (!ours) return { row, ours };
      if (s.show) await this.deps.outbox.add(tx, target.show(r));
      if (edit && s.taken) await this.deps.outbox.add(tx, target.edited(r, edit.userId));
      for (const effect of s.effects ?? []) await this.deps.outbox.add(tx, effect);
      return { row, ours };
    });
    if (settled.ours && (s.show || edit || s.effects?.length)) this.deps.outbox.nudge();
    return settled;
  }
}

/** One decision, as its kind hands it to the core: how it is counted, claimed, named and delivered. */
export interface DecisionCall<R, O> {
  userId: string;
  /** Counted toward N before the claim (an approval that is not the deadline's); undefined: claimed at once. */
  approval?: {
    required: number;
    note: string | null;
    editedOutput?: string;
    /** The approve-like outcome chosen (flow requests): counted only with approvals for the same one; undefined: with all. */
    outcome?: string | null;
    audit: { kind: string; decision: string; feedback: string | null };
    detail: Record<string, unknown>;
  };
  /** The claim (pending → deciding) with the decision's columns: false when another decision took it. */
  claim(db: Sql): Promise<boolean>;
  /** How the kind names what happened short of a delivery. */
  named: {
    /** Decided meanwhile (while the approval waited for the row). */
    taken(current: R | null): O;
    /** More approvals are needed: this one was new, changed the person's note or edit, or changed nothing. */
    waiting(how: ApprovalAdded, approvals: number): O;
    /** The claim went to another decision (perhaps one this approval was counted in). */
    lost(approvals: StoredApproval[]): Promise<O>;
  };
  /** Delivers the claimed decision (the crew's /resume, the flow's callback) and settles it. */
  deliver(approvals: StoredApproval[]): Promise<O>;
}

/** What came of a delivery, for DecisionCore.settle. */
export interface Settlement<R> {
  /**
   * The request's (and its run's) new state, if the claim that sent the decision still holds it; the row
   * as it is then. `ours` false: the claim was taken over meanwhile (its sender looked dead, the request
   * opened again and perhaps someone decided anew), so this late answer moves nothing and shows nothing.
   */
  move(tx: Sql): Promise<{ row: R; ours: boolean }>;
  /** The decision's audit row; its detail starts with the outcome, then what names the request. */
  audit: {
    kind: string;
    actor: string;
    decision: string;
    feedback: string | null;
    msToDecision: number;
    resumeStatus: string | null;
    resumeMessage: string | null;
    detail: Record<string, unknown>;
  };
  /** Detail after the approvers and the edit (what the crew was sent, when it is more than the note). */
  detailAfter?: Record<string, unknown>;
  approvals: StoredApproval[];
  /** The message is shown again (not when the request opened again: it looks as it did). */
  show: boolean;
  /** The answer was taken: an edit's version is attached. */
  taken: boolean;
  effects?: NewEffect[];
}

/** The feedback the crew (or flow) receives when the deadline decides: "No decision within 30 minutes: rejected automatically by Crewline". */
export function timeoutFeedback(action: "reject" | "approve", withinMs: number): string {
  return `No decision within ${describeDuration(withinMs)}: ${action === "reject" ? "rejected" : "approved"} automatically by Crewline`;
}
