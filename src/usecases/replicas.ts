// This process among the bot's replicas: it announces that it is alive (a heartbeat row, written every
// few seconds on its own timer, so a slow Slack or crew call never delays it) and that it stopped. The
// outbox worker and status polling take over the claims of a replica that stopped announcing itself
// (src/store/replicas.ts: the rule); a live replica keeps its own however long a call takes. A replica
// that owns its database alone (the embedded one) takes back every claim at start instead: they can
// only be its earlier incarnation's.
import { STOPPED_STATES } from "../domain/states.js";
import type { Logger } from "../log/log.js";
import { beat, pruneReplicas, releaseAllClaims, retire } from "../store/replicas.js";
import type { Sql } from "../store/sql.js";
import { type ClaimHolder, type Clock, systemClock } from "./ports.js";

export interface HeartbeatOptions {
  /** How often this replica announces itself (default 2 000 ms). */
  everyMs: number;
  /** A replica silent for this long is taken for dead and its claims are taken over (default 8 000 ms). */
  deadAfterMs: number;
}

const DEFAULT_HEARTBEAT_OPTIONS: HeartbeatOptions = { everyMs: 2000, deadAfterMs: 8000 };

/** Rows of replicas silent this long are deleted (each replica looks once an hour). */
const FORGET_AFTER_MS = 24 * 3600_000;

export class ReplicaHeartbeat implements ClaimHolder {
  readonly options: HeartbeatOptions;
  private timer?: NodeJS.Timeout;
  private beating?: Promise<void>;
  private lastPrune = 0;
  private readonly sql: Sql;

  readonly replicaId: string;
  private readonly log: Logger;
  private readonly clock: Clock;

  constructor(deps: { db: Sql; replicaId: string; log: Logger; clock?: Clock; options?: Partial<HeartbeatOptions> }) {
    ({ replicaId: this.replicaId, log: this.log } = deps);
    this.clock = deps.clock ?? systemClock;
    const defined = Object.fromEntries(Object.entries(deps.options ?? {}).filter(([, v]) => v !== undefined)) as Partial<HeartbeatOptions>;
    const merged = { ...DEFAULT_HEARTBEAT_OPTIONS, ...defined };
    // A heartbeat at least three times within the dead-after time: one late beat is no death.
    this.options = { ...merged, everyMs: Math.max(50, Math.min(merged.everyMs, Math.floor(merged.deadAfterMs / 3))) };
    this.sql = deps.db;
  }

  /** A holder whose last heartbeat is older than this is gone: its claims are taken over. */
  deadBefore(now: Date): Date {
    return new Date(now.getTime() - this.options.deadAfterMs);
  }

  /** Announces this replica (awaited: its claims carry its id from the first one), then keeps announcing it. */
  async start(): Promise<void> {
    await beat(this.sql, this.replicaId, this.clock.now());
    this.schedule();
  }

  /**
   * Stops announcing and marks this replica stopped, so that what it still holds is taken over at once.
   * `keepClaims`: work of it may still reach Slack (a post under way): it is not marked stopped, and
   * what it holds is taken over once its heartbeat is stale (deadAfterMs), as after a crash.
   */
  async stop(opts: { keepClaims?: boolean } = {}): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.beating?.catch(() => {});
    if (opts.keepClaims) return void this.log.warn("stopping with Slack calls under way: what this replica holds is taken over once its heartbeat is stale");
    await retire(this.sql, this.replicaId, this.clock.now()).catch((err) => this.log.warn("could not mark this replica stopped", { err }));
  }

  /**
   * Takes back every claim (a process that owns its database alone, at start, before it serves any
   * request): outbox leases, status polls, deadlines and stops at once; returns how many. Decisions
   * left "deciding" go through their recovery right after (RunWatcher.recover, FlowRequests.recover
   * with `earlierRun`), which asks the crew or flow first.
   */
  async takeBackClaims(): Promise<number> {
    const taken = await releaseAllClaims(this.sql, this.clock.now(), STOPPED_STATES);
    const total = taken.effects + taken.polls + taken.deadlines + taken.stops;
    if (total) this.log.info("took back the claims of the previous run", taken);
    return total;
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.beating = this.beatOnce().finally(() => {
        this.beating = undefined;
        if (this.timer) this.schedule();
      });
    }, this.options.everyMs);
    this.timer.unref?.();
  }

  private async beatOnce(): Promise<void> {
    const now = this.clock.now();
    try {
      await beat(this.sql, this.replicaId, now);
      if (now.getTime() - this.lastPrune >= 3600_000) {
        this.lastPrune = now.getTime();
        await pruneReplicas(this.sql, new Date(now.getTime() - FORGET_AFTER_MS));
      }
    } catch (err) {
      this.log.warn("could not announce this replica", { err });
    }
  }
}
