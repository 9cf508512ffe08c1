// Execution records: creation before kickoff, the kickoff outcome, and the one-time finish.
import crypto from "node:crypto";
import { type ExecutionEvent, executionTransition, LIVE_STATES, reviewTransition } from "../domain/states.js";
import {
  type ExecutionPatch,
  findExecution,
  findExecutionByKickoffId,
  findExecutionByRequestId,
  insertExecution,
  type NewExecutionRow,
  recentExecutionsInChannel,
  unstartedRuns,
  updateExecution,
  updateExecutionReturning,
} from "../store/executions.js";
import { lockReviewsOf, moveReviewsOf } from "../store/reviews.js";
import { inTransaction, type Sql } from "../store/sql.js";
import type { Audit } from "./audit.js";
import { hashOutput } from "./decisions/core.js";
import type { Clock, Execution, Outbox } from "./ports.js";
import type { ProgressCoalescer } from "./progress.js";

/** A run to start: its row less what the lifecycle fills in (state, secrets); requestId defaults to a random one. */
export interface NewExecution extends Omit<NewExecutionRow, "state" | "requestId" | "webhookSecret" | "humanInputToken"> {
  /** Unique per run; a kickoff form's nonce, so one form starts one run. Default: random. */
  requestId?: string;
}

export interface FinishOutcome {
  event: Extract<ExecutionEvent, "succeeded" | "failed" | "lost">;
  output?: string;
  error?: string;
}

/** How long a run may stay starting with no kickoff id and no callback before it is taken as never started (endUnstarted). */
export const UNSTARTED_AFTER_MS = 10 * 60_000;

/** The outbox effect that ends a run's live plan (or its progress message) once the run has ended. */
export function planEnds(executionId: string) {
  return { kind: "run.progress", subjectId: executionId, payload: { steps: 0, latest: "", done: true } } as const;
}

export interface RunsDeps {
  db: Sql;
  /** Where Slack effects are enqueued (in the transaction of each change). */
  outbox: Outbox;
  clock: Clock;
  progress: ProgressCoalescer;
  /** The audit trail; unset: nothing is recorded. */
  audit?: Audit;
}

export class Runs {
  private readonly sql: Sql;
  private readonly outbox: Outbox;
  private readonly clock: Clock;
  private readonly progress: ProgressCoalescer;
  private readonly audit?: Audit;

  constructor(deps: RunsDeps) {
    this.sql = deps.db;
    this.outbox = deps.outbox;
    this.clock = deps.clock;
    this.progress = deps.progress;
    this.audit = deps.audit;
  }

  /** Stored before kickoff so that webhook URLs (and their secret) exist before the crew can call them. */
  create(input: NewExecution): Promise<Execution> {
    return insertExecution(
      this.sql,
      {
        ...input,
        requestId: input.requestId ?? crypto.randomUUID(),
        webhookSecret: crypto.randomBytes(32).toString("base64url"),
        humanInputToken: crypto.randomBytes(32).toString("base64url"),
        state: "starting",
      },
      this.clock.now(),
    );
  }

  get(id: string): Promise<Execution | null> {
    return findExecution(this.sql, id);
  }

  findByRequestId(requestId: string): Promise<Execution | null> {
    return findExecutionByRequestId(this.sql, requestId);
  }

  findByKickoffId(kickoffId: string): Promise<Execution | null> {
    return findExecutionByKickoffId(this.sql, kickoffId);
  }

  /**
   * Stores the kickoff id whatever happened meanwhile (a fast crew may already have called back). In
   * the same transaction: the kickoff's audit record (when who started it is given) and the update of
   * the run's announcement (run.started: when Slack is idle). A callback that named the id first had
   * the run adopt it (adopt), with both: the row is then returned as it is.
   */
  async kickedOff(id: string, kickoffId: string, startedBy?: { userId: string; inputs: Record<string, string> }): Promise<Execution> {
    const data = { kickoffId, startedAt: this.clock.now() };
    const { from, to } = executionTransition("kicked_off");
    const started = await inTransaction(this.sql, async (tx) => {
      const now = this.clock.now();
      // One write in the usual case, so nobody sees a kickoff id on a run still marked "starting".
      const run =
        (await updateExecutionReturning(tx, id, { ...data, state: to }, { states: from, noKickoffId: true }, now)) ??
        (await updateExecutionReturning(tx, id, data, { noKickoffId: true }, now));
      if (!run) {
        const adopted = await findExecution(tx, id);
        if (!adopted) throw new Error(`execution ${id} does not exist`);
        return adopted;
      }
      if (startedBy) await this.recordKickoff(tx, run, startedBy);
      await this.outbox.add(tx, { kind: "run.started", subjectId: id });
      return run;
    });
    this.outbox.nudge();
    return started;
  }

  /**
   * A run whose kickoff answer was lost (or could not be stored) learns its kickoff id from the first
   * callback naming it: that callback's URL secret proves it is this run's. The adopted row, or null
   * (it has its id, or has ended).
   */
  async adopt(id: string, kickoffId: string): Promise<Execution | null> {
    const { from, to } = executionTransition("kicked_off");
    const adopted = await inTransaction(this.sql, async (tx) => {
      const now = this.clock.now();
      // Live in any state: a review may have opened before a callback named the run.
      const stored = await updateExecutionReturning(tx, id, { kickoffId, startedAt: now }, { states: LIVE_STATES, noKickoffId: true }, now);
      if (!stored) return null;
      const run = (await updateExecutionReturning(tx, id, { state: to }, { states: from }, now)) ?? stored;
      await this.recordKickoff(tx, run, { userId: run.userId, inputs: run.inputs as Record<string, string> }, { adopted: true });
      await this.outbox.add(tx, { kind: "run.started", subjectId: id });
      return run;
    });
    if (adopted) this.outbox.nudge();
    return adopted;
  }

  /**
   * Runs that never started: no kickoff id and no callback naming one for UNSTARTED_AFTER_MS (a kickoff whose
   * answer was lost and that did not start after all, or a process that died mid-kickoff). Each ends
   * once, its announcement saying so. Returns how many ended.
   */
  async endUnstarted(): Promise<number> {
    const now = this.clock.now();
    const stale = await unstartedRuns(this.sql, { before: new Date(now.getTime() - UNSTARTED_AFTER_MS), limit: 50 });
    const { from, to } = executionTransition("kickoff_failed");
    let ended = 0;
    for (const run of stale) {
      // Said as known: the crew's answer may have been lost rather than never given.
      const error =
        "Crewline has no confirmation that the crew started this run, and no news of it came, so it stopped waiting for it. If the crew did start it, it may still be working.";
      const done = await inTransaction(this.sql, async (tx) => {
        const changed = await updateExecution(tx, run.id, { state: to, error, finishedAt: now }, { states: from, noKickoffId: true }, now);
        if (changed === 1) await this.outbox.add(tx, { kind: "run.announcement", subjectId: run.id });
        return changed === 1;
      });
      if (done) ended++;
    }
    if (ended) this.outbox.nudge();
    return ended;
  }

  private recordKickoff(tx: Sql, run: Execution, by: { userId: string; inputs: Record<string, string> }, more: Record<string, unknown> = {}) {
    const detail = { crewName: run.crewName, channelId: run.channelId, kickoffId: run.kickoffId, inputs: by.inputs, ...more };
    return this.audit?.record({ executionId: run.id, kind: "kickoff", actor: by.userId, detail }, tx);
  }

  async kickoffFailed(id: string, error: string): Promise<void> {
    await this.transition(id, "kickoff_failed", { error, finishedAt: this.clock.now() });
  }

  /** The run's thread, and its announcement when that is a reply in the thread rather than its parent. */
  async setThread(id: string, threadTs: string, announcementTs: string | null = null): Promise<void> {
    await updateExecution(this.sql, id, { threadTs, announcementTs: announcementTs === threadTs ? null : announcementTs }, {}, this.clock.now());
  }

  /** Applies a state event if the current state allows it; returns whether it applied. */
  async transition(id: string, event: ExecutionEvent, data: ExecutionPatch = {}, tx?: Sql): Promise<boolean> {
    const { from, to } = executionTransition(event);
    return (await updateExecution(tx ?? this.sql, id, { ...data, state: to }, { states: from }, this.clock.now())) === 1;
  }

  /**
   * Ends a run once, whichever of webhook, poll or replica gets here first. In the same transaction:
   * the audit record, reviews left pending are closed, and the completion notice is enqueued.
   */
  async finish(id: string, outcome: FinishOutcome): Promise<boolean> {
    // Steps still coalescing show their final count before the run is announced as over.
    await this.progress.finish(id);
    const { from, to } = executionTransition(outcome.event);
    const now = this.clock.now();
    const close = reviewTransition("run_finished");
    const won = await inTransaction(this.sql, async (tx) => {
      // The reviews first, then the run: the order of a review's promotion (store/reviews.ts
      // lockReviewsOf). A task message being promoted meanwhile is waited for, then closed with the rest.
      await lockReviewsOf(tx, id, [...close.from, "posted"]);
      const changed = await updateExecution(tx, id, { state: to, output: outcome.output ?? null, error: outcome.error ?? null, finishedAt: now }, { states: from }, now);
      if (changed !== 1) return false;
      await this.audit?.record(
        {
          executionId: id,
          kind: "completion",
          outputHash: outcome.output ? hashOutput(outcome.output) : null,
          detail: { event: outcome.event, ...(outcome.error ? { error: outcome.error } : {}) },
        },
        tx,
      );
      // Reviews still waiting were not needed after all: their messages lose their controls.
      const closed = await moveReviewsOf(tx, id, close, now);
      for (const reviewId of closed) await this.outbox.add(tx, { kind: "review.show", subjectId: reviewId });
      await this.outbox.add(tx, { kind: "run.completion", subjectId: id });
      // The run's progress shows its end (its live plan stops), whether or not steps came here.
      await this.outbox.add(tx, planEnds(id));
      return true;
    });
    if (won) this.outbox.nudge();
    return won;
  }

  recentInChannel(channelId: string, take = 10): Promise<Execution[]> {
    return recentExecutionsInChannel(this.sql, channelId, take);
  }
}
