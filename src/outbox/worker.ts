// The one worker loop that performs Slack effects: it claims due rows of the outbox under a lease
// (FOR UPDATE SKIP LOCKED, so replicas take disjoint rows), performs each, and in one transaction
// records the result (the Slack ts), enqueues what the chain does next and marks the row done. A
// failure is retried with backoff (a rate limit after Slack's Retry-After); a permanent Slack error
// gives the effect up. Recovery after a crash is nothing more than this loop finding what is due: a
// lease that ran out, or held by a replica whose heartbeat stopped, is taken over, and the next attempt
// is told it was interrupted.
//
// The Web API client the performers use must not retry by itself (retries: 0): two retry mechanisms
// racing each other is how one review once appeared twice.
//
// The SQL of all this is the store's (src/store/effects.ts), which also keeps the messages of one
// thread in the order they were enqueued (claimEffects says how).

import { EFFECT_KINDS, type EffectJob, type EffectKind, isEffectKind, type NewEffect, retryDelay } from "../domain/effects.js";
import type { Logger } from "../log/log.js";
import { type ClaimedEffect, claimEffects, completeEffect, enqueueEffect, failEffect, pruneEffects } from "../store/effects.js";
import { pruneBudget } from "../store/slack-budget.js";
import { inTransaction, type Sql } from "../store/sql.js";
import type { Clock } from "../usecases/ports.js";
import { type BudgetOptions, BudgetWait, SlackBudget, type SlackCall, type SlackGate } from "./budget.js";
import { judgeFailure } from "./failures.js";

export interface EffectOutcome {
  /** Writes that record what Slack answered (the ts), committed together with the effect's completion. */
  record?: (tx: Sql) => Promise<void>;
  /** What the chain does next (a file after its post, an update of a message changed meanwhile). */
  next?: NewEffect[];
  /**
   * A repeatable effect that did what it could now and has more to do later (a run's live plan waiting
   * for Slack to let it start): it stays due until then, instead of being marked done.
   */
  again?: Date;
}

/** Performs one effect; asks `gate` (Slack's budget) before each Web API call it makes. */
export type Performer = (job: EffectJob, gate?: SlackGate) => Promise<EffectOutcome | undefined>;

export interface OutboxOptions {
  /** This process's name in lease columns. */
  replicaId: string;
  /** How long a claim holds; a dead replica's effects are taken over after it (default 60 s; effectCallTimeout bounds the calls within it). */
  leaseMs: number;
  /** How often due effects are looked for when nothing nudged the loop (default 500 ms). */
  tickMs: number;
  /** Effects performed at once by this process (default 16, measured: docs/slack-budget.md). */
  concurrency: number;
  /** Slack's rate limits, spent per workspace and method by every replica (src/outbox/budget.ts); false: spend freely. */
  budget: false | Partial<BudgetOptions>;
  /** Backoff after the first failure, doubling to the maximum (defaults 1 s and 5 min). */
  minBackoffMs: number;
  maxBackoffMs: number;
  /**
   * Failed attempts (rate limits not counted) before an effect is given up (default 15: about 35
   * minutes with the default backoff). What a person waits on is not given up while Slack is down.
   */
  maxAttempts: number;
  /**
   * Heartbeats (src/usecases/replicas.ts): a claim whose owner has not announced itself for this long,
   * or that stopped, is taken over before its lease runs out. Unset: leases alone.
   */
  deadAfterMs?: number;
  /** How long done effects are kept (default 7 days; given-up ones 30 days, for the log's sake), so the table does not grow forever. */
  keepDoneMs: number;
}

export const DEFAULT_OUTBOX_OPTIONS: Omit<OutboxOptions, "replicaId"> = {
  leaseMs: 60_000,
  tickMs: 500,
  concurrency: 16,
  budget: {},
  minBackoffMs: 1000,
  maxBackoffMs: 300_000,
  maxAttempts: 15,
  keepDoneMs: 7 * 24 * 3600_000,
};

/**
 * The most Web API calls one effect makes, each of which may take the whole per-call time-out: after an
 * attempt that may have reached Slack, a post first looks for it (findPostedMessage in
 * src/adapters/slack/notifier.ts reads up to two pages), and then review.reminder and run.completion
 * ask for a permalink and post, flow.post looks its assignee up by email and posts; a file is three
 * (upload URL, upload, completion). Not counted: flow.move reads one user group per call, and goes
 * past four only with four or more of them.
 */
export const MOST_CALLS_PER_EFFECT = 4;
/** The shortest per-call time-out the outbox's Slack client is given, whatever the lease. */
const SHORTEST_CALL_MS = 1000;
/** And the longest: beyond it a call is taken as lost, however long the lease. */
const LONGEST_CALL_MS = 20_000;

/**
 * The outbox Web API client's per-call time-out for a claim of `leaseMs`, and the lease that holds it:
 * an effect's calls, each given up after `timeoutMs`, end within four fifths of its claim (the rest is
 * for the database work around them), so no other replica takes an effect over while it still calls
 * Slack, which would post it a second time. A lease too short for calls of SHORTEST_CALL_MS is
 * lengthened to hold them (Slack calls of a few hundred milliseconds would otherwise time out).
 */
export function effectCallTimeout(leaseMs: number): { timeoutMs: number; leaseMs: number } {
  const share = Math.floor((leaseMs * 4) / (5 * MOST_CALLS_PER_EFFECT));
  const timeoutMs = Math.min(LONGEST_CALL_MS, Math.max(SHORTEST_CALL_MS, share));
  return { timeoutMs, leaseMs: Math.max(leaseMs, Math.ceil((timeoutMs * MOST_CALLS_PER_EFFECT * 5) / 4)) };
}

/** How often a worker deletes old done effects. */
const PRUNE_EVERY_MS = 3600_000;

/** Marks an attempt under way: a claim that finds it still there knows the attempt before it was cut short. */
const IN_FLIGHT = "(attempt in flight)";
/** Prefixes the error of a failure after which Slack may have done it anyway. */
const AMBIGUOUS = "(may have reached Slack) ";

/** The effect kinds this version performs (claims are limited to them, UNKNOWN_KIND_WAIT_MS aside). */
const KNOWN_KINDS = Object.keys(EFFECT_KINDS);
/** How long an effect of a kind this version does not know is left to a newer one before it is given up. */
const UNKNOWN_KIND_WAIT_MS = 24 * 3600_000;
const isPayload = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

export interface OutboxEvents {
  /** An effect was performed (for metrics: how long it waited since it was enqueued). */
  performed?(kind: EffectKind): void;
  /** An effect was given up. */
  gaveUp?(kind: EffectKind, reason: string): void;
  /** An effect found no Slack budget for its call and waits for it (not an attempt). */
  deferred?(kind: EffectKind, method: string): void;
  /**
   * An effect is being given up: enqueue on `tx` what stands in for it (a message Slack refused in its
   * channel goes to a person directly, src/outbox/refused.ts). Committed with the give-up, so neither
   * is lost without the other.
   */
  onGiveUp?(job: EffectJob, reason: string, tx: Sql, now: Date): Promise<void>;
}

export interface OutboxWorkerDeps {
  db: Sql;
  /** Carries out one claimed effect (src/outbox/perform.ts). */
  perform: Performer;
  log: Logger;
  clock: Clock;
  /** Unset (undefined) fields take DEFAULT_OUTBOX_OPTIONS. */
  options: Partial<OutboxOptions> & { replicaId: string };
  events?: OutboxEvents;
}

export class OutboxWorker {
  readonly options: OutboxOptions;
  private running = false;
  private timer?: NodeJS.Timeout;
  private inFlight = 0;
  /** Effects this process is performing: never claimed again by it, even when their lease has run out. */
  private readonly performing = new Set<string>();
  private lastPrune = 0;
  private claiming?: Promise<void>;
  /** More may be due than the last claim took (something was enqueued, a chain went on, a batch was full). */
  private wanted = false;
  private soon?: NodeJS.Immediate;
  private idleWaiters: (() => void)[] = [];
  private readonly sql: Sql;
  private readonly budget?: SlackBudget;
  /** A look for due effects when the earliest one put back for Slack's budget may go. */
  private wake?: { at: number; timer: NodeJS.Timeout };

  private readonly perform: Performer;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly events: OutboxEvents;

  constructor(deps: OutboxWorkerDeps) {
    const { options } = deps;
    this.perform = deps.perform;
    this.log = deps.log;
    this.clock = deps.clock;
    this.events = deps.events ?? {};
    const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as Partial<OutboxOptions>;
    this.options = { ...DEFAULT_OUTBOX_OPTIONS, replicaId: options.replicaId, ...defined };
    this.sql = deps.db;
    if (this.options.budget !== false) this.budget = new SlackBudget(this.sql, this.options.budget);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.nudge();
  }

  /** Stops claiming; effects under way finish (briefly waited for by the caller through idle()). */
  stop(): void {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.soon) clearImmediate(this.soon);
    this.soon = undefined;
    clearTimeout(this.wake?.timer);
    this.wake = undefined;
  }

  /**
   * Something was enqueued here: look soon rather than at the next tick. Nudges coalesce: however
   * many arrive while a claim is under way, or before the next turn of the event loop, one claim follows.
   */
  nudge(): void {
    if (!this.running) return;
    this.wanted = true;
    if (this.soon || this.claiming) return;
    this.soon = setImmediate(() => {
      this.soon = undefined;
      this.pass();
    });
  }

  private pass(): void {
    if (!this.running || this.claiming) return;
    // Every slot is busy: the first to come free claims (a full batch left more due), not the next tick.
    if (this.inFlight >= this.options.concurrency) {
      this.wanted = true;
      return;
    }
    this.wanted = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.claiming = this.claimAndRun().finally(() => {
      this.claiming = undefined;
      if (this.inFlight === 0) for (const w of this.idleWaiters.splice(0)) w();
      if (this.wanted) this.nudge();
      else this.schedule();
    });
  }

  /** Whether an effect is being performed (or claimed) by this process. */
  get busy(): boolean {
    return this.inFlight > 0 || !!this.claiming;
  }

  /** Resolves when no effect is being performed by this process. */
  idle(): Promise<void> {
    if (this.inFlight === 0 && !this.claiming) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** One pass (tests): claims what is due and waits for it to be performed. Returns how many were claimed. */
  async runDue(): Promise<number> {
    const jobs = await this.claim(this.options.concurrency);
    await Promise.all(jobs.map((job) => this.runOne(job)));
    return jobs.length;
  }

  private schedule(): void {
    if (!this.running) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.pass(), this.options.tickMs);
    this.timer.unref?.();
  }

  /**
   * Deletes done effects older than keepDoneMs and given-up ones older than 30 days. A one-time
   * effect's key is free again after that, which is harmless: nothing enqueues a week-old post again.
   */
  async prune(): Promise<number> {
    const now = this.clock.now().getTime();
    this.lastPrune = now;
    // A bucket idle for an hour is full again: its row says nothing a new one would not.
    if (this.budget) await pruneBudget(this.sql, new Date(now - 3600_000));
    return pruneEffects(this.sql, {
      doneBefore: new Date(now - this.options.keepDoneMs),
      deadBefore: new Date(now - Math.max(this.options.keepDoneMs, 30 * 24 * 3600_000)),
    });
  }

  private async claimAndRun(): Promise<void> {
    if (this.clock.now().getTime() - this.lastPrune >= PRUNE_EVERY_MS)
      await this.prune().catch((err) => this.running && this.log.warn("outbox: could not delete old effects", { err }));
    const free = this.options.concurrency - this.inFlight;
    if (free <= 0) return;
    let jobs: EffectJob[] = [];
    try {
      jobs = await this.claim(free);
    } catch (err) {
      if (this.running) this.log.warn("outbox: could not claim effects", { err });
      return;
    }
    for (const job of jobs) {
      this.inFlight++;
      void this.runOne(job).finally(() => {
        this.inFlight--;
        if (this.inFlight === 0 && !this.claiming) for (const w of this.idleWaiters.splice(0)) w();
        // A slot came free: claim again only if more is known to be due (else the next tick looks).
        if (this.wanted) this.nudge();
      });
    }
    // A full batch means more may be due at once.
    if (jobs.length === free) this.wanted = true;
  }

  private async claim(limit: number): Promise<EffectJob[]> {
    const now = this.clock.now();
    const rows = await claimEffects(this.sql, {
      now,
      limit,
      owner: this.options.replicaId,
      leaseUntil: new Date(now.getTime() + this.options.leaseMs),
      inFlightMark: IN_FLIGHT,
      exclude: [...this.performing],
      // A kind a newer version wrote is left to it for a day (a rolling deploy), then given up here.
      kinds: { known: KNOWN_KINDS, unknownBefore: new Date(now.getTime() - UNKNOWN_KIND_WAIT_MS) },
      ...(this.options.deadAfterMs ? { deadBefore: new Date(now.getTime() - this.options.deadAfterMs) } : {}),
    });
    const jobs: EffectJob[] = [];
    for (const row of rows) {
      const job = this.jobOf(row);
      if (job) jobs.push(job);
      else await this.giveUpUnknown(row, now).catch((err) => this.log.warn("outbox: could not record a failure", { effect: row.kind, err }));
    }
    return jobs;
  }

  private jobOf({ previousError, kind, payload, ...row }: ClaimedEffect): EffectJob | undefined {
    if (!isEffectKind(kind)) return undefined;
    return {
      ...row,
      kind,
      payload: isPayload(payload) ? payload : null,
      interrupted: previousError === IN_FLIGHT || !!previousError?.startsWith(AMBIGUOUS),
    };
  }

  /** An effect of a kind this version does not know, a day old (written by a newer version that never came, say): given up. */
  private async giveUpUnknown(row: ClaimedEffect, now: Date): Promise<void> {
    const reason = `unknown effect kind ${row.kind}`;
    await failEffect(this.sql, { id: row.id, owner: this.options.replicaId, giveUp: true, attempts: row.attempts, runAt: now, error: reason, now });
    this.log.error("outbox: Slack effect given up", { effect: row.kind, subjectId: row.subjectId, reason, attempts: row.attempts });
  }

  private async runOne(job: EffectJob): Promise<void> {
    this.performing.add(job.id);
    try {
      await this.performAndRecord(job);
    } finally {
      this.performing.delete(job.id);
    }
  }

  private async performAndRecord(job: EffectJob): Promise<void> {
    let outcome: EffectOutcome | undefined;
    // The calls Slack's budget let through for this attempt (its tokens are taken before the calls are
    // made): a 429 pauses each of their methods, since which one Slack refused is not known here.
    const called: SlackCall[] = [];
    const budget = this.budget;
    const priority = EFFECT_KINDS[job.kind].priority;
    const gate: SlackGate | undefined = budget
      ? async (call) => {
          const taken = await budget.take(call, priority, this.clock.now());
          if (!taken.ok) {
            // Counted here, where the token is refused: some effects wait for it in another way than
            // being put back (a live plan shows its steps in the meantime and tries again later).
            this.events.deferred?.(job.kind, call.method);
            throw new BudgetWait(call, taken.retryAt);
          }
          called.push(call);
        }
      : undefined;
    try {
      outcome = await this.perform(job, gate);
    } catch (err) {
      const record = err instanceof BudgetWait ? this.putBack(job, err) : this.failed(job, err, called);
      await record.catch((e) => this.log.warn("outbox: could not record a failure", { effect: job.kind, err: e }));
      return;
    }
    try {
      await this.complete(job, outcome ?? {});
      this.events.performed?.(job.kind);
    } catch (err) {
      // Slack has it, the database does not know: the lease runs out and the next attempt is told it was interrupted.
      this.log.warn("outbox: could not record a performed effect", { effect: job.kind, subjectId: job.subjectId, err });
    }
  }

  private async complete(job: EffectJob, outcome: EffectOutcome): Promise<void> {
    const now = this.clock.now();
    // Re-armed while it ran (a newer state to show): it stays due, to run again from the row.
    const again = outcome.again;
    const markDone = (db: Sql) => completeEffect(db, { id: job.id, generation: job.generation, owner: this.options.replicaId, now, ...(again ? { again } : {}) });
    const next = outcome.next ?? [];
    // Nothing to record and nothing after it: one statement, no transaction.
    if (!outcome.record && next.length === 0) await markDone(this.sql);
    else
      await inTransaction(this.sql, async (tx) => {
        await outcome.record?.(tx);
        for (const effect of next) await enqueueEffect(tx, effect, now);
        await markDone(tx);
      });
    if (next.length) this.wanted = true;
    if (again) this.wakeAt(again.getTime());
  }

  /**
   * No Slack budget for the effect's call: due again when a token will be there, the attempt not
   * counted. An attempt before it that may have reached Slack still makes the next one look first,
   * unless this one looked and did not find it.
   */
  private async putBack(job: EffectJob, wait: BudgetWait): Promise<void> {
    const now = this.clock.now();
    await failEffect(this.sql, {
      id: job.id,
      owner: this.options.replicaId,
      giveUp: false,
      attempts: job.attempts - 1,
      runAt: wait.retryAt,
      error: `${job.interrupted && !wait.notPosted ? AMBIGUOUS : ""}waiting for Slack's ${wait.call.method} budget`,
      now,
    });
    this.wakeAt(wait.retryAt.getTime());
  }

  /** Looks for due effects at `at` (not only at the next tick), keeping the earliest such time. */
  private wakeAt(at: number): void {
    if (!this.running || (this.wake && this.wake.at <= at)) return;
    clearTimeout(this.wake?.timer);
    const timer = setTimeout(
      () => {
        this.wake = undefined;
        this.nudge();
      },
      Math.max(0, at - this.clock.now().getTime()),
    );
    timer.unref?.();
    this.wake = { at, timer };
  }

  private async failed(job: EffectJob, err: unknown, called: readonly SlackCall[] = []): Promise<void> {
    const verdict = judgeFailure(err);
    const now = this.clock.now();
    const rateLimited = verdict.kind === "retry" && verdict.afterMs !== undefined;
    // Slack's Retry-After holds for the method in the whole workspace: every effect waits it out.
    if (rateLimited && this.budget) for (const call of called) await this.budget.pause(call, verdict.afterMs!, now);
    const attempts = rateLimited ? job.attempts - 1 : job.attempts;
    // What a person waits on (a review, a decision shown, a completion) outlasts an outage of Slack,
    // however long, at the longest backoff: given up after maxAttempts (about 35 minutes), the review
    // of a run that waits for it would never show, and nothing would post it again.
    const outlastsOutage = verdict.kind === "retry" && !!verdict.outage && EFFECT_KINDS[job.kind].priority === 0;
    const giveUp = verdict.kind === "give_up" || (attempts >= this.options.maxAttempts && !outlastsOutage);
    const wait = verdict.kind === "retry" && verdict.afterMs !== undefined ? verdict.afterMs : retryDelay(attempts, this.options.minBackoffMs, this.options.maxBackoffMs);
    // An attempt that may have reached Slack keeps its mark through any failure after it (its look-up
    // rate limited, say) until a post succeeds: else the next attempt would post without looking.
    const maybePosted = job.interrupted || (verdict.kind === "retry" && verdict.ambiguous);
    const failure = {
      id: job.id,
      owner: this.options.replicaId,
      giveUp,
      attempts,
      runAt: new Date(now.getTime() + wait),
      error: `${maybePosted ? AMBIGUOUS : ""}${verdict.reason}`.slice(0, 300),
      now,
    };
    const onGiveUp = giveUp ? this.events.onGiveUp : undefined;
    if (onGiveUp) {
      await inTransaction(this.sql, async (tx) => {
        if (await failEffect(tx, failure)) await onGiveUp(job, verdict.reason, tx, now);
      });
      this.wanted = true;
    } else await failEffect(this.sql, failure);
    if (giveUp) {
      this.log.error("outbox: Slack effect given up", { effect: job.kind, subjectId: job.subjectId, reason: verdict.reason, attempts });
      this.events.gaveUp?.(job.kind, verdict.reason);
    } else {
      this.log.warn("outbox: Slack effect failed; will retry", { effect: job.kind, subjectId: job.subjectId, reason: verdict.reason, attempts, retryInMs: wait });
    }
  }
}
