// Status polling: every unfinished run is looked at through CrewApi.status, with backoff, so runs
// finish in Slack even when webhooks never arrive (no PUBLIC_URL, lost deliveries, a dead replica).
// Several replicas share the work through a lease on each Execution row (taken with
// FOR UPDATE SKIP LOCKED); a replica that dies simply lets its leases expire. What a poll learns goes
// through the same lifecycle paths as webhooks (Reviews.open, Runs.finish), whose conditional writes
// and claims make every Slack effect happen once.
import crypto from "node:crypto";
import { LIVE_STATES } from "../domain/states.js";
import type { Logger } from "../log/log.js";
import { isCrewError } from "../protocols/crew/errors.js";
import type { ExecutionStatus } from "../protocols/crew/types.js";
import { findExecution, heardFromSince, leaseDueExecutions, updateExecution } from "../store/executions.js";
import type { Sql } from "../store/sql.js";
import type { Lifecycle } from "./lifecycle.js";
import { type Clock, type CrewDirectory, type Execution, systemClock } from "./ports.js";
import { type AwaitedTask, awaitedTask } from "./reviews.js";

export interface WatcherOptions {
  /** How often due rows are looked for (default 1000 ms). */
  tickMs: number;
  /** First wait between polls of a run, and the wait after something changed (default 2000 ms). */
  minBackoffMs: number;
  /** Longest wait between polls while nothing changes (default 60 000 ms). */
  maxBackoffMs: number;
  /** How long a replica holds a run while polling it; a dead replica's runs are taken over after this (default 30 000 ms). */
  leaseMs: number;
  /** How long status may answer 404 before the run is declared lost (default 120 000 ms). */
  lostGraceMs: number;
  /**
   * How long a run with webhooks waits for its crew's own callbacks once status says it has ended
   * (default 15 000 ms): a status answer can run ahead of the callbacks (the last task's, the end's),
   * and finishing from it would refuse them, leaving the last task out of the thread. 0: finish at once.
   */
  endGraceMs: number;
  /** Rows taken per tick (default 20); at most four times as many polls are under way at once. */
  batchSize: number;
  /** How often callbacks recorded but not processed are looked for (default 30 000 ms; 0 = only at start). */
  sweepMs: number;
  /** A decision left "deciding" this long (its process died mid-call) is taken over (default 60 000 ms; keep it above a /resume call's time-out). */
  abandonedDecisionMs: number;
  /** This process's identity in lease columns (default: a random uuid). */
  replicaId: string;
  /** Heartbeats (replicas.ts): a lease whose owner has not announced itself for this long, or that stopped, is taken over at once. Unset: leases alone. */
  deadAfterMs?: number;
}

export const DEFAULT_WATCHER_OPTIONS: Omit<WatcherOptions, "replicaId"> = {
  abandonedDecisionMs: 60_000,
  tickMs: 1000,
  minBackoffMs: 2000,
  maxBackoffMs: 60_000,
  leaseMs: 30_000,
  lostGraceMs: 120_000,
  endGraceMs: 15_000,
  batchSize: 20,
  sweepMs: 30_000,
};

/** States a run is watched in (a "starting" row counts once its kickoff id is stored). */
export const WATCHED_STATES = LIVE_STATES;

/**
 * Wait before the next poll. `current` is the stored backoff (0 = reset, e.g. after a decision);
 * a change resets it to the minimum, otherwise it doubles up to the maximum.
 */
export function nextBackoff(current: number, changed: boolean, opts: Pick<WatcherOptions, "minBackoffMs" | "maxBackoffMs">): number {
  const min = Math.max(1, opts.minBackoffMs);
  const max = Math.max(min, opts.maxBackoffMs);
  if (changed || !Number.isFinite(current) || current < min) return min;
  return Math.min(max, current * 2);
}

/**
 * During a grace period (status answering 404, or saying a run with webhooks has ended before its
 * callbacks did), the next poll is not later than its end, so what it decides is decided close to on time.
 */
export function waitWithinGrace(backoffMs: number, since: Date | null, now: Date, graceMs: number): number {
  if (!since) return backoffMs;
  const left = since.getTime() + graceMs - now.getTime();
  return Math.max(0, Math.min(backoffMs, left));
}

/** Whether a grace period that began at `since` is over (a 404 that lasted: the run is lost). */
export function graceOver(since: Date | null, now: Date, graceMs: number): boolean {
  return !!since && now.getTime() - since.getTime() >= graceMs;
}

/** What a status answer means for a run, as data (applied by the watcher). */
export type StatusAction = { kind: "none" } | ({ kind: "review" } & AwaitedTask) | { kind: "succeeded"; output: string } | { kind: "failed"; error: string; output?: string };

export function actionForStatus(status: ExecutionStatus): StatusAction {
  switch (status.phase) {
    case "paused":
      return status.lastTask?.output ? { kind: "review", ...awaitedTask({ ...status.lastTask, output: status.lastTask.output }) } : { kind: "none" };
    case "succeeded":
      return { kind: "succeeded", output: status.output ?? status.lastTask?.output ?? "" };
    case "failed":
      return { kind: "failed", error: status.error ?? "The crew reported the run as failed.", output: status.output || undefined };
    default:
      return { kind: "none" };
  }
}

export const LOST_ERROR = "The crew has no record of this run any more (it answered “not found” for too long), so Crewline stopped waiting for it.";

export class RunWatcher {
  readonly options: WatcherOptions;
  private timer?: NodeJS.Timeout;
  private running = false;
  private ticking?: Promise<void>;
  private lastSweep = 0;
  /** Polls under way, by run: a round does not wait for them, so a crew slow to answer holds only its own runs. */
  private readonly inFlight = new Map<string, Promise<void>>();

  private readonly sql: Sql;

  private readonly lifecycle: Lifecycle;
  private readonly crews: CrewDirectory;
  private readonly log: Logger;
  private readonly clock: Clock;

  constructor(deps: { db: Sql; lifecycle: Lifecycle; crews: CrewDirectory; log: Logger; clock?: Clock; options?: Partial<WatcherOptions> }) {
    ({ db: this.sql, lifecycle: this.lifecycle, crews: this.crews, log: this.log } = deps);
    this.clock = deps.clock ?? systemClock;
    const defined = Object.fromEntries(Object.entries(deps.options ?? {}).filter(([, v]) => v !== undefined)) as Partial<WatcherOptions>;
    this.options = { ...DEFAULT_WATCHER_OPTIONS, replicaId: crypto.randomUUID(), ...defined };
  }

  get replicaId(): string {
    return this.options.replicaId;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.lastSweep = Date.now();
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.ticking?.catch(() => {});
    await Promise.all(this.inFlight.values());
  }

  /** A polling round or a poll is under way (tests wait for none). */
  get polling(): boolean {
    return !!this.ticking || this.inFlight.size > 0;
  }

  /** Look at a run soon (a new kickoff, a decision): due now, backoff reset. */
  async watch(executionId: string): Promise<void> {
    const now = this.clock.now();
    await updateExecution(this.sql, executionId, { nextPollAt: now, pollBackoffMs: 0 }, {}, now);
    if (this.running && !this.ticking) this.schedule(0);
  }

  /**
   * Processes crew callbacks recorded but not processed (a crash between the answer and the work),
   * takes over decisions whose process died between the claim and the crew's answer, and deletes old
   * callbacks of ended runs.
   * Slack effects need no such sweep: they are outbox rows, which the outbox worker picks up.
   * `earlierRun`: called at start by a process alone in its database, before it serves anything: every
   * decision still "deciding" was its earlier incarnation's, and is taken over at once.
   */
  async recover(webhookOlderThanMs = 0, earlierRun = false): Promise<void> {
    await this.lifecycle.callbacks.processBacklog(webhookOlderThanMs).catch((err) => this.log.warn("webhook backlog failed", { err }));
    // Runs whose kickoff was never confirmed and of which no news came end, their announcement saying so.
    await this.lifecycle.runs.endUnstarted().catch((err) => this.log.warn("unstarted runs could not be ended", { err }));
    await this.lifecycle.reviews
      .recoverAbandoned(earlierRun ? 0 : this.options.abandonedDecisionMs)
      .catch((err) => this.log.warn("abandoned decisions could not be recovered", { err }));
    // Old callbacks of ended runs go (hourly at most), so the table does not grow for ever.
    await this.lifecycle.callbacks.prune().catch((err) => this.log.warn("old webhook events could not be deleted", { err }));
  }

  /** One round: lease due rows, poll them concurrently, release them. Returns how many were polled. */
  async tick(): Promise<number> {
    const polls = await this.startPolls();
    await Promise.all(polls);
    return polls.length;
  }

  /**
   * Leases due rows and starts their polls without waiting for them: each releases its row when its
   * crew answers (or its calls time out), so a crew that hangs does not hold the other crews' runs.
   */
  private async startPolls(): Promise<Promise<void>[]> {
    const room = Math.min(this.options.batchSize, 4 * this.options.batchSize - this.inFlight.size);
    if (room <= 0) return [];
    // Due and lease times are the clock's, like every time the rows are written with.
    const now = this.clock.now();
    const rows = await leaseDueExecutions(this.sql, {
      owner: this.replicaId,
      states: WATCHED_STATES,
      leaseMs: this.options.leaseMs,
      limit: room,
      now,
      except: [...this.inFlight.keys()],
      ...(this.options.deadAfterMs ? { deadBefore: new Date(now.getTime() - this.options.deadAfterMs) } : {}),
    });
    return rows.map((row) => {
      const poll = this.pollOne(row).finally(() => this.inFlight.delete(row.id));
      this.inFlight.set(row.id, poll);
      return poll;
    });
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer);
    if (!this.running) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.ticking = this.round().finally(() => {
        this.ticking = undefined;
      });
    }, ms);
    this.timer.unref?.();
  }

  private async round(): Promise<void> {
    let polled = 0;
    try {
      polled = (await this.startPolls()).length;
      if (this.options.sweepMs > 0 && Date.now() - this.lastSweep >= this.options.sweepMs) {
        this.lastSweep = Date.now();
        await this.recover(this.options.sweepMs);
      }
    } catch (err) {
      if (this.running) this.log.warn("status polling round failed", { err });
    }
    // A full batch means more rows are due: go again at once.
    this.schedule(polled >= this.options.batchSize ? 0 : this.options.tickMs);
  }

  private async pollOne(row: Execution): Promise<void> {
    let changed = row.pollBackoffMs <= 0;
    let notFoundSince: Date | null = row.notFoundSince ? new Date(row.notFoundSince) : null;
    let endSeenAt: Date | null = row.endSeenAt ? new Date(row.endSeenAt) : null;
    const observedAt = this.clock.now();
    try {
      const crew = this.crews.get(row.crewName);
      if (!crew) throw new Error(`crew "${row.crewName}" is no longer configured`);
      try {
        const status = await crew.status(row.kickoffId!);
        if (notFoundSince) changed = true;
        notFoundSince = null;
        const action = actionForStatus(status);
        // The crew took a stop whose asker has not recorded it yet: the stop ends the run, saying who stopped it.
        if (status.cancelled && (await this.stopUnderWay(row.id))) return;
        // A run with webhooks: the crew's own callbacks get endGraceMs to say it has ended, after its last task.
        if (row.webhooks && (action.kind === "succeeded" || action.kind === "failed")) {
          endSeenAt ??= observedAt;
          if (!graceOver(endSeenAt, this.clock.now(), this.options.endGraceMs)) return;
          // The crew's own callbacks, recorded but not processed, go first: its last task, its end (with its output).
          await this.lifecycle.callbacks.processRecordedOf(row.id, ["task", "input", "crew"]);
        }
        if (await this.apply(row, action, observedAt)) changed = true;
      } catch (err) {
        if (!isCrewError(err) || err.kind !== "not_found") throw err;
        notFoundSince ??= observedAt;
        if (graceOver(notFoundSince, this.clock.now(), this.options.lostGraceMs)) {
          // A crew still sending this run's callbacks has it, whatever its status says: the grace starts again.
          if (await heardFromSince(this.sql, row.id, notFoundSince!)) notFoundSince = observedAt;
          else {
            await this.finish(row.id, { event: "lost", error: LOST_ERROR });
            changed = true;
          }
        }
      }
    } catch (err) {
      this.log.warn("status poll failed", { executionId: row.id, err });
    } finally {
      const backoff = nextBackoff(row.pollBackoffMs, changed, this.options);
      const now = this.clock.now();
      const wait = waitWithinGrace(waitWithinGrace(backoff, notFoundSince, now, this.options.lostGraceMs), endSeenAt, now, this.options.endGraceMs);
      await this.release(row, { notFoundSince, endSeenAt }, { pollBackoffMs: backoff, nextPollAt: new Date(now.getTime() + wait) }, now).catch((err) =>
        this.log.warn("could not release poll lease", { executionId: row.id, err }),
      );
    }
  }

  /** Whether someone's stop of the run is being sent to the crew (claimed within the longest a call may take), read now. */
  private async stopUnderWay(id: string): Promise<boolean> {
    const claimedAt = (await findExecution(this.sql, id))?.stopClaimedAt;
    return !!claimedAt && this.clock.now().getTime() - claimedAt.getTime() < this.options.abandonedDecisionMs;
  }

  /**
   * Gives the run's lease back with what the poll learned and when to poll next, unless a decision or
   * a kickoff asked for a poll sooner while this one was under way (`watch`): that ask stands.
   */
  private async release(
    row: Execution,
    learned: { notFoundSince: Date | null; endSeenAt: Date | null },
    next: { pollBackoffMs: number; nextPollAt: Date },
    now: Date,
  ): Promise<void> {
    const released = { leaseOwner: null, leaseExpiresAt: null, ...learned };
    const mine = { leaseOwner: this.replicaId };
    if (await updateExecution(this.sql, row.id, { ...released, ...next }, { ...mine, nextPollAt: row.nextPollAt }, now)) return;
    await updateExecution(this.sql, row.id, released, mine, now);
  }

  /** Applies a status answer through the webhook code paths; returns whether anything changed. */
  private async apply(row: Execution, action: StatusAction, observedAt: Date): Promise<boolean> {
    switch (action.kind) {
      case "none":
        return false;
      case "review": {
        const execution = await findExecution(this.sql, row.id);
        if (!execution || !(WATCHED_STATES as readonly string[]).includes(execution.state)) return false;
        return !!(await this.lifecycle.reviews.awaitDecision(execution, action, { source: "poll", observedAt }));
      }
      case "succeeded":
        return this.finish(row.id, { event: "succeeded", output: action.output });
      case "failed":
        return this.finish(row.id, { event: "failed", error: action.error, output: action.output });
    }
  }

  /**
   * Ends the run as its status says. The callback intake's cached row goes with it, as when the
   * crew's own callback ends it: a later callback, a step too, is then refused as the run's end (410).
   */
  private async finish(id: string, outcome: Parameters<Lifecycle["runs"]["finish"]>[1]): Promise<boolean> {
    const won = await this.lifecycle.runs.finish(id, outcome);
    this.lifecycle.callbacks.forget(id);
    return won;
  }
}
