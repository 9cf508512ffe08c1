// Every periodic job of a bot (the heartbeat, the outbox, status polling, reminders, deadlines, sweeps)
// is one entry in a list that starts, stops and drains the same way. A job runs a pass on a fixed
// interval, or has a loop of its own (status polling goes again at once after a full batch; the
// outbox is nudged), or only has work to drain (the callback queue).
import type { Logger } from "../log/log.js";

/** How long stop() waits for a job's work under way; what is left is picked up at the next start. */
const DRAIN_MS = 5000;

export interface Job {
  name: string;
  /** Awaited when the job starts, before its first pass (recovery after a crash). */
  atStart?(): Promise<unknown>;
  /** A pass every `ms` (each pass awaited on stop); a failed pass is logged, the next one goes on. */
  every?: { ms: number; run(): Promise<unknown> };
  /** A loop that schedules its own passes. */
  loop?: { start(): void | Promise<void>; stop(): void | Promise<void> };
  /** The work under way, waited for (at most `drainMs`, default DRAIN_MS) once the job is stopped. */
  drain?(): Promise<unknown>;
  drainMs?: number;
}

/** Starts jobs in list order and stops them in reverse: what started first (the heartbeat) stops last. */
export class Jobs {
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly passes = new Map<Job, Set<Promise<unknown>>>();
  private started = false;

  constructor(
    private readonly log: Logger,
    readonly list: readonly Job[],
  ) {}

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    for (const job of this.list) {
      await job.atStart?.();
      await job.loop?.start();
      if (job.every) this.repeat(job, job.every);
    }
  }

  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    for (const timer of this.timers.splice(0)) clearInterval(timer);
    for (const job of [...this.list].reverse()) {
      await job.loop?.stop();
      const inflight = [...(this.passes.get(job) ?? []), ...(job.drain ? [job.drain()] : [])];
      if (inflight.length) await Promise.race([Promise.allSettled(inflight), new Promise((resolve) => setTimeout(resolve, job.drainMs ?? DRAIN_MS).unref())]);
    }
  }

  private repeat(job: Job, every: NonNullable<Job["every"]>): void {
    const passes = new Set<Promise<unknown>>();
    this.passes.set(job, passes);
    const timer = setInterval(() => {
      const pass = every.run().catch((err) => this.log.warn(`${job.name} failed`, { err: errText(err) }));
      passes.add(pass);
      void pass.finally(() => passes.delete(pass));
    }, every.ms);
    timer.unref();
    this.timers.push(timer);
  }
}

/** An error's message (or the thrown value), short enough for a log line. */
export function errText(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 300);
}
