// Coalesces step callbacks into at most one progress effect per run per interval, always ending on
// the latest step. Steps are ephemeral: they cost no database write of their own. Each flush adds
// this replica's new steps to the run's one run.progress effect in the outbox, which posts the
// progress message once and then updates it, spaced about a second apart, whichever replicas the
// steps arrived at: one run has one progress message.

import type { Logger } from "../log/log.js";
import type { StepEvent } from "../protocols/crew/types.js";
import type { Clock, Execution, Outbox } from "./ports.js";

/**
 * A run whose steps stopped coming this long ago is forgotten here: one ended on another replica (or by
 * an uninstall) is never finished on this one. Its next step, if any, starts afresh; the outbox's one
 * run.progress effect keeps the latest step and task, whichever replica sent them.
 */
const PROGRESS_IDLE_FORGET_MS = 10 * 60_000;

interface RunProgress {
  executionId: string;
  /** Steps received here and not yet handed to the outbox. */
  unsent: number;
  latest: string;
  /** When `latest` arrived here (ms): steps of one run reach several replicas, and the newest text must win the merge. */
  latestAt: number;
  /** The task a task_started event named last, and when it came (the live plan's card title). */
  task: string;
  taskAt: number;
  dirty: boolean;
  lastFlushAt: number;
  timer?: NodeJS.Timeout;
  /** Forgets the run once no step came for PROGRESS_IDLE_FORGET_MS. */
  idle?: NodeJS.Timeout;
  flushing?: Promise<void>;
  done: boolean;
}

export interface ProgressCoalescerDeps {
  /** Where the coalesced run.progress effects are enqueued. */
  outbox: Outbox;
  log: Logger;
  clock: Clock;
  /** At most one run.progress effect per run this often (ms; default 1000). */
  intervalMs?: number;
  /** A run with no step for this long is forgotten here (default PROGRESS_IDLE_FORGET_MS). */
  idleForgetMs?: number;
}

export class ProgressCoalescer {
  private readonly runs = new Map<string, RunProgress>();
  private readonly intervalMs: number;
  private readonly idleForgetMs: number;

  constructor(private readonly deps: ProgressCoalescerDeps) {
    this.intervalMs = deps.intervalMs ?? 1000;
    this.idleForgetMs = deps.idleForgetMs ?? PROGRESS_IDLE_FORGET_MS;
  }

  step(execution: Pick<Execution, "id">, step: StepEvent): void {
    const run = this.runs.get(execution.id) ?? this.track(execution.id);
    if (run.done) return;
    clearTimeout(run.idle);
    run.unsent += 1;
    run.latest = step.summary;
    run.latestAt = this.deps.clock.now().getTime();
    if (step.task) {
      run.task = step.task;
      run.taskAt = run.latestAt;
    }
    run.dirty = true;
    this.schedule(run);
  }

  /** The run ended: hand over the final count (marked done) once and forget it. */
  async finish(executionId: string): Promise<void> {
    const run = this.runs.get(executionId);
    if (!run) return;
    run.done = true;
    clearTimeout(run.timer);
    clearTimeout(run.idle);
    await run.flushing;
    await this.flush(run, true).catch((err) => this.deps.log.warn("progress update failed", { executionId, err }));
    this.runs.delete(executionId);
  }

  /** The run was stopped: its steps not handed over yet are dropped, nothing more is shown. */
  forget(executionId: string): void {
    const run = this.runs.get(executionId);
    if (!run) return;
    run.done = true;
    clearTimeout(run.timer);
    clearTimeout(run.idle);
    this.runs.delete(executionId);
  }

  /** Hands over everything pending (shutdown, tests). */
  async drain(): Promise<void> {
    for (const run of this.runs.values()) {
      clearTimeout(run.timer);
      await run.flushing;
      if (run.dirty) await this.flush(run, false).catch(() => {});
    }
  }

  /** Runs with steps not yet handed to the outbox (tests wait for none). */
  get unsent(): number {
    let count = 0;
    for (const run of this.runs.values()) if (run.dirty || run.flushing) count++;
    return count;
  }

  stop(): void {
    for (const run of this.runs.values()) {
      clearTimeout(run.timer);
      clearTimeout(run.idle);
    }
    this.runs.clear();
  }

  private track(executionId: string): RunProgress {
    const run: RunProgress = { executionId, unsent: 0, latest: "", latestAt: 0, task: "", taskAt: 0, dirty: false, lastFlushAt: 0, done: false };
    this.runs.set(executionId, run);
    return run;
  }

  private schedule(run: RunProgress): void {
    if (run.timer || run.flushing) return;
    const wait = Math.max(0, run.lastFlushAt + this.intervalMs - this.deps.clock.now().getTime());
    run.timer = setTimeout(() => {
      run.timer = undefined;
      run.flushing = this.flush(run, false)
        .catch((err) => this.deps.log.warn("progress update failed", { executionId: run.executionId, err }))
        .finally(() => {
          run.flushing = undefined;
          // Steps that arrived during the write go out in the next slot.
          if (run.dirty && !run.done) this.schedule(run);
          else if (!run.dirty) this.forgetWhenIdle(run);
        });
    }, wait);
    run.timer.unref?.();
  }

  private forgetWhenIdle(run: RunProgress): void {
    clearTimeout(run.idle);
    run.idle = setTimeout(() => {
      if (!run.dirty && !run.timer && !run.flushing && this.runs.get(run.executionId) === run) this.runs.delete(run.executionId);
    }, this.idleForgetMs);
    run.idle.unref?.();
  }

  /** How many runs this replica keeps steps for (tests). */
  get tracked(): number {
    return this.runs.size;
  }

  private async flush(run: RunProgress, done: boolean): Promise<void> {
    if (!run.dirty && !done) return;
    const steps = run.unsent;
    run.dirty = false;
    run.unsent = 0;
    run.lastFlushAt = this.deps.clock.now().getTime();
    try {
      await this.deps.outbox.request({
        kind: "run.progress",
        subjectId: run.executionId,
        payload: { steps, latest: run.latest, latestAt: run.latestAt, task: run.task, taskAt: run.taskAt, done },
      });
    } catch (err) {
      // Not handed over: counted again with the next flush.
      run.unsent += steps;
      run.dirty = true;
      throw err;
    }
  }
}
