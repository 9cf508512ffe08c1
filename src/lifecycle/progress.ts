// Coalesces step callbacks into at most one progress update per run per interval, always ending on
// the latest step. Steps are ephemeral: they cost no database write (only the message ts is stored).

import type { StepEvent } from "../crew/types.js";
import type { Db } from "../db/database.js";
import type { Logger } from "../log.js";
import type { Clock, Execution, ProgressSnapshot, RunNotifier } from "./ports.js";

interface RunProgress {
  execution: Execution;
  steps: number;
  latest: string;
  dirty: boolean;
  lastFlushAt: number;
  timer?: NodeJS.Timeout;
  flushing?: Promise<void>;
  ts: string | null;
  done: boolean;
}

export class ProgressCoalescer {
  private readonly runs = new Map<string, RunProgress>();

  constructor(
    private readonly db: Db,
    private readonly notifier: RunNotifier,
    private readonly log: Logger,
    private readonly clock: Clock,
    private readonly intervalMs = 1000,
  ) {}

  step(execution: Execution, step: StepEvent): void {
    const run = this.runs.get(execution.id) ?? this.track(execution);
    if (run.done) return;
    run.steps += 1;
    run.latest = step.summary;
    run.dirty = true;
    this.schedule(run);
  }

  /** The run ended: show the final count once and forget it. */
  async finish(executionId: string): Promise<void> {
    const run = this.runs.get(executionId);
    if (!run) return;
    run.done = true;
    clearTimeout(run.timer);
    await run.flushing;
    if (run.ts) await this.flush(run, true).catch(() => {});
    this.runs.delete(executionId);
  }

  /** Flushes everything pending (shutdown, tests). */
  async drain(): Promise<void> {
    for (const run of this.runs.values()) {
      clearTimeout(run.timer);
      await run.flushing;
      if (run.dirty) await this.flush(run, false).catch(() => {});
    }
  }

  stop(): void {
    for (const run of this.runs.values()) clearTimeout(run.timer);
    this.runs.clear();
  }

  private track(execution: Execution): RunProgress {
    const run: RunProgress = { execution, steps: 0, latest: "", dirty: false, lastFlushAt: 0, ts: execution.progressTs, done: false };
    this.runs.set(execution.id, run);
    return run;
  }

  private schedule(run: RunProgress): void {
    if (run.timer || run.flushing) return;
    const wait = Math.max(0, run.lastFlushAt + this.intervalMs - this.clock.now().getTime());
    run.timer = setTimeout(() => {
      run.timer = undefined;
      run.flushing = this.flush(run, false)
        .catch((err) => this.log.warn("progress update failed", { executionId: run.execution.id, err }))
        .finally(() => {
          run.flushing = undefined;
          // Steps that arrived during the call go out in the next slot.
          if (run.dirty && !run.done) this.schedule(run);
        });
    }, wait);
    run.timer.unref?.();
  }

  private async flush(run: RunProgress, done: boolean): Promise<void> {
    run.dirty = false;
    run.lastFlushAt = this.clock.now().getTime();
    const snapshot: ProgressSnapshot = { steps: run.steps, latest: run.latest, done, updatedAt: this.clock.now() };
    const hadTs = run.ts;
    const { ts } = await this.notifier.showProgress(run.execution, snapshot, run.ts);
    run.ts = ts;
    if (!hadTs) await this.db.execution.update({ where: { id: run.execution.id }, data: { progressTs: ts } });
  }
}
