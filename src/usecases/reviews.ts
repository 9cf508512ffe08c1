// Review rounds: one per task output, decided once through the decision core (decisions/core.ts),
// each decision resumed exactly once (/resume with the run's webhook settings).
import { type ApprovalPolicy, approvalFeedback, DEFAULT_APPROVAL_POLICY, type StoredApproval, selfApprovalRefused } from "../domain/approvals.js";
import { type ExecutionState, isFinished, LIVE_STATES, nextRound, type ReviewEvent, reviewTransition, STOPPED_STATES } from "../domain/states.js";
import type { Logger } from "../log/log.js";
import { isCrewError } from "../protocols/crew/errors.js";
import type { CrewApi, ResumeResult, TaskEvent } from "../protocols/crew/types.js";
import { abandonedRequests } from "../store/decision-requests.js";
import { holdInStates } from "../store/executions.js";
import { isUuid } from "../store/ids.js";
import {
  closeEarlierRounds,
  findReview,
  findReviewWithExecution,
  insertReview,
  latestReviewForTask,
  latestReviewOf,
  latestReviewWithOutput,
  latestWithOutputAndForTask,
  moveReview,
  openReviewsOf,
  type ReviewDecisionPatch,
  type ReviewWithExecution,
  recentlyAwaitedTasks,
  retakeDecision,
  setResumeTaskId,
  withExecutions,
} from "../store/reviews.js";
import { inTransaction, type Sql } from "../store/sql.js";
import { isBlank } from "../text/blank.js";
import type { Audit } from "./audit.js";
import { DecisionCore, hashOutput } from "./decisions/core.js";
import { crewReviewTarget } from "./decisions/crew-review.js";
import type { ClaimHolder, Clock, CrewDirectory, Execution, Outbox, Review, RunNotice, WebhookUrls } from "./ports.js";
import type { Runs } from "./runs.js";
import { noTelemetry, type Telemetry } from "./telemetry.js";

export type DecisionOutcome =
  | { kind: "unknown_review" }
  | { kind: "feedback_required" }
  | { kind: "not_allowed"; who: string }
  /** The run's starter may not approve its reviews (selfApproval: false). */
  | { kind: "self_approval_refused" }
  /** An approval was stored; more distinct approvers are needed before the crew hears it. */
  | { kind: "approval_recorded"; review: Review; approvals: number; required: number }
  /** This approval completed the count at the same moment as another one, which sent the decision. */
  | { kind: "approval_counted"; review: Review }
  /** This person had approved this round already; still waiting for others. `updated`: their new note or edit replaced the earlier one. */
  | { kind: "already_approved"; review: Review; approvals: number; required: number; updated?: boolean }
  | { kind: "already_decided"; review: Review }
  | { kind: "decided"; review: Review; resume: ResumeResult }
  | { kind: "not_waiting"; review: Review; message: string }
  | { kind: "resume_failed"; review: Review; message: string }
  /**
   * The crew's answer came so late that the review had been opened again meanwhile (its claim taken
   * over as abandoned): the crew heard this decision, but the review shows what happened since.
   */
  | { kind: "taken_over"; review: Review }
  /** The crew took the decision but Crewline could not store that: the claim stays until recoverAbandoned records it. */
  | { kind: "unrecorded"; review: Review };

export interface Decision {
  reviewId: string;
  userId: string;
  approve: boolean;
  feedback: string;
  /** Edit and approve: the whole output as the reviewer edited it. */
  editedOutput?: string;
  /** Taken by the review's deadline (review-requests.ts): no reviewer gate and no approval count, the same claim as a click. */
  byDeadline?: boolean;
  /** Given by a reply in the review's thread (reply-decisions.ts), not a click: said in the audit record. */
  via?: "reply";
}

/** A decision claimed for the crew, with what it is sent (the approvals counted, the feedback). */
interface Claimed {
  found: ReviewWithExecution;
  decision: Decision;
  claimedAt: Date;
  approvals: StoredApproval[];
  humanFeedback: string;
}

/** Each crew's approval rules (approvals:, selfApproval:). */
export type ApprovalPolicyOf = (crewName: string) => ApprovalPolicy;

/**
 * Decides whether a user may decide a review; issue-level rules plug in here. The review, when given,
 * may let in more people than the crew's rules (its escalation, its reassignment).
 */
export type ReviewerGate = (execution: Execution, userId: string, review?: Review) => Promise<{ allowed: true } | { allowed: false; who: string }>;

/** Called, in the transaction that makes a round a review (pending), before its message shows it: returns the row to show (e.g. with its deadline). */
export type OnPending = (execution: Execution, review: Review, tx: Sql) => Promise<Review>;

/**
 * Where a task output came from: a task webhook, a human-input request (the crew waits on it), or a
 * status poll made at `observedAt` that found the run waiting on it.
 */
export type ReviewOrigin = { source: "webhook" } | { source: "input" } | { source: "poll"; observedAt: Date };

/** A task output the crew waits on, with the task id /resume wants when the crew named one. */
export type AwaitedTask = Pick<TaskEvent, "taskKey" | "name" | "agent" | "output"> & { resumeTaskId?: string };

/** The task a pause names (a human-input request, or the last task of a paused status), as a review awaits it. */
export function awaitedTask(task: Pick<TaskEvent, "output" | "name" | "agent" | "taskId" | "wholeName">): AwaitedTask {
  return { taskKey: task.name ?? task.taskId ?? "task", name: task.name, agent: task.agent, output: task.output, resumeTaskId: task.taskId ?? task.wholeName };
}

/**
 * How long a task message is held back when its crew waited on the same task before (a human-input
 * request, or the status, said so): the wait that follows makes it go at once, as a review with its
 * controls in one chat.postMessage instead of a post and then a chat.update (Tier 3, the scarce
 * one: docs/slack-budget.md). A task that does not wait this time is posted when the hold ends.
 */
export const TASK_MESSAGE_HOLD_MS = 3000;

/** How long after a task webhook the status is asked whether the crew waits on it (seed deployments send no human-input request). */
export const CONFIRM_DELAYS_MS = [250, 500, 1000, 2000, 4000] as const;

/**
 * Given the latest review of the execution with the same output (if any), whether a task output is a
 * duplicate or which task key its round goes under.
 * - Webhook, same task key as the earlier review: the per-key rule (states.ts nextRound) decides, as
 *   always (the same output after a rejection is a new round).
 * - Webhook, other task key: a duplicate while the earlier review awaits a decision, or when it is
 *   the same task by name and was not rejected; otherwise a review of its own.
 * - Poll: status only repeats what the crew last did, so an output already under review (or decided
 *   and not rejected, for the same task) is a duplicate. After a rejection it is a new round only if
 *   the status was asked for after the rejection was stored (else the answer is stale), and the round goes under
 *   the earlier review's key, so that a webhook racing with the poll collides on the same round.
 */
export function sameOutputVerdict(
  seen: { taskKey: string; taskName: string; state: string; updatedAt: Date } | undefined,
  task: { taskKey: string; name?: string },
  origin: ReviewOrigin,
): { kind: "duplicate" } | { kind: "open"; taskKey: string } {
  if (!seen) return { kind: "open", taskKey: task.taskKey };
  const awaiting = seen.state === "pending" || seen.state === "deciding";
  const sameTask = seen.taskKey === task.taskKey || seen.taskName === task.taskKey || (!!task.name && seen.taskName === task.name);
  // A human-input request is news like a webhook: the crew produced this output and asks about it now.
  if (origin.source === "webhook" || origin.source === "input") {
    if (seen.taskKey === task.taskKey) return { kind: "open", taskKey: task.taskKey };
    if (awaiting || (sameTask && seen.state !== "rejected")) return { kind: "duplicate" };
    return { kind: "open", taskKey: task.taskKey };
  }
  if (awaiting) return { kind: "duplicate" };
  if (seen.state === "rejected") {
    // updatedAt: when the rejection was stored, i.e. after the crew accepted the resume.
    if (seen.updatedAt.getTime() >= origin.observedAt.getTime()) return { kind: "duplicate" };
    return { kind: "open", taskKey: seen.taskKey };
  }
  // Approved or closed: the same task again is stale; an unnamed task cannot be told apart, so stay quiet.
  const anonymous = !task.name && task.taskKey === "task";
  if (sameTask || anonymous) return { kind: "duplicate" };
  return { kind: "open", taskKey: task.taskKey };
}

export interface ReviewsDeps {
  db: Sql;
  runs: Runs;
  crews: CrewDirectory;
  /** Where Slack effects are enqueued. */
  outbox: Outbox;
  /** Webhook URLs for an execution (sent again with every /resume), or undefined without a public URL. */
  webhookUrls: (execution: Execution) => WebhookUrls | undefined;
  log: Logger;
  clock: Clock;
  /** Who may decide (default: anyone). */
  gate?: ReviewerGate;
  audit?: Audit;
  /** Each crew's approval rules (default: one approval, starters may approve). */
  approvalPolicy?: ApprovalPolicyOf;
  /** A review became pending (the deadline is stamped here). */
  onPending?: OnPending;
  /** Where decisions are reported (metrics listen). */
  telemetry?: Telemetry;
  /** How long a task message is held for a wait that may follow (default TASK_MESSAGE_HOLD_MS; 0: never). */
  holdMs?: number;
  /** This replica: named in the decisions it claims; a decision whose holder is gone is taken over at once. */
  holder?: ClaimHolder;
}

/** Rolls back a review stored or promoted for a run that ended meanwhile: nothing of it is kept. */
const RUN_ENDED = new Error("the run ended before its review could open");

const awaitedKey = (crewName: string, taskName: string) => `${crewName}\0${taskName}`;
/** How many tasks awaited before are remembered (the most recent). */
const AWAITED_TASKS_KEPT = 1000;

export class Reviews {
  /** Crews seen sending a human-input request (this process): their pauses need no status confirmation. */
  private readonly crewsAskingForInput = new Set<string>();
  /**
   * Per run, the review whose pause is being confirmed from the status (confirmWaiting): one at a time,
   * the latest task's. Promoting it ends that; a later task's webhook takes over (the crew went past
   * the earlier output without waiting on it).
   */
  private readonly confirming = new Map<string, string>();
  /** Tasks (crew and task name) whose output a crew waited on before (this process): their task messages are held (TASK_MESSAGE_HOLD_MS). */
  private readonly tasksAwaited = new Set<string>();
  private readonly sql: Sql;
  private readonly clock: Clock;
  private readonly core: DecisionCore;
  /** How the core stores, audits and shows a review (no escalation settings: deciding never escalates). */
  private readonly target = crewReviewTarget();
  private readonly gate: ReviewerGate;
  private readonly policyOf: ApprovalPolicyOf;
  private readonly telemetry: Telemetry;
  private readonly holdMs: number;

  constructor(private readonly deps: ReviewsDeps) {
    ({ db: this.sql, clock: this.clock } = deps);
    this.gate = deps.gate ?? (async () => ({ allowed: true }));
    this.policyOf = deps.approvalPolicy ?? (() => DEFAULT_APPROVAL_POLICY);
    this.telemetry = deps.telemetry ?? noTelemetry;
    this.holdMs = deps.holdMs ?? TASK_MESSAGE_HOLD_MS;
    this.core = new DecisionCore(deps);
  }

  /**
   * A task finished (task webhook): its output is stored and posted in the thread as a task message
   * with no decision controls (state "posted"). It becomes a review only through awaitDecision.
   */
  async open(execution: Execution, task: Pick<TaskEvent, "taskKey" | "taskId" | "name" | "wholeName" | "agent" | "output">): Promise<Review | undefined> {
    // The crew waited on this task before: it most likely does again, and says so in a moment.
    const hold = this.holdMs > 0 && this.tasksAwaited.has(awaitedKey(execution.crewName, task.name ?? task.taskKey));
    return this.store(execution, { ...task, resumeTaskId: task.taskId ?? task.wholeName }, { source: "webhook" }, "posted", hold ? this.holdMs : 0);
  }

  /**
   * The crew waits for a person on this output (a human-input request, or the status says so): the
   * task message already posted for it becomes the review in place, or the review is opened now.
   * Idempotent: every source describing the same pause ends in one review.
   */
  async awaitDecision(execution: Execution, task: AwaitedTask, origin: Exclude<ReviewOrigin, { source: "webhook" }>): Promise<Review | undefined> {
    if (origin.source === "input") this.crewsAskingForInput.add(execution.crewName);
    const opened = await this.awaitOnce(execution, task, origin);
    if (opened) return opened;
    // Lost a race with the task webhook storing the same output (as a task message): promote that one.
    const stored = await latestReviewWithOutput(this.sql, execution.id, hashOutput(task.output));
    return stored?.state === "posted" ? this.promote(execution, stored, task.resumeTaskId) : undefined;
  }

  private async awaitOnce(execution: Execution, task: AwaitedTask, origin: Exclude<ReviewOrigin, { source: "webhook" }>): Promise<Review | undefined> {
    const seen = await latestReviewWithOutput(this.sql, execution.id, hashOutput(task.output));
    if (seen?.state === "posted") return this.promote(execution, seen, task.resumeTaskId);
    if (seen && (seen.state === "pending" || seen.state === "deciding")) {
      // Task ids can change after a replay: the latest request for review names the one /resume wants.
      if (origin.source === "input" && task.resumeTaskId && task.resumeTaskId !== (seen.resumeTaskId ?? seen.taskKey))
        await setResumeTaskId(this.sql, seen.id, task.resumeTaskId, this.clock.now());
      return undefined;
    }
    return this.store(execution, task, origin, "pending");
  }

  /**
   * After a task webhook, asks the status (a few times while it still says running) whether the crew
   * now waits on that output: deployments that never send a human-input request get their review
   * this way. Runs after the webhook's answer; status polling is the safety net if this is cut short.
   * The database is read only once the status says the crew waits: every task of every such run
   * comes here, and ten reads per task were a third of the bot's statements at 200 task callbacks a
   * second (docs/benchmarks.md).
   */
  async confirmWaiting(execution: Execution, review: Review, delaysMs: readonly number[] = CONFIRM_DELAYS_MS): Promise<void> {
    // A crew that sends human-input requests says when it waits: asking its status after every task
    // would only add calls (status polling stays the safety net).
    const crew = this.deps.crews.get(execution.crewName);
    if (!crew || this.crewsAskingForInput.has(execution.crewName)) return;
    this.confirming.set(execution.id, review.id);
    try {
      await this.confirmFromStatus(crew, execution, review, delaysMs);
    } finally {
      if (this.confirming.get(execution.id) === review.id) this.confirming.delete(execution.id);
    }
  }

  private async confirmFromStatus(crew: CrewApi, execution: Execution, review: Review, delaysMs: readonly number[]): Promise<void> {
    for (const delay of delaysMs) {
      await new Promise((resolve) => setTimeout(resolve, delay).unref());
      // Its crew sent a human-input request meanwhile, this process promoted the review (a poll), or
      // the run's next task came: the crew did not wait on this one.
      if (this.crewsAskingForInput.has(execution.crewName) || this.confirming.get(execution.id) !== review.id) return;
      const kickoffId = execution.kickoffId ?? (await this.deps.runs.get(execution.id))?.kickoffId;
      if (!kickoffId) continue;
      const status = await crew.status(kickoffId).catch(() => undefined);
      if (!status || status.phase === "running") continue;
      if (status.phase !== "paused") return;
      // Promoted meanwhile (a poll, another replica), decided, or the run ended: nothing to confirm.
      const current = await findReview(this.sql, review.id);
      if (current?.state !== "posted") return;
      const run = await this.deps.runs.get(execution.id);
      if (!run || isFinished(run.state)) return;
      const last = status.lastTask;
      // The pause is on this output when the status shows it, or shows no task and this is the run's latest.
      const onThis = last?.output ? hashOutput(last.output) === review.outputHash : (await latestReviewOf(this.sql, execution.id))?.id === review.id;
      if (onThis) await this.promote(run, current, last?.taskId ?? last?.wholeName);
      return;
    }
  }

  /** posted → pending, once; the task message gets its decision controls (in place, or with its post if that is still to come). */
  private async promote(execution: Execution, review: Review, resumeTaskId?: string): Promise<Review | undefined> {
    const promoted = await inTransaction(this.sql, async (tx) => {
      const moved = await moveReview(tx, review.id, reviewTransition("wait_confirmed"), this.clock.now(), resumeTaskId ? { resumeTaskId } : {});
      if (!moved) return null;
      const shown = this.deps.onPending ? await this.deps.onPending(execution, moved, tx) : moved;
      // A run that ended meanwhile (stopped, finished) opens no review: its task message stays a finished task.
      if (!(await this.deps.runs.transition(execution.id, "review_opened", {}, tx))) throw RUN_ENDED;
      // Posted already: the message gets its controls in place (an update). Not posted yet: the post
      // renders the row as it is when performed, so it shows the controls in one call; a post already
      // under way with the older state asks for the update itself when it records its ts (perform.ts).
      if (moved.messageTs) await this.deps.outbox.add(tx, { kind: "review.show", subjectId: moved.id });
      // Held back for this very moment (open): it goes now, with its controls.
      else await this.deps.outbox.hurry(tx, { kind: "review.post", subjectId: moved.id });
      return shown;
    }).catch((err: unknown) => {
      if (err === RUN_ENDED) return null;
      throw err;
    });
    if (promoted) {
      if (this.confirming.get(execution.id) === promoted.id) this.confirming.delete(execution.id);
      this.learnAwaited(execution, promoted);
      this.deps.outbox.nudge();
    }
    return promoted ?? undefined;
  }

  /** Stores a round for a task output (idempotent) in the given state, then posts it. */
  private async store(execution: Execution, awaited: AwaitedTask, origin: ReviewOrigin, state: "posted" | "pending", holdMs = 0): Promise<Review | undefined> {
    // One identity per task whatever the source: its name when known (a real deployment's task
    // webhook names no id while its status and human-input request do), so that sources racing for
    // the same output collide on the same (task, round) row instead of opening two.
    const task = { ...awaited, taskKey: awaited.name ?? awaited.taskKey };
    const outputHash = hashOutput(task.output);
    // The same output may already have a review under another task key (a status poll and a webhook
    // can name the task differently): see sameOutputVerdict.
    // Both read at once, for the task key the output came with: the verdict keeps it but for a poll
    // repeating a rejected round under another name (then that task's latest is read again).
    const both = await latestWithOutputAndForTask(this.sql, execution.id, outputHash, task.taskKey);
    const seen = both.withOutput;
    const verdict = sameOutputVerdict(seen ?? undefined, task, origin);
    if (verdict.kind === "duplicate") return undefined;
    const taskKey = verdict.taskKey;
    const latest = taskKey === task.taskKey ? both.forTask : await latestReviewForTask(this.sql, execution.id, taskKey);
    // A poll repeating a rejected output only counts if that rejection is still the task's last round.
    if (origin.source === "poll" && seen?.state === "rejected" && latest && latest.id !== seen.id) return undefined;
    const round = nextRound(latest ?? undefined, outputHash);
    if (round === undefined) return undefined;
    const review = await inTransaction(this.sql, async (tx) => {
      const stored = await insertReview(
        tx,
        {
          executionId: execution.id,
          taskKey,
          taskName: task.name ?? task.taskKey,
          agent: task.agent ?? null,
          round,
          state,
          resumeTaskId: task.resumeTaskId ?? null,
          output: task.output,
          outputHash,
        },
        this.clock.now(),
      );
      // Another delivery (or replica) stored this round first.
      if (!stored) return undefined;
      // The crew ran the task again: an earlier round still undecided loses its buttons (a click there
      // would decide this round's output, unseen).
      const superseded =
        round > 1
          ? await closeEarlierRounds(tx, {
              executionId: execution.id,
              taskKey,
              round,
              move: reviewTransition("superseded"),
              message: `it ran the task again (round ${round})`,
              now: this.clock.now(),
            })
          : [];
      for (const { id } of superseded) await this.deps.outbox.add(tx, { kind: "review.show", subjectId: id });
      // The run may have ended (a stop, its end) since this output was recorded: it closed the reviews
      // it found, and this one must not open after them. Checked once the earlier rounds are locked,
      // the order a stop takes them in.
      if (!(await holdInStates(tx, execution.id, LIVE_STATES))) throw RUN_ENDED;
      if (state === "pending") await this.deps.runs.transition(execution.id, "review_opened", {}, tx);
      // The crew moved past the round it waited on: the run runs again (unless another review waits).
      else if (superseded.length) await this.runsOn(tx, { id: stored.id, executionId: execution.id, remindersSent: Math.max(...superseded.map((r) => r.remindersSent)) });
      await this.deps.outbox.add(tx, { kind: "review.post", subjectId: stored.id, ...(holdMs > 0 ? { runAt: new Date(this.clock.now().getTime() + holdMs) } : {}) });
      return state === "pending" && this.deps.onPending ? this.deps.onPending(execution, stored, tx) : stored;
    }).catch((err: unknown) => {
      if (err === RUN_ENDED) return undefined;
      throw err;
    });
    if (review) {
      if (review.state === "pending") this.learnAwaited(execution, review);
      this.deps.outbox.nudge();
    }
    return review;
  }

  /** The crew waited on this task: its next task messages are held for their controls (open). */
  private learnAwaited(execution: Pick<Execution, "crewName">, review: Pick<Review, "taskName">): void {
    // Bounded: the oldest entries go first (a Set keeps insertion order).
    const key = awaitedKey(execution.crewName, review.taskName);
    this.tasksAwaited.delete(key);
    if (this.tasksAwaited.size >= AWAITED_TASKS_KEPT) this.tasksAwaited.delete(this.tasksAwaited.values().next().value!);
    this.tasksAwaited.add(key);
  }

  /**
   * At start: the tasks crews waited on in the last 30 days, from the database, so that a restarted
   * process (or another replica) holds their task messages as the one that saw the waits did.
   */
  async recallAwaited(): Promise<number> {
    const since = new Date(this.clock.now().getTime() - 30 * 24 * 3600_000);
    const tasks = await recentlyAwaitedTasks(this.sql, { since, limit: AWAITED_TASKS_KEPT });
    for (const task of tasks) this.learnAwaited(task, task);
    return tasks.length;
  }

  /** The review and its run, or null (also for an id that is no uuid). */
  async get(reviewId: string): Promise<ReviewWithExecution | null> {
    return isUuid(reviewId) ? findReviewWithExecution(this.sql, reviewId) : null;
  }

  /** The first decision wins atomically; the crew hears it exactly once. */
  async decide(decision: Decision): Promise<DecisionOutcome> {
    const outcome = await this.decideOnce(decision);
    // A person's decision that reached the crew (a deadline's is not a person's decision time).
    if (!decision.byDeadline && (outcome.kind === "decided" || outcome.kind === "not_waiting" || outcome.kind === "unrecorded")) {
      const { review } = outcome;
      const waitedMs = Math.max(0, (review.decidedAt ?? this.clock.now()).getTime() - review.createdAt.getTime());
      this.telemetry.emit({ type: "review.decided", approve: decision.approve, waitedMs });
    }
    return outcome;
  }

  private async decideOnce(decision: Decision): Promise<DecisionOutcome> {
    const found = await this.get(decision.reviewId);
    if (!found) return { kind: "unknown_review" };
    const { execution, ...review } = found;
    const feedback = isBlank(decision.feedback) ? "" : decision.feedback.trim();
    if (!decision.approve && !feedback) return { kind: "feedback_required" };
    if (review.state !== "pending") return { kind: "already_decided", review };
    const gate = decision.byDeadline ? ({ allowed: true } as const) : await this.gate(execution, decision.userId, review);
    if (!gate.allowed) return { kind: "not_allowed", who: gate.who };
    const policy = this.policyOf(execution.crewName);
    const counted = decision.approve && !decision.byDeadline;
    if (counted && selfApprovalRefused(policy, execution.userId, decision.userId)) return { kind: "self_approval_refused" };
    const edited = decision.editedOutput;
    // The claim's stamp: what it settles is moved only while the claim still holds the review.
    const claimedAt = this.clock.now();
    return this.core.decide<ReviewWithExecution, DecisionOutcome>(this.target, found, {
      userId: decision.userId,
      // Approvals toward the crew's number of distinct people: the last one needed claims the decision.
      ...(counted
        ? {
            approval: {
              required: policy.required,
              note: feedback || null,
              editedOutput: edited,
              audit: { kind: "approval", decision: "approve", feedback: feedback || null },
              detail: { ...(decision.via ? { via: decision.via } : {}), ...(edited !== undefined ? { edited: true, editedOutputHash: hashOutput(edited) } : {}) },
            },
          }
        : {}),
      claim: async (db) =>
        !!(await moveReview(db, review.id, reviewTransition("claimed"), this.clock.now(), {
          decidedBy: decision.userId,
          decision: decision.approve ? "approve" : "reject",
          feedback: feedback || null,
          decidedAt: claimedAt,
          claimedBy: this.deps.holder?.replicaId ?? null,
          decidedByDeadline: !!decision.byDeadline,
        })),
      named: {
        taken: (current) => ({ kind: "already_decided", review: current ?? review }),
        waiting: (how, approvals) =>
          how === "added"
            ? { kind: "approval_recorded", review, approvals, required: policy.required }
            : { kind: "already_approved", review, approvals, required: policy.required, ...(how === "updated" ? { updated: true } : {}) },
        lost: async (approvals) => {
          const current = (await findReview(this.sql, review.id)) ?? review;
          // Two approvals completed the count at once: the other one sends it, and this one is part of it.
          if (policy.required > 1 && decision.approve && current.decision === "approve" && approvals.some((a) => a.userId === decision.userId))
            return { kind: "approval_counted", review: current };
          return { kind: "already_decided", review: current };
        },
      },
      deliver: (approvals) =>
        this.resume({ found, decision, claimedAt, approvals, humanFeedback: approvals.length ? approvalFeedback(approvals) : feedback || (decision.approve ? "Approved" : "") }),
    });
  }

  /** Sends the claimed decision to the crew (/resume with the run's webhook settings) and settles what came of it. */
  private async resume(c: Claimed): Promise<DecisionOutcome> {
    const { execution, ...review } = c.found;
    const crew = this.deps.crews.get(execution.crewName);
    let resume: ResumeResult;
    try {
      if (!crew) throw new Error(`crew "${execution.crewName}" is no longer configured`);
      resume = await crew.resume({
        executionId: execution.kickoffId!,
        taskId: review.resumeTaskId ?? review.taskKey,
        humanFeedback: c.humanFeedback,
        isApprove: c.decision.approve,
        ...this.deps.webhookUrls(execution),
      });
    } catch (err) {
      return this.resumeFailed(c, err);
    }
    const patch = { resumeStatus: resume.status ?? null, resumeMessage: resume.message ?? null };
    try {
      return await this.conclude(c, "decided", patch, { resume });
    } catch (err) {
      // The crew took it; only storing that failed. Opening the review again would let it be sent
      // twice: the claim stays (deciding) until recoverAbandoned finds the crew moved on and records it.
      this.deps.log.error("decision reached the crew but could not be stored; it is recorded once its claim is stale", { reviewId: review.id, err });
      return { kind: "unrecorded", review };
    }
  }

  /**
   * The crew has moved on from a review (it took the decision, or said it was not waiting): the run
   * runs again, unless another of its reviews still waits for a person (tasks awaited side by side).
   * The run's row is locked first, so a review opening meanwhile is counted once it has committed.
   * pollBackoffMs 0: the run watcher looks at the run again soon (see watcher.ts nextBackoff); while
   * another review waits, the crew cannot end, and polling keeps its pace.
   */
  private async runsOn(tx: Sql, review: { id: string; executionId: string; remindersSent: number }): Promise<void> {
    if (!(await holdInStates(tx, review.executionId, LIVE_STATES))) return;
    // A review that waited through a reminder had its run's announcement say so: shown again now.
    if (review.remindersSent > 0) await this.deps.outbox.add(tx, { kind: "run.state", subjectId: review.executionId });
    if ((await openReviewsOf(tx, review.executionId)).some((r) => r.id !== review.id && r.state === "pending")) return;
    await this.deps.runs.transition(review.executionId, "review_decided", { nextPollAt: this.clock.now(), pollBackoffMs: 0 }, tx);
  }

  /**
   * A decision's outcome, in one transaction: the review's new state, the run's (when the crew took
   * it), the audit record, and the Slack effects (the message rendered from the row, note included;
   * the edited version as a file after an edit and approve). Resume failed: the review opens again,
   * its decision's columns cleared. `message`: what the decider is told (not_waiting, resume_failed);
   * `resume`: the crew's answer (decided).
   */
  private async conclude(
    c: Claimed,
    outcome: "decided" | "not_waiting" | "resume_failed",
    patch: ReviewDecisionPatch,
    sent: { message?: string; resume?: ResumeResult; threadNotice?: { part: string; notice: RunNotice } } = {},
  ): Promise<DecisionOutcome> {
    const { found, decision, claimedAt } = c;
    const { execution: _, ...review } = found;
    const note = isBlank(decision.feedback) ? null : decision.feedback.trim();
    const event: ReviewEvent = outcome === "decided" ? (decision.approve ? "resume_ok_approve" : "resume_ok_reject") : outcome;
    const columns = outcome === "resume_failed" ? { decidedBy: null, decision: null, feedback: null, decidedAt: null, decidedByDeadline: false, ...patch } : patch;
    const settled = await this.core.settle(this.target, found, {
      move: async (tx) => {
        const moved = await moveReview(tx, review.id, reviewTransition(event), this.clock.now(), columns, claimedAt);
        if (!moved) return { row: { ...((await findReview(tx, review.id)) ?? review), execution: found.execution }, ours: false };
        if (outcome !== "resume_failed") await this.runsOn(tx, review);
        return { row: { ...moved, execution: found.execution }, ours: true };
      },
      audit: {
        kind: "decision",
        actor: decision.userId,
        decision: decision.approve ? "approve" : "reject",
        feedback: note,
        msToDecision: Math.max(0, this.clock.now().getTime() - review.createdAt.getTime()),
        resumeStatus: patch.resumeStatus ?? null,
        resumeMessage: patch.resumeMessage ?? null,
        detail: {
          outcome,
          ...(decision.byDeadline ? { byDeadline: true } : {}),
          ...(decision.via ? { via: decision.via } : {}),
          ...(sent.message ? { message: sent.message } : {}),
        },
      },
      // What the crew was sent, when it is more than the note (several approvers, an edit).
      detailAfter: c.humanFeedback !== (note || "Approved") ? { humanFeedback: c.humanFeedback } : {},
      approvals: c.approvals,
      // Reopened (resume failed): it looks as it did, pending; nothing to show.
      show: outcome !== "resume_failed",
      taken: outcome === "decided",
      effects: sent.threadNotice ? [{ kind: "run.message", subjectId: review.executionId, part: sent.threadNotice.part, payload: { notice: sent.threadNotice.notice } }] : [],
    });
    if (!settled.ours) return { kind: "taken_over", review: settled.row };
    return outcome === "decided" ? { kind: "decided", review: settled.row, resume: sent.resume ?? {} } : { kind: outcome, review: settled.row, message: sent.message ?? "" };
  }

  private async resumeFailed(c: Claimed, err: unknown): Promise<DecisionOutcome> {
    const message = isCrewError(err) ? err.userMessage() : "Crewline could not send the decision to the crew.";
    // 400: the crew is not waiting for this decision (it moved on, or another client decided).
    if (isCrewError(err) && err.kind === "bad_request") return this.conclude(c, "not_waiting", { resumeMessage: err.serviceMessage ?? "no reason given" }, { message });
    // The crew moved on: the decision reached it although its answer did not reach us. Or the run
    // ended while the call failed (a stop, its end): nothing is waiting for this review any more.
    const fate = await this.fateOf(c.found.execution, c.found, isCrewError(err) && !!err.maybeApplied);
    if (fate) return this.concludeKnown(c, fate, "the answer timed out, but its status shows it took the decision");
    this.deps.log.warn("resume failed; review is open again", { reviewId: c.found.id, err });
    return this.conclude(c, "resume_failed", {}, { message });
  }

  /**
   * Where a decision stands whose sending was cut short (its answer lost, or its sender gone), asking
   * the crew's status when `ask`: taken when the status shows the crew moved on; `stopped` when the run
   * was stopped (a stopped crew's status says nothing of the decision: it is not paused, whatever became
   * of it), before or during the question; `ended` when it ended otherwise; undefined: not known to be taken.
   */
  private async fateOf(execution: Execution, review: Review, ask: boolean): Promise<"taken" | "stopped" | "ended" | undefined> {
    const stopped = (state: string) => STOPPED_STATES.includes(state as ExecutionState);
    const took = ask && !stopped(execution.state) && !!execution.kickoffId && !!this.deps.crews.get(execution.crewName) && (await this.tookEffect(execution, review));
    // Read after the status: a stop taken meanwhile shows there as the crew no longer paused.
    const run = (await this.deps.runs.get(review.executionId)) ?? execution;
    if (stopped(run.state)) return "stopped";
    if (took) return "taken";
    return isFinished(run.state) ? "ended" : undefined;
  }

  /**
   * Closes a decision cut short whose fate is known: taken by the crew (`takenMessage` says how that
   * is known), or its run has ended (nobody is asked to decide again).
   */
  private concludeKnown(c: Claimed, fate: "taken" | "stopped" | "ended", takenMessage: string): Promise<DecisionOutcome> {
    if (fate === "taken") return this.conclude(c, "decided", { resumeMessage: takenMessage });
    // Stopped: the review closes as the stop closes those waiting (its message says who stopped the run).
    if (fate === "stopped") return this.conclude(c, "not_waiting", {}, { message: "The run was stopped before the crew was known to take the decision." });
    return this.conclude(c, "not_waiting", { resumeMessage: "the run had ended" }, { message: "The run had ended before the crew took the decision." });
  }

  /**
   * Decisions whose process died between the claim and the crew's answer (kill -9, a lost replica):
   * left alone they would stay "deciding" for ever, and the run with them. Claimed more than `staleMs`
   * ago, or held by a replica gone (its heartbeat stale) however recent. One replica takes each
   * over (a conditional write on decidedAt, naming itself) and asks the crew's status: if the crew moved on, the
   * decision reached it and is recorded as taken; otherwise the review opens again, and the thread
   * says so, for a person to decide again (sending it again could apply it twice if the first call
   * is still under way in the crew). A run that ended meanwhile waits for nothing: its review closes.
   */
  async recoverAbandoned(staleMs: number): Promise<number> {
    const now = this.clock.now();
    const rows = await abandonedRequests(this.sql, "Review", {
      // Left where the first click put it (deciding).
      states: [reviewTransition("claimed").to],
      before: new Date(now.getTime() - staleMs),
      deadBefore: this.deps.holder?.deadBefore(now),
      self: this.deps.holder?.replicaId,
      limit: 50,
    });
    const abandoned = await withExecutions(this.sql, rows);
    let recovered = 0;
    for (const { execution, ...review } of abandoned) {
      if (!review.decidedAt || !(await retakeDecision(this.sql, review.id, { seen: review.decidedAt, now, owner: this.deps.holder?.replicaId }))) continue;
      recovered++;
      const decision: Decision = {
        reviewId: review.id,
        userId: review.decidedBy ?? "",
        approve: review.decision === "approve",
        feedback: review.feedback ?? "",
        ...(review.decidedByDeadline ? { byDeadline: true } : {}),
      };
      const claimed: Claimed = { found: { ...review, execution }, decision, claimedAt: now, approvals: [], humanFeedback: review.feedback ?? "" };
      // The crew took it, or the run was stopped or ended meanwhile: nothing waits for this decision any more.
      const fate = await this.fateOf(execution, review, true);
      if (fate) {
        await this.concludeKnown(claimed, fate, "its sender stopped mid-call, but the crew's status shows it took the decision");
        continue;
      }
      this.deps.log.warn("decision abandoned mid-call; review is open again", { reviewId: review.id });
      // A deadline's decision is "The decision" (its actor is no Slack user to mention).
      const notice: RunNotice = { kind: "decision_interrupted", by: review.decidedByDeadline ? null : review.decidedBy, taskName: review.taskName, round: review.round };
      await this.conclude(
        claimed,
        "resume_failed",
        {},
        { message: "interrupted while being sent", threadNotice: { part: `abandoned:${review.id}:${review.decidedAt.getTime()}`, notice } },
      );
    }
    return recovered;
  }

  /**
   * After a resume whose answer was lost (read time-out), whether the crew took it: it did unless the
   * run is still paused on this very output. Unknown (status unreadable) counts as not taken, so the
   * review opens again and the reviewer is told to check the thread first.
   */
  private async tookEffect(execution: Execution, review: Review): Promise<boolean> {
    try {
      const status = await this.deps.crews.get(execution.crewName)!.status(execution.kickoffId!);
      const stillWaiting = status.phase === "paused" && !!status.lastTask?.output && hashOutput(status.lastTask.output) === review.outputHash;
      return !stillWaiting;
    } catch (err) {
      this.deps.log.warn("could not read status after a resume time-out", { reviewId: review.id, err });
      return false;
    }
  }
}

/** The note under a review, from what its row records (used when a message is shown again). */
export function reviewNote(review: Review): string | undefined {
  if (review.state === "closed")
    return review.resumeMessage ? `The crew was not waiting for this decision: ${review.resumeMessage}` : "The run finished without needing this decision.";
  if (review.state !== "approved" && review.state !== "rejected") return undefined;
  // The crew's answer to the decision ("Crew: retrying — Task will be retried…").
  const parts = [review.resumeStatus, review.resumeMessage].filter(Boolean);
  return parts.length ? `Crew: ${parts.join(" — ")}` : undefined;
}
