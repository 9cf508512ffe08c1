// Runs background jobs a few at a time, so a burst of callbacks cannot crowd out the intake that
// answers the crew: recorded events wait here (and in the database) instead of all running at once.
// Jobs given the same key (one run's callbacks) run one after another, in the order pushed: a run's
// end must not overtake its last task.
export class WorkQueue {
  private running = 0;
  private readonly pending: { job: () => Promise<void>; key?: string }[] = [];
  /** Per key with a job queued or running: the jobs pushed after it, waiting their turn. */
  private readonly behind = new Map<string, (() => Promise<void>)[]>();
  private readonly idleWaiters: (() => void)[] = [];
  private waiting = 0;

  constructor(
    private readonly concurrency: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  push(job: () => Promise<void>, key?: string): void {
    const queue = key === undefined ? undefined : this.behind.get(key);
    if (queue) {
      queue.push(job);
      this.waiting += 1;
      return;
    }
    if (key !== undefined) this.behind.set(key, []);
    this.pending.push({ job, key });
    this.pump();
  }

  get size(): number {
    return this.pending.length + this.running + this.waiting;
  }

  /** Resolves when nothing is queued or running (shutdown, tests). */
  idle(): Promise<void> {
    if (this.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (this.running < this.concurrency && this.pending.length > 0) {
      const { job, key } = this.pending.shift()!;
      this.running += 1;
      job()
        .catch(this.onError)
        .finally(() => {
          this.running -= 1;
          if (key !== undefined) this.next(key);
          this.pump();
          if (this.size === 0) this.idleWaiters.splice(0).forEach((resolve) => resolve());
        });
    }
  }

  /** The key's job ended: its next one, if any, takes its place in line. */
  private next(key: string): void {
    const queue = this.behind.get(key)!;
    const job = queue.shift();
    if (!job) return void this.behind.delete(key);
    this.waiting -= 1;
    this.pending.push({ job, key });
  }
}
