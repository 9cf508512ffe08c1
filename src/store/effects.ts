// The outbox's table (SlackEffect): every statement that enqueues, claims, completes, retries, gives
// up and prunes Slack effects, and the counts metrics read. The vocabulary (kinds, keys, threads)
// is src/domain/effects.ts; the loop that uses these is src/outbox/worker.ts.
// Every time written here is handed in by the caller, from its injected clock.
import crypto from "node:crypto";
import { type Expression, type Selectable, type SqlBool, sql } from "kysely";
import { EFFECT_KINDS, effectKey, type NewEffect, PROGRESS_SPACING_MS } from "../domain/effects.js";
import { ownerGone } from "./replicas.js";
import type { DB, Sql } from "./sql.js";

export type EffectRow = Selectable<DB["SlackEffect"]>;

/** A connection, a transaction, or a typed handle on either. */

/**
 * Enqueues an effect on the given connection (a transaction's, to commit with the state change).
 * One-time: a second enqueue of the same key does nothing. Repeatable: a due row stays due; a done
 * row is due again; the generation is bumped so that a run already under way leaves it due.
 * run.progress accumulates its step count and keeps the text (and the task a task_started event named) received
 * last, and is spaced from its last update.
 * A one-time message is stamped with its thread (see claimEffects). Returns whether a row changed.
 */
export async function enqueueEffect(db: Sql, effect: NewEffect, now: Date): Promise<boolean> {
  const q = db;
  const { repeatable, thread } = EFFECT_KINDS[effect.kind];
  const runAt = effect.runAt ?? now;
  const payload = effect.payload ? JSON.stringify(effect.payload) : null;
  // The thread of a review's message is its run's (read in the same statement).
  const threadId = thread === "review" ? q.selectFrom("Review").select("Review.executionId").where("Review.id", "=", effect.subjectId) : thread ? effect.subjectId : null;
  const insert = q.insertInto("SlackEffect").values({
    id: crypto.randomUUID(),
    kind: effect.kind,
    subjectId: effect.subjectId,
    key: effectKey(effect),
    payload,
    state: "due",
    runAt,
    attempts: 0,
    generation: 0,
    threadId,
    createdAt: now,
    updatedAt: now,
  });
  const query = !repeatable
    ? insert.onConflict((oc) => oc.column("key").doNothing())
    : insert.onConflict((oc) =>
        oc.column("key").doUpdateSet((eb) => {
          const wasDue = eb("SlackEffect.state", "=", "due");
          return {
            state: "due",
            generation: eb("SlackEffect.generation", "+", 1),
            updatedAt: now,
            attempts: eb.case().when(wasDue).then(eb.ref("SlackEffect.attempts")).else(0).end(),
            ...(effect.kind === "run.progress"
              ? {
                  // JSON arithmetic the builder has no words for. Replicas hand over their steps in any
                  // order: the text received last (latestAt) wins, not the handover that came in last.
                  payload: sql<unknown>`jsonb_build_object(
                    'steps', COALESCE(("SlackEffect".payload->>'steps')::int, 0) + COALESCE((EXCLUDED.payload->>'steps')::int, 0),
                    'latest', CASE WHEN NULLIF(EXCLUDED.payload->>'latest', '') IS NOT NULL
                                    AND COALESCE((EXCLUDED.payload->>'latestAt')::bigint, 0) >= COALESCE(("SlackEffect".payload->>'latestAt')::bigint, 0)
                                   THEN EXCLUDED.payload->>'latest' ELSE COALESCE("SlackEffect".payload->>'latest', '') END,
                    'task', CASE WHEN NULLIF(EXCLUDED.payload->>'task', '') IS NOT NULL
                                  AND COALESCE((EXCLUDED.payload->>'taskAt')::bigint, 0) >= COALESCE(("SlackEffect".payload->>'taskAt')::bigint, 0)
                                 THEN EXCLUDED.payload->>'task' ELSE COALESCE("SlackEffect".payload->>'task', '') END,
                    'taskAt', GREATEST(COALESCE((EXCLUDED.payload->>'taskAt')::bigint, 0), COALESCE(("SlackEffect".payload->>'taskAt')::bigint, 0)),
                    'latestAt', GREATEST(COALESCE((EXCLUDED.payload->>'latestAt')::bigint, 0), COALESCE(("SlackEffect".payload->>'latestAt')::bigint, 0)),
                    'done', COALESCE((EXCLUDED.payload->>'done')::boolean, false) OR COALESCE(("SlackEffect".payload->>'done')::boolean, false))`,
                  // Spaced from its last update, whichever replica made it.
                  runAt: eb
                    .case()
                    .when(wasDue)
                    .then(eb.ref("SlackEffect.runAt"))
                    .else(sql<Date>`GREATEST(${runAt}, COALESCE("SlackEffect"."doneAt" + ${`${PROGRESS_SPACING_MS} milliseconds`}::interval, ${runAt}))`)
                    .end(),
                }
              : {
                  payload: eb.fn.coalesce("excluded.payload", "SlackEffect.payload"),
                  runAt: eb.case().when(wasDue).then(sql<Date>`LEAST("SlackEffect"."runAt", ${runAt})`).else(runAt).end(),
                }),
          };
        }),
      );
  const result = await query.executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
}

/**
 * Makes a one-time message held for later (never tried yet) due now, with the messages of its kind held
 * before it in its thread, so that it cannot overtake them (claimEffects lets a message held for later
 * be overtaken). A task message held for its review's controls (src/usecases/reviews.ts) goes at once
 * when the crew says it waits on it. Returns how many rows were moved.
 */
export async function hurryEffect(db: Sql, effect: Pick<NewEffect, "kind" | "subjectId" | "part">, now: Date): Promise<number> {
  const q = db;
  const result = await q
    .updateTable("SlackEffect as s")
    .set({ runAt: now, updatedAt: now })
    .where("s.state", "=", "due")
    .where("s.runAt", ">", now)
    .where("s.attempts", "=", 0)
    .where("s.kind", "=", effect.kind)
    .where((eb) =>
      eb.exists(
        eb
          .selectFrom("SlackEffect as t")
          .select(sql<number>`1`.as("one"))
          .where("t.key", "=", effectKey(effect))
          .where((inner) =>
            inner.or([inner("t.id", "=", inner.ref("s.id")), inner.and([inner("t.threadId", "=", inner.ref("s.threadId")), inner("t.seq", ">", inner.ref("s.seq"))])]),
          ),
      ),
    )
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/**
 * A claimed row, with the error its previous attempt left (or the in-flight mark of an attempt cut short),
 * and when it was enqueued (a post it makes is no older: the look-up after an interrupted attempt starts there).
 */
export type ClaimedEffect = Pick<EffectRow, "id" | "kind" | "subjectId" | "key" | "payload" | "attempts" | "generation" | "createdAt"> & { previousError: string | null };

export interface ClaimRequest {
  now: Date;
  limit: number;
  /** The claiming replica, and until when its claim holds. */
  owner: string;
  leaseUntil: Date;
  /** Written to lastError while the attempt is under way. */
  inFlightMark: string;
  /** Effects the claimer is performing already (never claimed twice by it, even past their lease). */
  exclude: readonly string[];
  /** A claim whose owner's heartbeat is older than this (or that stopped) is taken over before its lease runs out (src/store/replicas.ts). */
  deadBefore?: Date;
  /**
   * The kinds the claimer performs: another kind (written by a newer version during a rolling deploy)
   * is left to the replicas that know it, unless it was enqueued before `unknownBefore` (then it is
   * claimed, and given up).
   */
  kinds?: { known: readonly string[]; unknownBefore: Date };
}

/** What a person waits on first, progress last (EFFECT_KINDS[kind].priority; an unknown kind in the middle). */
const priorityOrder = (() => {
  const kindsOf = (p: number) => Object.entries(EFFECT_KINDS).flatMap(([kind, k]) => (k.priority === p ? [kind] : []));
  const list = (p: number) => sql.join(kindsOf(p).map((kind) => sql.lit(kind)));
  return sql<number>`CASE WHEN e.kind IN (${list(0)}) THEN 0 WHEN e.kind IN (${list(2)}) THEN 2 WHEN e.kind IN (${list(3)}) THEN 3 ELSE 1 END`;
})();

/** Effects that upload a file: a failing one holds its thread for two attempts only (claimEffects). */
const FILE_KINDS = Object.entries(EFFECT_KINDS)
  .filter(([, k]) => (k.calls as readonly string[]).includes("files.completeUploadExternal"))
  .map(([kind]) => kind);

/** Messages in a thread that a person waits on (priority 0): a review's post, a flow request's. */
const URGENT_THREAD_KINDS = Object.entries(EFFECT_KINDS)
  .filter(([, k]) => k.priority === 0 && k.thread !== null)
  .map(([kind]) => kind);

/**
 * Whether a message a person waits on is due behind this effect in its thread (so, since a thread
 * keeps its order, waits for it): a review's post not yet made, however long it has been held.
 */
export async function holdsUrgentMessage(db: Sql, effectId: string): Promise<boolean> {
  const behind = await db
    .selectFrom("SlackEffect as e")
    .innerJoin("SlackEffect as later", (join) => join.onRef("later.threadId", "=", "e.threadId").onRef("later.seq", ">", "e.seq"))
    .select("later.id")
    .where("e.id", "=", effectId)
    .where("later.state", "=", "due")
    .where("later.kind", "in", URGENT_THREAD_KINDS)
    .limit(1)
    .executeTakeFirst();
  return behind !== undefined;
}

/**
 * Claims up to `limit` due effects under a lease (FOR UPDATE SKIP LOCKED: replicas take disjoint
 * rows), counting the attempt, in order of priority (what a person waits on first, progress last;
 * src/domain/effects.ts), then of when they fell due.
 *
 * Order within a thread: a one-time message (threadId set) is not claimed while an earlier-enqueued
 * message of the same thread (lower seq, same threadId) is unfinished, that is still due and either
 * due now, in flight, or waiting for a retry (lastError set). Why: Slack shows a thread's replies in
 * the order they were posted, and the bot's messages tell a story (the reminder, then the escalation
 * after it; the review, then its file); claiming them in any order, or concurrently on two replicas,
 * would let a later one overtake an earlier one that is failing or slow. What does not hold a thread
 * up: done and given-up (dead) effects — a dead one is logged and lost, the rest go on — and a
 * message scheduled for later that has not yet been tried (it takes its place when due); repeatable
 * updates (review.show, run.progress…) have no thread and neither wait nor are waited for. A message
 * that keeps failing holds its thread until it succeeds or is given up (maxAttempts), never forever;
 * a file holds it only until its second attempt fails: an upload that Slack's file service keeps
 * refusing held the next review back for the whole of its retries (about 35 minutes). The file then
 * comes later in the thread, still below its review.
 */
export async function claimEffects(db: Sql, r: ClaimRequest): Promise<ClaimedEffect[]> {
  const q = db;
  const picked = q
    .selectFrom("SlackEffect as e")
    .select(["e.id", "e.lastError as previous"])
    .where("e.state", "=", "due")
    .where("e.runAt", "<=", r.now)
    .where((eb) => eb.or([eb("e.leaseOwner", "is", null), eb("e.leaseExpiresAt", "<", r.now), ...(r.deadBefore ? [ownerGone("e.leaseOwner", r.deadBefore)] : [])]))
    .$if(r.exclude.length > 0, (qb) => qb.where("e.id", "not in", r.exclude))
    .$if(!!r.kinds, (qb) => qb.where((eb) => eb.or([eb("e.kind", "in", r.kinds!.known), eb("e.createdAt", "<", r.kinds!.unknownBefore)])))
    .where((eb) =>
      eb.or([
        eb("e.threadId", "is", null),
        eb.not(
          eb.exists(
            eb
              .selectFrom("SlackEffect as earlier")
              .select(sql<number>`1`.as("one"))
              .whereRef("earlier.threadId", "=", "e.threadId")
              .whereRef("earlier.seq", "<", "e.seq")
              .where("earlier.state", "=", "due")
              // An effect of a kind the claimer leaves to a newer version holds no thread meanwhile.
              .$if(!!r.kinds, (qb) => qb.where((inner) => inner.or([inner("earlier.kind", "in", r.kinds!.known), inner("earlier.createdAt", "<", r.kinds!.unknownBefore)])))
              .where((inner): Expression<SqlBool> => inner.or([inner("earlier.runAt", "<=", r.now), inner("earlier.lastError", "is not", null)]))
              .where((inner) =>
                inner.not(inner.and([inner("earlier.kind", "in", FILE_KINDS), inner("earlier.attempts", ">=", 2), inner("earlier.lastError", "!=", r.inFlightMark)])),
              ),
          ),
        ),
      ]),
    )
    .orderBy(priorityOrder)
    .orderBy("e.runAt")
    .orderBy("e.seq")
    .limit(r.limit)
    .forUpdate()
    .skipLocked();
  return q
    .with("picked", () => picked)
    .updateTable("SlackEffect as s")
    .from("picked")
    .set((eb) => ({
      leaseOwner: r.owner,
      leaseExpiresAt: r.leaseUntil,
      attempts: eb("s.attempts", "+", 1),
      lastError: r.inFlightMark,
      updatedAt: r.now,
    }))
    .whereRef("s.id", "=", "picked.id")
    .returning(["s.id", "s.kind", "s.subjectId", "s.key", "s.payload", "s.attempts", "s.generation", "s.createdAt", "picked.previous as previousError"])
    .execute();
}

/**
 * Marks a performed effect done, if this claimer still holds it. Re-armed while it ran (its
 * generation moved on: a newer state to show), it stays due, to run again from the row. With
 * `again`, it stays due until then (a repeatable effect with more to do later).
 */
export async function completeEffect(db: Sql, done: { id: string; generation: number; owner: string; now: Date; again?: Date }): Promise<boolean> {
  const result = await db
    .updateTable("SlackEffect")
    .set((eb) => {
      const same = eb("generation", "=", done.generation);
      // More to do later (EffectOutcome.again): due again then, whatever was re-armed meanwhile.
      if (done.again) return { state: "due", attempts: 0, runAt: done.again, doneAt: done.now, updatedAt: done.now, leaseOwner: null, leaseExpiresAt: null, lastError: null };
      return {
        state: eb.case().when(same).then("done").else("due").end(),
        attempts: eb.case().when(same).then(eb.ref("attempts")).else(0).end(),
        // Progress re-armed while it was being shown goes again once spaced from this update, as when
        // it is re-armed after (enqueueEffect): its runAt was the one it was claimed at.
        runAt: eb
          .case()
          .when(eb.and([eb.not(same), eb("kind", "=", "run.progress")]))
          .then(sql<Date>`GREATEST("runAt", ${done.now}::timestamp(3) + ${`${PROGRESS_SPACING_MS} milliseconds`}::interval)`)
          .else(eb.ref("runAt"))
          .end(),
        doneAt: done.now,
        updatedAt: done.now,
        leaseOwner: null,
        leaseExpiresAt: null,
        lastError: null,
      };
    })
    .where("id", "=", done.id)
    .where("leaseOwner", "=", done.owner)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** Records a failed attempt, if this claimer still holds it: due again at `runAt`, or given up (dead). */
export async function failEffect(db: Sql, failure: { id: string; owner: string; giveUp: boolean; attempts: number; runAt: Date; error: string; now: Date }): Promise<boolean> {
  const result = await db
    .updateTable("SlackEffect")
    .set({
      state: failure.giveUp ? "dead" : "due",
      attempts: failure.attempts,
      runAt: failure.runAt,
      lastError: failure.error,
      leaseOwner: null,
      leaseExpiresAt: null,
      updatedAt: failure.now,
    })
    .where("id", "=", failure.id)
    .where("leaseOwner", "=", failure.owner)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** Deletes done effects finished before `doneBefore` and given-up ones last touched before `deadBefore`. */
export async function pruneEffects(db: Sql, before: { doneBefore: Date; deadBefore: Date }): Promise<number> {
  const result = await db
    .deleteFrom("SlackEffect")
    .where((eb) => eb.or([eb.and([eb("state", "=", "done"), eb("doneAt", "<", before.doneBefore)]), eb.and([eb("state", "=", "dead"), eb("updatedAt", "<", before.deadBefore)])]))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** Effects not done and not given up, all replicas, and when the oldest of them was enqueued. */
export async function countPendingEffects(db: Sql): Promise<{ count: number; oldest: Date | null }> {
  const row = await db
    .selectFrom("SlackEffect")
    .select((eb) => [eb.fn.countAll<string>().as("count"), eb.fn.min("createdAt").as("oldest")])
    .where("state", "=", "due")
    .executeTakeFirstOrThrow();
  return { count: Number(row.count), oldest: row.oldest ? new Date(row.oldest) : null };
}
