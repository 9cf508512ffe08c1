// The outbox's Slack budget: before an effect makes a Web API call, it takes a token from the bucket of
// that method in that workspace (in that channel, for chat.postMessage), kept in the database so that
// every replica spends from the same buckets; a 429's Retry-After pauses the method in the workspace for
// every effect. An effect that finds no token is not performed: the worker puts it back for when one
// will be there (BudgetWait), without counting an attempt. Design and figures: docs/slack-budget.md.
//
// Priorities (src/domain/effects.ts, EFFECT_KINDS[kind].priority) decide who may take the last tokens:
// what a person waits on takes any; notices leave RESERVES[1] of each bucket to it; progress leaves
// RESERVES[2]. So a burst of reviews finds tokens even while progress spends the rest of the tier.

import type { EffectPriority } from "../domain/effects.js";
import { pauseBudget, takeBudget } from "../store/slack-budget.js";
import type { Sql } from "../store/sql.js";
import { bucketKey, cellRate, pauseKey, TIERS, type TierName, type TierRate, tierOf } from "./tiers.js";

/** One Web API call an effect is about to make: which method, in which workspace and channel. */
export interface SlackCall {
  team: string;
  method: string;
  channel?: string;
}

/** Asks the budget for a call before making it; throws BudgetWait when there is no token. */
export type SlackGate = (call: SlackCall) => Promise<void>;

/** No token for this call now: the effect is put back until `retryAt`, no attempt counted. */
export class BudgetWait extends Error {
  constructor(
    readonly call: SlackCall,
    readonly retryAt: Date,
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
  return Math.max(1, Math.floor(burst / 2));
}

/** The bucket a call spends from, for a priority: its key, and the cell rate with the priority's reserve. */
export function budgetFor(call: SlackCall, priority: EffectPriority, options: BudgetOptions = DEFAULT_BUDGET_OPTIONS) {
  const rate = tierOf(call.method, options.tiers);
  if (!rate) return undefined;
  const burst = Math.max(1, rate.burst - options.headroom);
  return { key: bucketKey(call, rate), pauseKey: pauseKey(call), ...cellRate({ perMinute: rate.perMinute, burst }, reserveFor(priority, burst)) };
}

/** Progress refused a token waits at least this long: fewer, later updates, each showing the latest step. */
export const PROGRESS_WAIT_WHEN_SHORT_MS = 4000;

export class SlackBudget {
  readonly options: BudgetOptions;

  constructor(
    private readonly sql: Sql,
    options: Partial<BudgetOptions> = {},
  ) {
    this.options = { ...DEFAULT_BUDGET_OPTIONS, ...options };
  }

  /** Takes a token for the call, or says when to try again. A method without a tier always goes. */
  async take(call: SlackCall, priority: EffectPriority, now: Date): Promise<{ ok: true } | { ok: false; retryAt: Date }> {
    const bucket = budgetFor(call, priority, this.options);
    if (!bucket) return { ok: true };
    const taken = await takeBudget(this.sql, { ...bucket, now });
    if (taken.ok || priority < 2) return taken;
    return { ok: false, retryAt: new Date(Math.max(taken.retryAt.getTime(), now.getTime() + PROGRESS_WAIT_WHEN_SHORT_MS)) };
  }

  /** A 429 for this call: no call of its method in its workspace for `retryAfterMs`. */
  async pause(call: SlackCall, retryAfterMs: number, now: Date): Promise<void> {
    await pauseBudget(this.sql, { pauseKey: pauseKey(call), until: new Date(now.getTime() + retryAfterMs), now });
  }
}
