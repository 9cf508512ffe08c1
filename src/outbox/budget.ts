// The outbox's Slack budget: before an effect makes a Web API call, it takes a token from the bucket of
// that method in that workspace (in that channel, for chat.postMessage), kept in the database so that
// every replica spends from the same buckets; a 429's Retry-After pauses the method in the workspace for
// every effect. An effect that finds no token is not performed: the worker puts it back for when one
// will be there (BudgetWait), without counting an attempt. Design and figures: docs/slack-budget.md.
//
// Priorities (src/domain/effects.ts, EFFECT_KINDS[kind].priority) decide who may take the last tokens:
// what a person waits on takes any; notices leave one token of each bucket to it; progress leaves half
// the bucket; what only tidies a message waits for an all but full bucket (reserveFor). So a burst of
// reviews finds tokens even while progress spends the rest of the tier. Progress overdue on a promise
// (SlackCall.overdue) leaves one token, as a notice.

import type { EffectPriority } from "../domain/effects.js";
import { pauseBudget, takeBudget } from "../store/slack-budget.js";
import type { Sql } from "../store/sql.js";
import { bucketKey, cellRate, pauseKey, TIERS, type TierName, type TierRate, tierOf } from "./tiers.js";

/** One Web API call an effect is about to make: which method, in which workspace and channel. */
export interface SlackCall {
  team: string;
  method: string;
  channel?: string;
  /**
   * Leaves one more token of its bucket to the calls of its own priority that do not yield: a live
   * plan's stop (chat.stopStream) yields to the starts of other runs' plans in the same Tier 2 bucket,
   * since a start is what a person waits for and a stop can come a little later.
   */
  yields?: boolean;
  /**
   * Refused, it waits exactly until its token is there, without progress's coalescing floor
   * (PROGRESS_WAIT_WHEN_SHORT_MS): a live plan's start and stop (made once), its appends (spaced by the
   * performer already) and the refresh of the message shown while it waits (timed by the performer).
   */
  exact?: boolean;
  /**
   * What a person waits on, whatever the effect making it: it takes its token at priority 0. A live
   * plan's start (chat.startStream, once a run): when a dozen runs start together, Tier 2 starts their
   * plans one every 3 s, and each start taken sooner ends a run's wait for its plan sooner.
   */
  waitedOn?: boolean;
  /**
   * Progress that is overdue: the message shown while a live plan waits, its refresh refused until its
   * step would be older than EARLY_PROGRESS_OVERDUE_MS. It takes its token as a notice does, leaving one
   * to what a person waits on instead of half the bucket: a burst of decisions that empties Tier 3 would
   * otherwise hold it for the refill of half the bucket (about 5 s at 50 a minute).
   */
  overdue?: boolean;
  /**
   * A modal or Home tab call made in a Slack request's own answer (src/adapters/slack/views.ts): it may
   * go one burst past the outbox's bucket before it waits. Slack documents Tier 4 as "100+ a minute,
   * bursts tolerated"; the bucket's burst is an estimate kept for what nobody waits on, and a form
   * held for it costs the person in front of it the wait (20 kickoff forms in 3 s in one workspace:
   * the last waited 740 ms, `npm run bench -- modal-latency`).
   */
  burstTolerated?: boolean;
}

/** Asks the budget for a call before making it; throws BudgetWait when there is no token. */
export type SlackGate = (call: SlackCall) => Promise<void>;

/** No token for this call now: the effect is put back until `retryAt`, no attempt counted. */
export class BudgetWait extends Error {
  constructor(
    readonly call: SlackCall,
    readonly retryAt: Date,
    /** A post an earlier attempt may have made was looked for and is not there: the next attempt need not look again. */
    readonly notPosted = false,
  ) {
    super(`no Slack budget for ${call.method} until ${retryAt.toISOString()}`);
  }
}

export interface BudgetOptions {
  /** The tiers spent from (default Slack's, src/outbox/tiers.ts). */
  tiers: Record<TierName, TierRate>;
  /**
   * Tokens of every bucket the outbox never spends (default 1), so that a call sent at the edge of the
   * bucket and reaching Slack a little early (network, a slow replica) still finds one there.
   */
  headroom: number;
}

export const DEFAULT_BUDGET_OPTIONS: BudgetOptions = { tiers: TIERS, headroom: 1 };

/** How many tokens of a bucket of `burst` a priority leaves to the ones above it. */
export function reserveFor(priority: EffectPriority, burst: number): number {
  if (priority === 0 || burst <= 1) return 0;
  if (priority === 1) return 1;
  const progress = Math.max(1, Math.floor(burst / 2));
  // When Slack is idle: only from a bucket that is all but full, so it never takes a token progress could use.
  return priority === 3 ? Math.max(progress, burst - 2) : progress;
}

/** The bucket a call spends from, for a priority: its key, and the cell rate with the priority's reserve. */
export function budgetFor(call: SlackCall, priority: EffectPriority, options: BudgetOptions = DEFAULT_BUDGET_OPTIONS) {
  const rate = tierOf(call.method, options.tiers);
  if (!rate) return undefined;
  const burst = Math.max(1, rate.burst - options.headroom);
  const reserve = Math.min(burst - 1, reserveFor(priority, burst) + (call.yields ? 1 : 0));
  const cell = cellRate({ perMinute: rate.perMinute, burst }, Math.max(0, reserve));
  if (call.burstTolerated) cell.toleranceMs += burst * cell.intervalMs;
  return { key: bucketKey(call, rate), pauseKey: pauseKey(call), ...cell };
}

/** Progress refused a token waits at least this long: fewer, later updates, each showing the latest step. */
export const PROGRESS_WAIT_WHEN_SHORT_MS = 4000;

/** A call that goes without a token is counted however deep in debt its bucket is (a day: far past any real debt). */
const FORCED_TOLERANCE_MS = 24 * 3600_000;

/** How long a call made in a Slack request's own answer waits for its token at most (SlackBudget.spendNow). */
export const MAX_WAIT_IN_ANSWER_MS = 3000;

export class SlackBudget {
  readonly options: BudgetOptions;

  constructor(
    private readonly sql: Sql,
    options: Partial<BudgetOptions> = {},
  ) {
    this.options = { ...DEFAULT_BUDGET_OPTIONS, ...options };
  }

  /** Takes a token for the call, or says when to try again. A method without a tier always goes. */
  async take(call: SlackCall, asked: EffectPriority, now: Date): Promise<{ ok: true } | { ok: false; retryAt: Date }> {
    const priority: EffectPriority = call.waitedOn ? 0 : call.overdue && asked > 1 ? 1 : asked;
    const bucket = budgetFor(call, priority, this.options);
    if (!bucket) return { ok: true };
    const taken = await takeBudget(this.sql, { ...bucket, now });
    if (taken.ok || priority < 2 || call.exact) return taken;
    return { ok: false, retryAt: new Date(Math.max(taken.retryAt.getTime(), now.getTime() + PROGRESS_WAIT_WHEN_SHORT_MS)) };
  }

  /**
   * A call made outside the outbox, in a Slack request's own answer, that spends the same buckets (the
   * run's announcement, posted at kickoff): it takes its token as an effect of `priority` would, waiting
   * for it while it is due within `maxWaitMs` of the first ask. Past that it goes anyway, so the person
   * who started the run never waits long for it, but its token is still counted (the bucket goes into
   * debt): the outbox's calls that follow wait for it instead of reaching Slack past its limit too.
   */
  async spendNow(call: SlackCall, priority: EffectPriority, clock: { now(): Date }, maxWaitMs = MAX_WAIT_IN_ANSWER_MS): Promise<void> {
    const deadline = clock.now().getTime() + maxWaitMs;
    for (;;) {
      const now = clock.now();
      const taken = await this.take(call, priority, now);
      if (taken.ok) return;
      if (taken.retryAt.getTime() > deadline) return this.force(call, now);
      await new Promise((resolve) => setTimeout(resolve, Math.max(10, Math.min(taken.retryAt.getTime(), deadline + 1) - now.getTime())));
    }
  }

  /** Counts a call that goes without a token (a paused method is left paused: the call will hear its 429). */
  private async force(call: SlackCall, now: Date): Promise<void> {
    const bucket = budgetFor(call, 0, this.options);
    if (bucket) await takeBudget(this.sql, { ...bucket, toleranceMs: FORCED_TOLERANCE_MS, now });
  }

  /** A 429 for this call: no call of its method in its workspace for `retryAfterMs`. */
  async pause(call: SlackCall, retryAfterMs: number, now: Date): Promise<void> {
    await pauseBudget(this.sql, { pauseKey: pauseKey(call), until: new Date(now.getTime() + retryAfterMs), now });
  }
}
