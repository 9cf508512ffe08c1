// The composition root's periodic jobs: started in this order, stopped in reverse (usecases/jobs.ts).
//
import type { Logger } from "../log/log.js";
import type { OutboxWorker } from "../outbox/worker.js";
import type { Database } from "../store/db/database.js";
import { type Job, Jobs } from "../usecases/jobs.js";
import type { UseCases } from "./use-cases.js";

export interface JobsOptions {
  log: Logger;
  /** Whether the database is this process's alone (Database.exclusive), read when the jobs start too. */
  database: Pick<Database, "exclusive">;
  useCases: Pick<UseCases, "replica" | "lifecycle" | "reviewRequests" | "flows" | "watcher" | "reminders">;
  outboxWorker: OutboxWorker;
  /**
   * How long the outbox's calls under way are waited for on stop: one call's time-out. Cut short, a post
   * that reaches Slack after the heartbeat says this replica stopped is posted again by the replica that
   * takes it over (its look-up comes before the post lands).
   */
  outboxDrainMs?: number;
  /** How often due review reminders are looked for (default 60 s). */
  reminderIntervalMs?: number;
  /** How often passed review deadlines are looked for (default 10 s). */
  deadlineIntervalMs?: number;
  /** How often the flows' recovery sweep runs (config.polling.sweepMs). */
  sweepMs?: number;
}

export function createJobs(o: JobsOptions): Jobs {
  const { database, outboxWorker } = o;
  const { replica, lifecycle, reviewRequests, flows, watcher } = o.useCases;
  const takeOverClaims = async () => {
    await lifecycle.reviews.recoverAbandoned(watcher.options.abandonedDecisionMs);
    await reviewRequests.takeOver();
    await flows.takeOver();
  };
  return new Jobs(o.log, [
    {
      // Alive from here: claims carry this replica's id, and the others see its heartbeat. Alone in
      // its database (embedded, folder locked), whatever is claimed there was claimed by the process
      // before it (a crash, kill -9): taken back now rather than when its leases run out.
      name: "heartbeat",
      loop: {
        start: async () => {
          await replica.start();
          if (database.exclusive) await replica.takeBackClaims();
        },
        // Marked stopped last, so that whatever it still holds is taken over at once; unless an effect
        // still calls Slack after the outbox's drain (an effect of several slow calls): taken over once
        // the heartbeat is stale instead, so that a post landing late is found, not posted again.
        stop: () => replica.stop({ keepClaims: outboxWorker.busy }),
      },
    },
    // Slack effects left undone are simply due in the outbox: no recovery needed.
    { name: "outbox", loop: outboxWorker, drain: () => outboxWorker.idle(), ...(o.outboxDrainMs ? { drainMs: o.outboxDrainMs } : {}) },
    { name: "progress updates", loop: { start: () => {}, stop: () => lifecycle.progress.drain().then(() => lifecycle.progress.stop()) } },
    // Recorded callbacks in flight finish (briefly) on stop; anything left is recovered at the next start.
    { name: "crew callbacks", drain: () => lifecycle.callbacks.drain() },
    // The reminders and deadlines of reviews and flow requests (the decision core), and the flows' sweep.
    ...(o.useCases.reminders.max > 0 ? [{ name: "review reminders", every: { ms: o.reminderIntervalMs ?? 60_000, run: () => reviewRequests.remindDue() } }] : []),
    { name: "review deadlines", every: { ms: o.deadlineIntervalMs ?? 10_000, run: () => reviewRequests.deadlinesDue() } },
    // Among replicas (PostgreSQL), one gone (its heartbeat stale) leaves its decisions under way and its
    // deadline actions to the others within seconds, not after their stale time; its stops go to the
    // next asker. Alone in its database, a process took everything back at start instead.
    ...(database.exclusive ? [] : [{ name: "claims of gone replicas", every: { ms: replica.options.everyMs, run: () => takeOverClaims() } }]),
    ...flows.jobs({ reminderIntervalMs: o.reminderIntervalMs, sweepMs: o.sweepMs, deadlineIntervalMs: o.deadlineIntervalMs, earlierRun: database.exclusive }),
    // Callbacks recorded but not processed (a crash between answer and work), and decisions cut off
    // mid-call (at once when the database is this process's alone: the earlier incarnation left them),
    // first; then the runs are polled (the watcher's own loop, which sweeps again every sweepMs).
    { name: "status polling", atStart: () => watcher.recover(0, database.exclusive), loop: watcher },
  ] satisfies Job[]);
}
