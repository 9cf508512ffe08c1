// The worker on a real database (embedded by default, PostgreSQL in the second pass), with a
// performer of its own: what becomes of effects that succeed, fail, cannot be done, or grow old.
import crypto from "node:crypto";
import { CompiledQuery } from "kysely";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { EFFECT_KINDS, type EffectJob } from "../domain/effects.js";
import { silentLogger } from "../log/log.js";
import { enqueueEffect as enqueue } from "../store/effects.js";
import { beat } from "../store/replicas.js";
import type { Sql } from "../store/sql.js";
import { Jobs } from "../usecases/jobs.js";
import { ReplicaHeartbeat } from "../usecases/replicas.js";
import { SlackBudget, type SlackGate } from "./budget.js";
import { GiveUp } from "./failures.js";
import { DEFAULT_OUTBOX_OPTIONS, effectCallTimeout, MOST_CALLS_PER_EFFECT, type OutboxEvents, type OutboxOptions, OutboxWorker, type Performer } from "./worker.js";

let db: TestDatabase;
let sql: Sql;
/** Rows of a statement written as text. */
const query = async <T = unknown>(text: string, values: unknown[] = []): Promise<T[]> => (await sql.executeQuery<T>(CompiledQuery.raw(text, values))).rows;
const clock = { at: new Date("2026-11-23T10:00:00.000Z"), now: () => clock.at };
const subject = "00000000-0000-4000-8000-0000000000a1";

beforeEach(async () => {
  db = await createTestDatabase();
  sql = db.database.sql;
});
afterEach(async () => db.drop());

const rows = () =>
  query<{ kind: string; state: string; attempts: number; lastError: string | null }>(`SELECT kind, state, attempts, "lastError" FROM "SlackEffect" ORDER BY kind`, []);
const worker = (perform: Performer, options: Partial<OutboxOptions> = {}, events: OutboxEvents = {}) =>
  new OutboxWorker({ db: sql, perform, log: silentLogger, clock, options: { replicaId: "r1", minBackoffMs: 1000, maxBackoffMs: 4000, ...options }, events });

describe("outbox worker", () => {
  it("performs what is due once, retries a failure after its backoff, and gives up what cannot be done", async () => {
    await enqueue(sql, { kind: "run.announcement", subjectId: subject }, clock.at);
    await enqueue(sql, { kind: "run.file", subjectId: subject }, clock.at);
    await enqueue(sql, { kind: "run.completion", subjectId: subject }, clock.at);
    const seen: string[] = [];
    let fileFails = 1;
    const w = worker(async (job: EffectJob) => {
      seen.push(job.kind);
      if (job.kind === "run.completion") throw new GiveUp("its run no longer exists");
      if (job.kind === "run.file" && fileFails-- > 0) throw Object.assign(new Error("503"), { code: "slack_webapi_http_error", statusCode: 503 });
      return undefined;
    });
    expect(await w.runDue()).toBe(3);
    expect(await rows()).toEqual([
      { kind: "run.announcement", state: "done", attempts: 1, lastError: null },
      { kind: "run.completion", state: "dead", attempts: 1, lastError: "its run no longer exists" },
      { kind: "run.file", state: "due", attempts: 1, lastError: "(may have reached Slack) HTTP 503" },
    ]);
    // Not before its backoff; then once more, told the first attempt may have reached Slack.
    expect(await w.runDue()).toBe(0);
    clock.at = new Date(clock.at.getTime() + 1500);
    let interrupted: boolean | undefined;
    const again = worker(async (job) => {
      interrupted = job.interrupted;
      return undefined;
    });
    expect(await again.runDue()).toBe(1);
    expect(interrupted).toBe(true);
    expect((await rows()).find((r) => r.kind === "run.file")).toMatchObject({ state: "done", attempts: 2 });
    expect(seen).toEqual(expect.arrayContaining(["run.announcement", "run.file", "run.completion"]));
  });

  it("leaves an effect of a kind it does not know (a newer version's, in a rolling deploy) to the replicas that do, for a day", async () => {
    // As a newer version writes it (this one's enqueueEffect knows no such kind).
    // In the run's thread: the run's later messages do not wait for it.
    await query(`INSERT INTO "SlackEffect" (id, kind, "subjectId", key, "runAt", "createdAt", "updatedAt", "threadId") VALUES ($1, 'run.future', $2, $3, $4, $4, $4, $2)`, [
      crypto.randomUUID(),
      subject,
      `run.future:${subject}`,
      clock.at,
    ]);
    await enqueue(sql, { kind: "run.message", subjectId: subject, part: "after", payload: { text: "later" } }, clock.at);
    const seen: string[] = [];
    const w = worker(async (job: EffectJob) => void seen.push(job.kind));
    expect(await w.runDue()).toBe(1);
    expect(seen).toEqual(["run.message"]);
    expect((await rows()).find((r) => r.kind === "run.future")).toEqual({ kind: "run.future", state: "due", attempts: 0, lastError: null });
    // A day on, no version performed it: given up, said why.
    clock.at = new Date(clock.at.getTime() + 24 * 3600_000 + 1000);
    expect(await w.runDue()).toBe(0);
    expect((await rows()).find((r) => r.kind === "run.future")).toMatchObject({ state: "dead", lastError: "unknown effect kind run.future" });
  });

  it("a post still under way when its replica stops is not taken over at once, so the replica taking it over later finds it posted", async () => {
    const at = () => new Date();
    await beat(sql, "r2", at());
    await enqueue(sql, { kind: "review.post", subjectId: subject }, at());
    const posted: string[] = [];
    let started = false;
    // r1's effect makes two slow calls (a look-up, then the post), longer together than the outbox's drain on stop.
    const slow: Performer = async () => {
      started = true;
      await new Promise((r) => setTimeout(r, 600));
      await new Promise((r) => setTimeout(r, 600));
      posted.push("r1");
      return undefined;
    };
    // r2 looks for the message first (an interrupted attempt) and posts only if it is not there.
    const lookFirst: Performer = async (job) => {
      if (!(job.interrupted && posted.length > 0)) posted.push("r2");
      return undefined;
    };
    const r1 = new ReplicaHeartbeat({ db: sql, replicaId: "r1", log: silentLogger, options: { deadAfterMs: 8000 } });
    const a = new OutboxWorker({ db: sql, perform: slow, log: silentLogger, clock: { now: at }, options: { replicaId: "r1", budget: false } });
    const b = new OutboxWorker({ db: sql, perform: lookFirst, log: silentLogger, clock: { now: at }, options: { replicaId: "r2", budget: false, deadAfterMs: 8000 } });
    // As src/root/jobs.ts lists them: the heartbeat first (stopped last), then the outbox, drained briefly here.
    const jobs = new Jobs(silentLogger, [
      { name: "heartbeat", loop: { start: () => r1.start(), stop: () => r1.stop({ keepClaims: a.busy }) } },
      { name: "outbox", loop: a, drain: () => a.idle(), drainMs: 300 },
    ]);
    await jobs.start();
    while (!started) await new Promise((r) => setTimeout(r, 10));
    await jobs.stop();
    // r1 still calls Slack: r2 takes nothing over while r1's heartbeat is fresh.
    expect(await b.runDue()).toBe(0);
    await a.idle();
    expect(posted).toEqual(["r1"]);
    expect((await rows())[0]).toMatchObject({ kind: "review.post", state: "done", attempts: 1 });
  });

  it("works through a backlog larger than its concurrency as slots come free, not one batch per tick", async () => {
    for (let i = 0; i < 6; i++) await enqueue(sql, { kind: "run.announcement", subjectId: crypto.randomUUID() }, clock.at);
    let performed = 0;
    const w = worker(
      async () => {
        await new Promise((r) => setTimeout(r, 30));
        performed++;
        return undefined;
      },
      { concurrency: 2, tickMs: 60_000, budget: false },
    );
    w.start();
    try {
      // Three batches of two, each claimed when the one before ends: within seconds, never a tick of a minute.
      const deadline = Date.now() + 10_000;
      while (performed < 6 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(performed).toBe(6);
    } finally {
      w.stop();
      await w.idle();
    }
  });

  it("hands each job the time its effect was enqueued (a look-up for an interrupted post starts there), whenever it is tried", async () => {
    const enqueuedAt = new Date(clock.at);
    await enqueue(sql, { kind: "review.post", subjectId: subject }, enqueuedAt);
    clock.at = new Date(clock.at.getTime() + 60_000);
    const created: unknown[] = [];
    const w = worker(async (job) => {
      created.push(job.createdAt);
      if (created.length === 1) throw Object.assign(new Error("503"), { code: "slack_webapi_http_error", statusCode: 503 });
      return undefined;
    });
    expect(await w.runDue()).toBe(1);
    clock.at = new Date(clock.at.getTime() + 10_000);
    expect(await w.runDue()).toBe(1);
    expect(created).toEqual([enqueuedAt, enqueuedAt]);
  });

  it("gives each Slack call a time-out that lets an effect's calls all end within its claim, however long the lease", () => {
    for (const configured of [100, 800, 1500, 6000, 30_000, 60_000, 600_000]) {
      const { timeoutMs, leaseMs } = effectCallTimeout(configured);
      // The calls, each timing out, leave a fifth of the claim for the database: no other replica takes it meanwhile.
      expect(timeoutMs * MOST_CALLS_PER_EFFECT, `lease ${configured}`).toBeLessThanOrEqual(leaseMs * 0.8);
      expect(leaseMs).toBeGreaterThanOrEqual(configured);
      expect(timeoutMs).toBeGreaterThanOrEqual(1000);
    }
    // The default lease: 12 s a call (four calls in four fifths of 60 s), the lease as configured.
    expect(effectCallTimeout(DEFAULT_OUTBOX_OPTIONS.leaseMs)).toEqual({ timeoutMs: 12_000, leaseMs: 60_000 });
  });

  it("keeps an attempt that may have reached Slack marked through the failures after it, until a post succeeds", async () => {
    await enqueue(sql, { kind: "review.post", subjectId: subject }, clock.at);
    const unanswered = () => Object.assign(new Error("socket hang up"), { code: "slack_webapi_request_error" });
    const limited = () => Object.assign(new Error("rate limited"), { code: "slack_webapi_rate_limited_error", retryAfter: 1 });
    const refused = () => Object.assign(new Error("message_not_found"), { code: "slack_webapi_platform_error", data: { error: "message_not_found" } });
    // The post gets no answer; the look-ups before the next posts are rate limited, then refused (no outage).
    const failures = [unanswered, limited, refused];
    const told: boolean[] = [];
    const w = worker(
      async (job) => {
        told.push(job.interrupted);
        const fail = failures.shift();
        if (fail) throw fail();
        return undefined;
      },
      { budget: false },
    );
    for (let i = 0; i < 4; i++) {
      expect(await w.runDue()).toBe(1);
      clock.at = new Date(clock.at.getTime() + 10_000);
    }
    // Every attempt after the unanswered post looked first, not only the one right after it.
    expect(told).toEqual([false, true, true, true]);
    expect((await rows())[0]).toMatchObject({ kind: "review.post", state: "done" });
  });

  it("never gives up what a person waits on while Slack is down (a 5xx, no answer, internal_error), but gives up the rest, and a refusal, after maxAttempts", async () => {
    const review = "00000000-0000-4000-8000-0000000000b1";
    await enqueue(sql, { kind: "review.post", subjectId: review }, clock.at);
    await enqueue(sql, { kind: "run.file", subjectId: subject }, clock.at);
    const down = [
      () => Object.assign(new Error("503"), { code: "slack_webapi_http_error", statusCode: 503 }),
      () => Object.assign(new Error("socket hang up"), { code: "slack_webapi_request_error" }),
      () => Object.assign(new Error("internal_error"), { code: "slack_webapi_platform_error", data: { error: "internal_error" } }),
    ];
    let calls = 0;
    const w = worker(
      async () => {
        throw down[calls++ % down.length]!();
      },
      { maxAttempts: 3 },
    );
    for (let i = 0; i < 8; i++) {
      await w.runDue();
      clock.at = new Date(clock.at.getTime() + 5000);
    }
    expect(await rows()).toEqual([
      { kind: "review.post", state: "due", attempts: 8, lastError: expect.any(String) },
      { kind: "run.file", state: "dead", attempts: 3, lastError: expect.any(String) },
    ]);
    // Slack back: the review goes.
    expect(await worker(async () => undefined).runDue()).toBe(1);
    expect((await rows())[0]).toMatchObject({ kind: "review.post", state: "done" });
    // A refusal that is no outage (here a message gone) is given up after maxAttempts even for a review.
    await enqueue(sql, { kind: "review.show", subjectId: review }, clock.at);
    const gone = worker(
      async () => {
        throw Object.assign(new Error("message_not_found"), { code: "slack_webapi_platform_error", data: { error: "message_not_found" } });
      },
      { maxAttempts: 2 },
    );
    for (let i = 0; i < 3; i++) {
      await gone.runDue();
      clock.at = new Date(clock.at.getTime() + 5000);
    }
    expect((await rows()).find((r) => r.kind === "review.show")).toMatchObject({ state: "dead", attempts: 2 });
  });

  it("keeps a repeatable effect that has more to do later (again) due until then, re-armed or not, and records what it did meanwhile", async () => {
    await enqueue(sql, { kind: "run.progress", subjectId: subject, payload: { steps: 1, latest: "a" } }, clock.at);
    const recorded: number[] = [];
    let rounds = 0;
    const w = worker(async () => {
      rounds++;
      // A step handed over while it runs re-arms it: it must not run again before `again` for that.
      if (rounds === 1) await enqueue(sql, { kind: "run.progress", subjectId: subject, payload: { steps: 1, latest: "b" } }, clock.at);
      return rounds < 3 ? { record: async () => void recorded.push(rounds), again: new Date(clock.at.getTime() + 5000) } : undefined;
    });
    expect(await w.runDue()).toBe(1);
    const state = async () => (await query<{ state: string; runAt: Date; attempts: number }>(`SELECT state, "runAt", attempts FROM "SlackEffect"`))[0]!;
    expect(await state()).toMatchObject({ state: "due", attempts: 0 });
    expect(new Date((await state()).runAt).getTime()).toBe(clock.at.getTime() + 5000);
    expect(await w.runDue()).toBe(0);
    clock.at = new Date(clock.at.getTime() + 5000);
    expect(await w.runDue()).toBe(1);
    clock.at = new Date(clock.at.getTime() + 5000);
    expect(await w.runDue()).toBe(1);
    expect(recorded).toEqual([1, 2]);
    expect((await state()).state).toBe("done");
  });

  it("merges one run's progress from several replicas: steps add up, and the text received last wins whatever order they are handed over in", async () => {
    await enqueue(sql, { kind: "run.progress", subjectId: subject, payload: { steps: 3, latest: "step 60 of 60", latestAt: 2000 } }, clock.at);
    // Another replica flushes an older step afterwards.
    await enqueue(sql, { kind: "run.progress", subjectId: subject, payload: { steps: 2, latest: "step 58 of 60", latestAt: 1000 } }, clock.at);
    // A handover with no new text (the final count) keeps the text.
    await enqueue(sql, { kind: "run.progress", subjectId: subject, payload: { steps: 0, latest: "", done: true } }, clock.at);
    const [row] = await query<{ payload: Record<string, unknown> }>(`SELECT payload FROM "SlackEffect" WHERE kind = 'run.progress'`, []);
    expect(row!.payload).toMatchObject({ steps: 5, latest: "step 60 of 60", latestAt: 2000, done: true });
    await enqueue(sql, { kind: "run.progress", subjectId: subject, payload: { steps: 1, latest: "step 61", latestAt: 3000 } }, clock.at);
    const [later] = await query<{ payload: Record<string, unknown> }>(`SELECT payload FROM "SlackEffect" WHERE kind = 'run.progress'`, []);
    expect(later!.payload).toMatchObject({ steps: 6, latest: "step 61", latestAt: 3000 });
  });

  it("deletes done effects after a week and given-up ones after 30 days, never what is due", async () => {
    await enqueue(sql, { kind: "run.announcement", subjectId: subject }, clock.at);
    await enqueue(sql, { kind: "run.completion", subjectId: subject }, clock.at);
    const w = worker(async (job) => {
      if (job.kind === "run.completion") throw new GiveUp("gone");
      return undefined;
    });
    await w.runDue();
    await enqueue(sql, { kind: "run.file", subjectId: subject }, clock.at);
    clock.at = new Date(clock.at.getTime() + 8 * 24 * 3600_000);
    expect(await w.prune()).toBe(1);
    expect((await rows()).map((r) => `${r.kind}:${r.state}`)).toEqual(["run.completion:dead", "run.file:due"]);
    clock.at = new Date(clock.at.getTime() + 30 * 24 * 3600_000);
    expect(await w.prune()).toBe(1);
    expect((await rows()).map((r) => `${r.kind}:${r.state}`)).toEqual(["run.file:due"]);
  });

  describe("the messages of one thread", () => {
    const run = "00000000-0000-4000-8000-0000000000b1";
    const otherRun = "00000000-0000-4000-8000-0000000000b2";
    const unavailable = () => Object.assign(new Error("503"), { code: "slack_webapi_http_error", statusCode: 503 });
    const message = (subjectId: string, part: string) => enqueue(sql, { kind: "run.message", subjectId, part, payload: { text: part } }, clock.at);
    const text = (job: EffectJob) => `${job.subjectId === run ? "" : "other:"}${String(job.payload?.text ?? job.kind)}`;

    it("are posted in the order they were enqueued: a later one waits while an earlier one is retried", async () => {
      await message(run, "first");
      await message(run, "second");
      await message(otherRun, "elsewhere");
      // A repeatable update of the same run neither waits nor is waited for.
      await enqueue(sql, { kind: "run.progress", subjectId: run, payload: { steps: 1 } }, clock.at);
      const posted: string[] = [];
      let firstFails = 1;
      const w = worker(async (job) => {
        if (text(job) === "first" && firstFails-- > 0) throw unavailable();
        posted.push(text(job));
        return undefined;
      });
      expect(await w.runDue()).toBe(3);
      expect(posted.sort()).toEqual(["other:elsewhere", "run.progress"]);
      // The first is waiting for its retry: the second is not claimed meanwhile.
      expect(await w.runDue()).toBe(0);
      clock.at = new Date(clock.at.getTime() + 1500);
      expect(await w.runDue()).toBe(1);
      expect(posted.slice(2)).toEqual(["first"]);
      expect(await w.runDue()).toBe(1);
      expect(posted.slice(3)).toEqual(["second"]);
    });

    it("are not held up by an earlier one given up, nor by one scheduled for later", async () => {
      await message(run, "first");
      await enqueue(sql, { kind: "run.message", subjectId: otherRun, part: "later", payload: { text: "later" }, runAt: new Date(clock.at.getTime() + 60_000) }, clock.at);
      await message(run, "second");
      await message(otherRun, "now");
      const posted: string[] = [];
      const w = worker(async (job) => {
        if (text(job) === "first") throw new GiveUp("its run no longer exists");
        posted.push(text(job));
        return undefined;
      });
      expect(await w.runDue()).toBe(2);
      expect(posted).toEqual(["other:now"]);
      expect(await w.runDue()).toBe(1);
      expect(posted).toEqual(["other:now", "second"]);
      expect((await rows()).filter((r) => r.state === "dead")).toHaveLength(1);
    });

    it("of a review are ordered with the other messages of its run's thread", async () => {
      const store = sql;
      const execution = { id: crypto.randomUUID() };
      const review = { id: crypto.randomUUID() };
      await store
        .insertInto("Execution")
        .values({ ...execution, crewName: "c", teamId: "T1", channelId: "C1", userId: "U1", inputs: "{}", requestId: "req-1", webhookSecret: "s", updatedAt: clock.at })
        .execute();
      await store
        .insertInto("Review")
        .values({ ...review, executionId: execution.id, taskKey: "t", taskName: "t", round: 1, output: "o", outputHash: "h", updatedAt: clock.at })
        .execute();
      await enqueue(sql, { kind: "review.reminder", subjectId: review.id, part: 1, payload: { text: "reminder" } }, clock.at);
      await message(execution.id, "escalation");
      const posted: string[] = [];
      let reminderFails = 1;
      const w = worker(async (job) => {
        if (job.kind === "review.reminder" && reminderFails-- > 0) throw unavailable();
        posted.push(String(job.payload?.text));
        return undefined;
      });
      expect(await w.runDue()).toBe(1);
      expect(await w.runDue()).toBe(0);
      clock.at = new Date(clock.at.getTime() + 1500);
      expect(await w.runDue()).toBe(1);
      expect(await w.runDue()).toBe(1);
      expect(posted).toEqual(["reminder", "escalation"]);
    });

    it("are held up by a file that keeps failing only until its second attempt failed: the next message goes, the file comes later", async () => {
      await enqueue(sql, { kind: "run.file", subjectId: run, payload: { text: "the output as a file" } }, clock.at);
      await message(run, "the next review");
      const posted: string[] = [];
      const w = worker(async (job) => {
        if (job.kind === "run.file") throw unavailable();
        posted.push(text(job));
        return undefined;
      });
      expect(await w.runDue()).toBe(1);
      // One failure: the file is retried first.
      clock.at = new Date(clock.at.getTime() + 1500);
      expect(await w.runDue()).toBe(1);
      expect(posted).toEqual([]);
      // Two: the next message goes while the file keeps trying.
      clock.at = new Date(clock.at.getTime() + 500);
      expect(await w.runDue()).toBe(1);
      expect(posted).toEqual(["the next review"]);
      expect((await rows()).find((r) => r.kind === "run.file")).toMatchObject({ state: "due", attempts: 2 });
    });
  });

  describe("Slack's budget", () => {
    const ids = (n: number) => Array.from({ length: n }, (_, i) => `00000000-0000-4000-8000-0000000000c${i}`);
    const [s1, s2, s3, s4] = ids(4) as [string, string, string, string];
    const later = (ms: number) => {
      clock.at = new Date(clock.at.getTime() + ms);
    };
    /**
     * A performer that asks the budget for its kind's last call in the workspace named in its payload, as perform.ts does.
     * Progress updates its message (chat.update, where Slack refuses streaming), competing with reviews for the tier.
     */
    const slack = (performed: string[], fail?: (job: EffectJob) => unknown): Performer => {
      return async (job: EffectJob, gate?: SlackGate) => {
        const calls = job.kind === "run.progress" ? ["chat.update"] : EFFECT_KINDS[job.kind].calls;
        await gate?.({ team: String(job.payload?.team ?? "T1"), channel: "C1", method: calls[calls.length - 1]! });
        performed.push(`${job.kind} ${String(job.payload?.name)}`);
        const err = fail?.(job);
        if (err) throw err;
        return undefined;
      };
    };
    const rateLimited = (seconds: number) => Object.assign(new Error("rate limited"), { code: "slack_webapi_rate_limited_error", retryAfter: seconds });
    const effect = (kind: "run.announcement" | "run.started" | "run.progress" | "review.show", subjectId: string, name: string, team = "T1") =>
      enqueue(sql, { kind, subjectId, payload: { team, name } }, clock.at);
    const row = async (subjectId: string) =>
      (await query<{ state: string; attempts: number; runAt: Date }>(`SELECT state, attempts, "runAt" FROM "SlackEffect" WHERE "subjectId" = $1`, [subjectId]))[0]!;

    it("a 429 with Retry-After pauses that method for the whole workspace, for every effect, and no other workspace", async () => {
      await effect("run.announcement", s1, "a", "T1");
      await effect("run.announcement", s2, "b", "T1");
      await effect("run.announcement", s3, "c", "T2");
      const performed: string[] = [];
      let limited = 1;
      const w = worker(
        slack(performed, (job) => (job.payload?.name === "a" && limited-- > 0 ? rateLimited(5) : undefined)),
        { concurrency: 1 },
      );
      expect(await w.runDue()).toBe(1); // a: 429, Retry-After 5 s
      expect(await w.runDue()).toBe(1); // b: chat.update is paused in T1: put back, not performed
      expect(await w.runDue()).toBe(1); // c: another workspace goes
      expect(performed).toEqual(["run.announcement a", "run.announcement c"]);
      expect(await row(s2)).toMatchObject({ state: "due", attempts: 0 });
      expect(new Date((await row(s2)).runAt).getTime()).toBe(clock.at.getTime() + 5000);
      expect(await w.runDue()).toBe(0);
      later(4900);
      expect(await w.runDue()).toBe(0);
      later(100);
      expect(await w.runDue()).toBe(1);
      expect(await w.runDue()).toBe(1);
      expect(performed.slice(2).sort()).toEqual(["run.announcement a", "run.announcement b"]);
      expect((await rows()).every((r) => r.state === "done")).toBe(true);
    });

    it("a 429 in an effect of several calls pauses each method it took a token for (which one Slack refused is not known)", async () => {
      const file = "00000000-0000-4000-8000-0000000000d1";
      await enqueue(sql, { kind: "run.file", subjectId: file, payload: { name: "f" } }, clock.at);
      let limited = 1;
      const w = worker(async (job: EffectJob, gate?: SlackGate) => {
        for (const method of EFFECT_KINDS[job.kind].calls) await gate?.({ team: "T1", channel: "C1", method });
        if (limited-- > 0) throw rateLimited(5);
        return undefined;
      });
      expect(await w.runDue()).toBe(1);
      // Both of the file's methods wait out the Retry-After, for any effect of the workspace.
      const budget = new SlackBudget(sql);
      for (const method of EFFECT_KINDS["run.file"].calls)
        expect(await budget.take({ team: "T1", channel: "C1", method }, 1, clock.at)).toEqual({ ok: false, retryAt: new Date(clock.at.getTime() + 5000) });
    });

    it("under a tight budget a review becoming decidable goes before queued progress, and finds the tokens progress leaves it", async () => {
      const tight = { budget: { headroom: 0, tiers: { ...TIGHT } }, concurrency: 1 };
      await effect("run.progress", s1, "p1");
      await effect("run.progress", s2, "p2");
      await effect("run.progress", s3, "p3");
      await effect("review.show", s4, "r1");
      const performed: string[] = [];
      const waits: string[] = [];
      const w = worker(slack(performed), tight, { deferred: (kind, method) => waits.push(`${kind} ${method}`) });
      while ((await w.runDue()) > 0);
      // Three tokens: the review first (claimed first), one progress update, and one left for what a person waits on.
      expect(performed).toEqual(["review.show r1", "run.progress p1"]);
      // Each refusal is counted (crewline_slack_budget_waits_total), by the method that waits.
      expect(waits).toEqual(["run.progress chat.update", "run.progress chat.update"]);
      const waiting = [await row(s2), await row(s3)];
      expect(waiting.map((r) => [r.state, r.attempts])).toEqual([
        ["due", 0],
        ["due", 0],
      ]);
      // Progress refused waits longer than the token would take: fewer, later updates.
      for (const r of waiting) expect(new Date(r.runAt).getTime()).toBeGreaterThanOrEqual(clock.at.getTime() + 4000);
      await effect("review.show", "00000000-0000-4000-8000-0000000000d1", "r2");
      while ((await w.runDue()) > 0);
      expect(performed).toEqual(["review.show r1", "run.progress p1", "review.show r2"]);
    });

    it("the announcement's kickoff id (run.started) goes after progress, and only from an all but full bucket", async () => {
      // chat.update with a bucket of 7 and a token every 10 s: progress may take 4, the idle priority only the first 2.
      const idle = { budget: { headroom: 0, tiers: { ...TIGHT, tier3: { perMinute: 6, burst: 7, scope: "workspace" as const } } }, concurrency: 1 };
      await effect("run.started", s4, "kickoff id");
      await effect("run.progress", s1, "p1");
      await effect("run.progress", s2, "p2");
      await effect("run.progress", s3, "p3");
      const performed: string[] = [];
      const w = worker(slack(performed), idle);
      while ((await w.runDue()) > 0);
      expect(performed).toEqual(["run.progress p1", "run.progress p2", "run.progress p3"]);
      expect(await row(s4)).toMatchObject({ state: "due", attempts: 0 });
      later(20_000);
      while ((await w.runDue()) > 0);
      expect(performed.at(-1)).toBe("run.started kickoff id");
    });

    it("counts a refused token even when the effect waits for it in another way than being put back", async () => {
      for (const [i, id] of ids(3).entries()) await effect("run.announcement", id, `n${i}`);
      const waits: string[] = [];
      const performed: string[] = [];
      // Like a live plan whose start is refused: it shows its steps meanwhile and is done for now.
      const patient: Performer = async (job, gate) => {
        await gate?.({ team: "T1", channel: "C1", method: "chat.update" }).catch(() => undefined);
        performed.push(String(job.payload?.name));
        return undefined;
      };
      const w = worker(patient, { budget: { headroom: 0, tiers: { ...TIGHT } }, concurrency: 1 }, { deferred: (kind, method) => waits.push(`${kind} ${method}`) });
      while ((await w.runDue()) > 0);
      expect(performed).toEqual(["n0", "n1", "n2"]);
      // Notices leave one token of three to what a person waits on: the third was refused.
      expect(waits).toEqual(["run.announcement chat.update"]);
      expect((await rows()).every((r) => r.state === "done")).toBe(true);
    });

    it("a call in a Slack request's own answer waits a moment for its token, then goes and is counted: the outbox's calls wait for it", async () => {
      const budget = new SlackBudget(sql, { headroom: 0, tiers: { ...TIGHT } });
      const call = { team: "T1", channel: "C1", method: "chat.postMessage" };
      for (let i = 0; i < 3; i++) expect((await budget.take(call, 0, clock.at)).ok).toBe(true);
      const refused = await budget.take(call, 0, clock.at);
      if (refused.ok) throw new Error("the bucket of three should be empty");
      // Its token is 10 s away, more than it may wait: it goes now, in debt.
      await budget.spendNow(call, 0, { now: () => clock.at }, 50);
      expect(await budget.take(call, 0, clock.at)).toEqual({ ok: false, retryAt: new Date(refused.retryAt.getTime() + 10_000) });
    });

    it("a refusal says when the token will be there, and a paused method when its pause ends, whichever is later", async () => {
      const budget = new SlackBudget(sql, { headroom: 0, tiers: { ...TIGHT } });
      const call = { team: "T1", method: "chat.update" };
      for (let i = 0; i < 3; i++) expect((await budget.take(call, 0, clock.at)).ok).toBe(true);
      // Three taken at once from a bucket of three at 6 a minute: the next is one interval away.
      expect(await budget.take(call, 0, clock.at)).toEqual({ ok: false, retryAt: new Date(clock.at.getTime() + 10_000) });
      await budget.pause(call, 30_000, clock.at);
      expect(await budget.take(call, 0, clock.at)).toEqual({ ok: false, retryAt: new Date(clock.at.getTime() + 30_000) });
      // A method never used in the workspace, paused: refused until the pause ends.
      const fresh = { team: "T2", channel: "C9", method: "chat.postMessage" };
      await budget.pause(fresh, 5_000, clock.at);
      expect(await budget.take(fresh, 0, clock.at)).toEqual({ ok: false, retryAt: new Date(clock.at.getTime() + 5_000) });
      expect((await budget.take(fresh, 0, new Date(clock.at.getTime() + 5_000))).ok).toBe(true);
    });

    it("a live plan's start is what a person waits on: progress's effect takes the tokens progress would leave", async () => {
      const budget = new SlackBudget(sql, { headroom: 0, tiers: { ...TIGHT } });
      const start = { team: "T1", method: "chat.startStream" };
      // A bucket of three: progress leaves one, so its second call waits; a plan's start takes it.
      expect((await budget.take(start, 2, clock.at)).ok).toBe(true);
      expect((await budget.take(start, 2, clock.at)).ok).toBe(true);
      expect((await budget.take(start, 2, clock.at)).ok).toBe(false);
      expect((await budget.take({ ...start, waitedOn: true }, 2, clock.at)).ok).toBe(true);
    });

    it("progress overdue takes its token as a notice: it leaves one to what a person waits on, not half the bucket", async () => {
      const budget = new SlackBudget(sql, { headroom: 0, tiers: { ...TIGHT, tier3: { perMinute: 6, burst: 5, scope: "workspace" } } });
      const refresh = { team: "T1", method: "chat.update" };
      // A bucket of five: progress leaves two, so its fourth call waits; overdue, it takes the fourth, not the last.
      for (let i = 0; i < 3; i++) expect((await budget.take(refresh, 2, clock.at)).ok).toBe(true);
      expect((await budget.take(refresh, 2, clock.at)).ok).toBe(false);
      expect((await budget.take({ ...refresh, overdue: true }, 2, clock.at)).ok).toBe(true);
      expect((await budget.take({ ...refresh, overdue: true }, 2, clock.at)).ok).toBe(false);
      expect((await budget.take(refresh, 0, clock.at)).ok).toBe(true);
    });

    it("is shared by replicas: two workers on one database spend from one bucket", async () => {
      for (const [i, id] of ids(4).entries()) await effect("run.announcement", id, `n${i}`);
      const performed: string[] = [];
      const options = { budget: { headroom: 0, tiers: { ...TIGHT } } };
      const one = worker(slack(performed), { ...options, replicaId: "r1" });
      const two = worker(slack(performed), { ...options, replicaId: "r2" });
      await Promise.all([one.runDue(), two.runDue()]);
      await Promise.all([one.runDue(), two.runDue()]);
      // Tier 3 squeezed to a bucket of 3: notices leave one token to what a person waits on.
      expect(performed).toHaveLength(2);
      later(10_000);
      await Promise.all([one.runDue(), two.runDue()]);
      expect(performed).toHaveLength(3);
    });
  });
});

/** Slack's tiers squeezed so that a test sees the budget run short: chat.update 6 a minute, 3 at once. */
const TIGHT = {
  tier2: { perMinute: 6, burst: 3, scope: "workspace" as const },
  tier3: { perMinute: 6, burst: 3, scope: "workspace" as const },
  tier4: { perMinute: 6, burst: 3, scope: "workspace" as const },
  post: { perMinute: 6, burst: 3, scope: "channel" as const },
};
