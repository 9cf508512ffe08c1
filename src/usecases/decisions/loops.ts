// The one loop of the decision core: on their intervals, the reminders due and the deadlines passed
// of both kinds of decision request (and the flows' recovery sweep), each pass awaited on stop.
import type { Logger } from "../../log/log.js";

export interface DecisionJob {
  what: string;
  everyMs: number;
  run(): Promise<unknown>;
}

export class DecisionLoops {
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly inflight = new Set<Promise<unknown>>();

  constructor(
    private readonly log: Logger,
    private readonly jobs: DecisionJob[],
  ) {}

  start(): void {
    if (this.timers.length) return;
    for (const job of this.jobs) {
      const timer = setInterval(() => {
        const pass = job.run().catch((err) => this.log.warn(`${job.what} failed`, { err: err instanceof Error ? err.message.slice(0, 300) : String(err).slice(0, 300) }));
        this.inflight.add(pass);
        void pass.finally(() => this.inflight.delete(pass));
      }, job.everyMs);
      timer.unref();
      this.timers.push(timer);
    }
  }

  /** Stops the timers and waits (briefly) for the passes under way. */
  async stop(): Promise<void> {
    for (const timer of this.timers.splice(0)) clearInterval(timer);
    await Promise.race([Promise.allSettled([...this.inflight]), new Promise((r) => setTimeout(r, 5000).unref())]);
  }
}
