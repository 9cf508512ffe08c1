// Runs background jobs a few at a time, so a burst of callbacks cannot crowd out the intake that
// answers the crew: recorded events wait here (and in the database) instead of all running at once.
export class WorkQueue {
  private running = 0;
  private readonly pending: (() => Promise<void>)[] = [];
  private readonly idleWaiters: (() => void)[] = [];

  constructor(
    private readonly concurrency: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  push(job: () => Promise<void>): void {
    this.pending.push(job);
    this.pump();
  }

  get size(): number {
    return this.pending.length + this.running;
  }

  /** Resolves when nothing is queued or running (shutdown, tests). */
  idle(): Promise<void> {
    if (this.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (this.running < this.concurrency && this.pending.length > 0) {
      const job = this.pending.shift()!;
      this.running += 1;
      job()
        .catch(this.onError)
        .finally(() => {
          this.running -= 1;
          this.pump();
          if (this.size === 0) this.idleWaiters.splice(0).forEach((resolve) => resolve());
        });
    }
  }
}
