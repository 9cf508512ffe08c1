// Crew callbacks (step, task, crew): authenticate, record durably, answer, then act.
// This is the one place that says what happens when a webhook arrives.
import crypto from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { isFinished, reviewTransition } from "../domain/states.js";
import type { Logger } from "../log/log.js";
import { isCrewError } from "../protocols/crew/errors.js";
import { effectOf, parseEventBatch, type StreamEvent } from "../protocols/crew/events.js";
import { parseWebhook } from "../protocols/crew/parse.js";
import type { CrewEvent } from "../protocols/crew/types.js";
import { findExecution } from "../store/executions.js";
import { isUuid } from "../store/ids.js";
import { latestReviewWithOutput } from "../store/reviews.js";
import type { Sql } from "../store/sql.js";
import {
  countRecordedEvents,
  insertWebhookEvent,
  markWebhookEventFailed,
  markWebhookEventProcessed,
  pruneWebhookEvents,
  type RepeatedDelivery,
  repeatedDelivery,
  startWebhookEventAttempt,
  unprocessedWebhookEvents,
  webhookEventPayload,
} from "../store/webhook-events.js";
import { hashOutput } from "./decisions/core.js";
import { type Clock, type Execution, systemClock } from "./ports.js";
import type { ProgressCoalescer } from "./progress.js";
import { awaitedTask, type Reviews } from "./reviews.js";
import { namedRunIds, namesOwnRun } from "./run-binding.js";
import type { Runs } from "./runs.js";
import { WorkQueue } from "./work-queue.js";

/**
 * Recorded callbacks processed at once on PostgreSQL (the rest wait, durable already): 6 beat 4 and 8
 * on a pool of 16 (docs/benchmarks.md, Scale-out). The embedded database runs one query at a time, so
 * the app passes 1 there.
 */
export const DEFAULT_PROCESSING_CONCURRENCY = 6;

/** How long the recorded callbacks of an ended run are kept (WEBHOOK_EVENT_RETENTION). */
export const DEFAULT_WEBHOOK_EVENT_RETENTION_MS = 7 * 86_400_000;
/** Processing attempts before a recorded callback is given up. */
const MAX_ATTEMPTS = 5;
/**
 * A live run's cached row is read again once this old: a run ended elsewhere (a stop or an uninstall
 * on another replica) is refused here within that time, a step callback included.
 */
export const LIVE_RUN_RECHECK_MS = 2_000;
/** How often old events are deleted (at most). */
const PRUNE_EVERY_MS = 3600_000;
/**
 * How long a task output that repeats a round still being decided waits for that decision to be
 * stored (applyOnceDecided), in steps: about 6 s, then it is left to the recovery sweep.
 */
const DECISION_STORED_WAITS_MS = [50, 100, 200, 400, 800, 1600, 3200] as const;

/** A review whose decision is claimed and being sent to the crew. */
const DECIDING = reviewTransition("claimed").to;

const REJECTED = reviewTransition("resume_ok_reject").to;

/** The states of a review whose rejection the crew was, or is being, told: it runs the task again. */
const REJECTED_STATES = [DECIDING, REJECTED] as const;

/**
 * Whether a task or human-input callback whose body the run has recorded before is the crew's next
 * round rather than a redelivery. A crew that ignores the feedback, or an LLM at temperature 0,
 * answers a rejection with the very same bytes; only a decision between the two deliveries tells
 * them apart: a round of that output was rejected (the rejection claimed, so possibly still on its
 * way to the crew, or taken) after the delivery it repeats was received. Then it returns the round
 * last rejected, under which the new delivery is recorded (so that its own redelivery is a repeat in
 * turn, until the next rejection); otherwise undefined: the same delivery again (before or while its
 * round is open, after an approval, or after a rejection the crew never took), answered as a repeat.
 */
export function roundRepeatedAfterRejection(repeat: RepeatedDelivery): string | undefined {
  const round = repeat.lastRejected;
  if (!round?.decidedAt || round.decision !== "reject" || !(REJECTED_STATES as readonly string[]).includes(round.state)) return undefined;
  return round.decidedAt.getTime() >= repeat.receivedAt.getTime() ? round.id : undefined;
}

// "input": the human-input webhook; "events": the event stream (opt-in per crew). Both also carry the
// execution's bearer token.
export const CALLBACK_KINDS = ["step", "task", "crew", "input", "events"] as const;
export type CallbackKind = (typeof CALLBACK_KINDS)[number];

/**
 * What answering a callback needs of its run. Only this is cached: a cached whole row would keep the
 * run's final output (up to a callback's 2 MiB) for as long as the row stays among the 1,000 cached.
 */
export type IntakeRun = Pick<Execution, "id" | "kickoffId" | "state" | "webhookSecret" | "humanInputToken">;

/** A callback whose URL (and bearer token) named a run and its secret correctly; its body is still unread. */
export interface AuthenticatedCallback {
  execution: IntakeRun;
  kind: CallbackKind;
}

/** Why a callback was refused before its body was read (adapters/http/routes.ts words each as an HTTP answer). */
export type CallbackRefusal = { kind: "unknown_callback" } | { kind: "unknown_run" } | { kind: "bad_secret" } | { kind: "bad_authorization" } | { kind: "run_ended" };

/** What became of a callback's body. */
export type CallbackOutcome =
  /** Taken; `after` schedules the work to do once the crew has its answer (the durable record exists already). */
  | { kind: "accepted"; after?: () => void }
  | { kind: "duplicate" }
  /** The run ended before its callback could be stored (nothing was). */
  | { kind: "run_ended" }
  /** An event batch with nothing not seen before. */
  | { kind: "nothing_new" }
  | { kind: "names_another_run" }
  | { kind: "malformed"; problem: string };

/** Of a run's row, only what answering a callback needs (IntakeRun). */
const intakeRun = ({ id, kickoffId, state, webhookSecret, humanInputToken }: IntakeRun): IntakeRun => ({ id, kickoffId, state, webhookSecret, humanInputToken });

/** A cached run, and when it was read (ms on the clock). */
interface CachedRun {
  run: IntakeRun;
  readAt: number;
}

/** The token of an `Authorization: Bearer <token>` header (the scheme in any case, as HTTP has it), or "". */
export function bearerToken(authorization: string | undefined): string {
  const header = (authorization ?? "").trim();
  const space = header.search(/\s/);
  if (space < 0 || header.slice(0, space).toLowerCase() !== "bearer") return "";
  return header.slice(space).trim();
}

export class Callbacks {
  /** Executions by id, so that a flood of step callbacks costs no query. */
  private readonly cache = new Map<string, CachedRun>();
  private readonly work: WorkQueue;
  private readonly sql: Sql;
  private lastPrune = 0;

  private readonly runs: Runs;
  private readonly reviews: Reviews;
  private readonly progress: ProgressCoalescer;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly retentionMs: number;

  constructor(deps: {
    db: Sql;
    runs: Runs;
    reviews: Reviews;
    progress: ProgressCoalescer;
    log: Logger;
    clock?: Clock;
    processingConcurrency?: number;
    /** How long the recorded callbacks of an ended run are kept. */
    retentionMs?: number;
  }) {
    ({ db: this.sql, runs: this.runs, reviews: this.reviews, progress: this.progress, log: this.log } = deps);
    this.clock = deps.clock ?? systemClock;
    this.retentionMs = deps.retentionMs ?? DEFAULT_WEBHOOK_EVENT_RETENTION_MS;
    // process() logs its own failures with the event they belong to.
    this.work = new WorkQueue(deps.processingConcurrency ?? DEFAULT_PROCESSING_CONCURRENCY, () => {});
  }

  /**
   * Who is calling, from the URL and headers alone (execution id, secret, and for `input` / `events`
   * the bearer token): checked before the body is read, so a forged request costs no parsing.
   */
  async authenticate(executionId: string, kind: string, secret: string, authorization?: string): Promise<{ caller: AuthenticatedCallback } | { refused: CallbackRefusal }> {
    if (!(CALLBACK_KINDS as readonly string[]).includes(kind) || !isUuid(executionId)) return { refused: { kind: "unknown_callback" } };
    // The cached row will do: its secret and token never change, and an ended run stays ended. A run
    // that ended since it was cached is caught where the callback is stored (record: run_ended), and
    // for a step, which is not stored, once its live row is read again (lookup).
    const execution = await this.lookup(executionId);
    if (!execution) return { refused: { kind: "unknown_run" } };
    if (!sameSecret(secret, execution.webhookSecret)) return { refused: { kind: "bad_secret" } };
    if ((kind === "input" || kind === "events") && !(execution.humanInputToken && sameSecret(bearerToken(authorization), execution.humanInputToken))) {
      return { refused: { kind: "bad_authorization" } };
    }
    // A run that has ended takes no more news, and nothing about it is stored, whatever the kind, a
    // repeat of the crew callback that ended it included (the crew does not retry, and a repeat
    // arriving while that callback is still being processed is a duplicate).
    if (isFinished(execution.state)) return { refused: { kind: "run_ended" } };
    return { caller: { execution, kind: kind as CallbackKind } };
  }

  /** The body of an authenticated callback: checked against its run, recorded, answered. */
  async accept(caller: AuthenticatedCallback, body: unknown): Promise<CallbackOutcome> {
    const { kind } = caller;
    let { execution } = caller;
    if (!namesOwnRun(execution, body)) {
      // The cached row may predate the stored kickoff id: look again before refusing.
      this.cache.delete(execution.id);
      execution = (await this.lookup(execution.id)) ?? execution;
      if (!namesOwnRun(execution, body)) {
        this.log.warn("callback names another run; refused", { executionId: execution.id, kind });
        return { kind: "names_another_run" };
      }
    }
    if (!execution.kickoffId) execution = await this.adoptNamed(execution, body);

    if (kind === "events") return this.acceptEvents(execution, body);
    let event: CrewEvent;
    try {
      event = parseWebhook(kind as Exclude<CallbackKind, "events">, body);
    } catch (err) {
      return { kind: "malformed", problem: isCrewError(err) ? err.message : "malformed callback body" };
    }
    if (event.kind === "step") {
      if (!isFinished(execution.state)) this.progress.step(execution, event);
      return { kind: "accepted" };
    }
    const delivery = this.deliveryOf(kind, body);
    let recorded = await insertWebhookEvent(this.sql, { executionId: execution.id, kind, ...delivery }, this.clock.now());
    if (!recorded && event.kind !== "crew") {
      // The same bytes again: a redelivery, or the crew's next round after a rejection.
      const repeat = await repeatedDelivery(this.sql, {
        executionId: execution.id,
        dedupeKey: delivery.dedupeKey,
        outputHash: hashOutput(event.output),
        rejectedStates: REJECTED_STATES,
      });
      const round = repeat && roundRepeatedAfterRejection(repeat);
      if (round) {
        delivery.dedupeKey = afterRoundKey(delivery.dedupeKey, round);
        recorded = await insertWebhookEvent(this.sql, { executionId: execution.id, kind, ...delivery }, this.clock.now());
        if (recorded) this.log.info("a callback repeating a rejected round's output is taken as the next round", { executionId: execution.id, kind, reviewId: round });
      }
    }
    if (!recorded) return (await this.refusedAsEnded(execution.id, [delivery.dedupeKey])) ? { kind: "run_ended" } : { kind: "duplicate" };
    // The body is at hand: processing it here need not read megabytes back from the database.
    // One run's callbacks are processed in the order they came: its end must not overtake its last task.
    return { kind: "accepted", after: () => this.work.push(() => this.process(recorded, body), execution.id) };
  }

  /**
   * An event-stream batch: progress events feed the progress message at once (like step callbacks);
   * task and crew events are recorded (deduplicated by event id) and then go through the same path as
   * task and crew callbacks, in timestamp order, so whichever source arrives first has the effect.
   */
  private async acceptEvents(execution: IntakeRun, body: unknown): Promise<CallbackOutcome> {
    let events: StreamEvent[];
    try {
      events = parseEventBatch(body);
    } catch (err) {
      return { kind: "malformed", problem: isCrewError(err) ? err.message : "malformed event batch" };
    }
    const recorded: string[] = [];
    const skipped: string[] = [];
    for (const event of events) {
      // An event naming another run than the one its URL is bound to is not this run's news.
      if (event.runId && execution.kickoffId && event.runId !== execution.kickoffId) continue;
      const effect = effectOf(event);
      if (effect.kind === "progress" && !isFinished(execution.state)) this.progress.step(execution, effect.step);
      if (effect.kind !== "callback") continue;
      const dedupeKey = eventDedupeKey(event.id);
      const id = await insertWebhookEvent(this.sql, { executionId: execution.id, kind: effect.callback, dedupeKey, payloadJson: JSON.stringify(effect.body) }, this.clock.now());
      if (id) recorded.push(id);
      else skipped.push(dedupeKey);
    }
    if (!recorded.length) return (await this.refusedAsEnded(execution.id, skipped)) ? { kind: "run_ended" } : { kind: "nothing_new" };
    return { kind: "accepted", after: () => this.work.push(() => this.processInOrder(recorded), execution.id) };
  }

  private async processInOrder(ids: string[]): Promise<void> {
    for (const id of ids) await this.process(id).catch(() => {});
  }

  /**
   * Handles one recorded event; safe to call again (recovery) since every effect is idempotent. `body`
   * is the event's recorded body when the caller has it (the request that recorded it); else it is read.
   */
  async process(eventId: string, body?: unknown): Promise<void> {
    // The run comes with it as it is now, not as cached at intake (its state decides what the event may do).
    const record = await startWebhookEventAttempt(this.sql, eventId);
    if (!record) throw new Error(`webhook event ${eventId} does not exist`);
    if (record.processedAt) return;
    const { execution } = record;
    try {
      const payload = body !== undefined ? body : await webhookEventPayload(this.sql, eventId);
      const event = parseWebhook(record.kind as Exclude<CallbackKind, "events">, payload);
      // The end comes after what the run sent before it: a task recorded but not processed yet (by
      // another replica, or waiting for a retry) is applied first, or the ended run would drop it.
      if (event.kind === "crew") await this.processRecordedOf(execution.id, ["task", "input"], eventId);
      await this.apply(execution, event);
      await markWebhookEventProcessed(this.sql, eventId, this.clock.now());
    } catch (err) {
      // Kept for the recovery sweep, which retries it (up to five attempts).
      this.log.error("callback processing failed", { eventId, kind: record.kind, err });
      await markWebhookEventFailed(this.sql, eventId, String((err as Error).message ?? err).slice(0, 500));
      throw err;
    }
  }

  /**
   * A run's callbacks of these kinds recorded but not processed (by a replica that died, or awaiting a
   * retry), in the order they came: applied before the run's end is taken from its crew callback
   * (`except`: that one) or from its status, either of which would leave them refused.
   */
  async processRecordedOf(executionId: string, kinds: readonly CallbackKind[], except?: string): Promise<void> {
    const recorded = await unprocessedWebhookEvents(this.sql, { ofRun: { executionId, kinds, except }, maxAttempts: MAX_ATTEMPTS, limit: 100 });
    for (const event of recorded) await this.process(event.id).catch(() => {});
  }

  /** Events recorded but not processed (crash between answer and work): process them now. */
  async processBacklog(olderThanMs = 0): Promise<number> {
    const pending = await unprocessedWebhookEvents(this.sql, { receivedBy: new Date(this.clock.now().getTime() - olderThanMs), maxAttempts: MAX_ATTEMPTS, limit: 100 });
    for (const event of pending) await this.process(event.id).catch(() => {});
    return pending.length;
  }

  /**
   * Deletes the recorded callbacks of ended runs once older than the retention (WEBHOOK_EVENT_RETENTION),
   * at most once an hour; returns how many went.
   */
  async prune(): Promise<number> {
    const now = this.clock.now().getTime();
    if (now - this.lastPrune < PRUNE_EVERY_MS) return 0;
    this.lastPrune = now;
    return pruneWebhookEvents(this.sql, { before: new Date(now - this.retentionMs), maxAttempts: MAX_ATTEMPTS });
  }

  private async apply(execution: Execution, event: CrewEvent): Promise<void> {
    if (event.kind === "crew") {
      await this.runs.finish(execution.id, event.error ? { event: "failed", error: event.error, output: event.output || undefined } : { event: "succeeded", output: event.output });
      // Step callbacks read the cached row: from now on they see the run has ended.
      this.cache.delete(execution.id);
      return;
    }
    // The cached run stays: what answering reads of it (secret, token, kickoff id) does not change, and
    // a run that ended is caught where its next callback is stored (the INSERT checks it). Dropping it
    // here made every task and human-input callback read its run again.
    if (isFinished(execution.state)) return;
    if (event.kind === "task") {
      const posted = await this.applyOnceDecided(execution.id, event.output, () => this.reviews.open(execution, event));
      // Seed deployments send no human-input request: the status says whether the crew waits on it.
      if (posted?.state === "posted") {
        void this.reviews.confirmWaiting(execution, posted).catch((err) => this.log.warn("could not confirm a pause from the status", { executionId: execution.id, err }));
      }
    } else if (event.kind === "input") {
      await this.applyOnceDecided(execution.id, event.output, () => this.reviews.awaitDecision(execution, awaitedTask(event), { source: "input" }));
    }
  }

  /**
   * Applies a task output. When it opened nothing because a round of the same output is still being
   * decided (the crew re-ran the task on a rejection before Crewline had stored it), it is applied
   * again once that decision is stored, so that the round it repeats counts as rejected. Still being
   * decided after DECISION_STORED_WAITS_MS: it fails, and the recovery sweep tries it again.
   */
  private async applyOnceDecided<T>(executionId: string, output: string, apply: () => Promise<T | undefined>): Promise<T | undefined> {
    const applied = await apply();
    if (applied) return applied;
    const outputHash = hashOutput(output);
    for (let attempt = 0; ; attempt++) {
      const round = await latestReviewWithOutput(this.sql, executionId, outputHash);
      // Stored as rejected between the apply and this read: it counts now, so applied again.
      if (round?.state !== DECIDING) return attempt || round?.state === REJECTED ? apply() : undefined;
      const wait = DECISION_STORED_WAITS_MS[attempt];
      if (wait === undefined) throw new Error(`a round of this output is still being decided (review ${round.id})`);
      await sleep(wait, undefined, { ref: false });
    }
  }

  /** A callback's body as stored, and its dedupe key (its kind and content: a delivery received twice is one). */
  private deliveryOf(kind: string, body: unknown): { dedupeKey: string; payloadJson: string } {
    const payloadJson = JSON.stringify(body);
    return { dedupeKey: crypto.createHash("sha256").update(kind).update("\0").update(payloadJson).digest("hex"), payloadJson };
  }

  /**
   * Deliveries that were not stored: either each was stored before (a repeat, answered as such, even
   * once the run has ended), or the run had ended when they came (the INSERT checks it), whatever its
   * cached row says. The cached row is dropped then, so the next callback reads the end.
   */
  private async refusedAsEnded(executionId: string, dedupeKeys: string[]): Promise<boolean> {
    if (!dedupeKeys.length || (await countRecordedEvents(this.sql, executionId, dedupeKeys)) === dedupeKeys.length) return false;
    this.cache.delete(executionId);
    return true;
  }

  /**
   * A run with no kickoff id yet (its kickoff's answer lost, or not yet stored) takes the one its
   * authenticated callback names, so that it is polled, resumed and stopped by it.
   */
  private async adoptNamed(execution: IntakeRun, body: unknown): Promise<IntakeRun> {
    const [named, ...others] = namedRunIds(body).filter((id) => id !== execution.id);
    if (!named || others.some((id) => id !== named)) return execution;
    const adopted = await this.runs.adopt(execution.id, named);
    if (!adopted) return (await this.lookup(execution.id)) ?? execution;
    this.log.info("run adopted its kickoff id from a callback", { executionId: execution.id });
    return intakeRun(adopted);
  }

  private async lookup(id: string): Promise<IntakeRun | undefined> {
    const cached = this.cache.get(id);
    if (cached && this.current(cached)) return cached.run;
    const readAt = this.clock.now().getTime();
    const row = await findExecution(this.sql, id);
    if (!row) return undefined;
    const execution = intakeRun(row);
    // Not cached before the crew has answered the kickoff: its kickoff id is what a callback's body is
    // checked against (namesOwnRun). Bounded: oldest entries go first (Map keeps insertion order).
    if (!execution.kickoffId) return execution;
    this.cache.delete(id);
    if (this.cache.size >= 1000) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(id, { run: execution, readAt });
    return execution;
  }

  /**
   * Whether a cached run may answer as it is: an ended run stays ended; a live one until its row is
   * LIVE_RUN_RECHECK_MS old (a stop or an uninstall on another replica may have ended it).
   */
  private current(cached: CachedRun): boolean {
    return isFinished(cached.run.state) || this.clock.now().getTime() - cached.readAt < LIVE_RUN_RECHECK_MS;
  }

  forget(id: string): void {
    this.cache.delete(id);
  }

  /** Runs were ended in bulk here (an uninstall): every live run is read again at its next callback. */
  forgetLive(): void {
    for (const [id, cached] of this.cache) if (!isFinished(cached.run.state)) this.cache.delete(id);
  }

  /** Resolves when recorded callbacks have been processed (shutdown). */
  drain(): Promise<void> {
    return this.work.idle();
  }
}

/** The dedupe key of a delivery repeating the one under `dedupeKey` after the round `reviewId` was rejected. */
function afterRoundKey(dedupeKey: string, reviewId: string): string {
  return crypto.createHash("sha256").update("after-rejection\0").update(dedupeKey).update("\0").update(reviewId).digest("hex");
}

/** An event's dedupe key: its id, so a batch delivered again (or overlapping another) records it once. */
function eventDedupeKey(eventId: string): string {
  return crypto.createHash("sha256").update("event\0").update(eventId).digest("hex");
}

function sameSecret(given: string, expected: string): boolean {
  const a = crypto.createHash("sha256").update(given).digest();
  const b = crypto.createHash("sha256").update(expected).digest();
  return crypto.timingSafeEqual(a, b);
}
