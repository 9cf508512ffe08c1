// The worker on a real database (embedded by default, PostgreSQL in the second pass), with a
// performer of its own: what becomes of effects that succeed, fail, cannot be done, or grow old.
import crypto from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import type { EffectJob } from "../domain/effects.js";
import { silentLogger } from "../log/log.js";
import { type SqlRunner, sqlRunnerFor } from "../store/db/sql.js";
import { enqueueEffect as enqueue } from "../store/effects.js";
import { sqlOf } from "../store/sql.js";
import { GiveUp } from "./failures.js";
import { OutboxWorker, type Performer } from "./worker.js";

let db: TestDatabase;
let sql: SqlRunner;
const clock = { at: new Date("2026-11-23T10:00:00.000Z"), now: () => clock.at };
const subject = "00000000-0000-4000-8000-0000000000a1";

beforeEach(async () => {
  db = await createTestDatabase();
  sql = sqlRunnerFor(db.database.prisma);
});
afterEach(async () => db.drop());

const rows = () =>
  sql.query<{ kind: string; state: string; attempts: number; lastError: string | null }>(`SELECT kind, state, attempts, "lastError" FROM "SlackEffect" ORDER BY kind`, []);
const worker = (perform: Performer) => new OutboxWorker(sql, perform, silentLogger, clock, { replicaId: "r1", minBackoffMs: 1000, maxBackoffMs: 4000 });

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

  it("merges one run's progress from several replicas: steps add up, and the text received last wins whatever order they are handed over in", async () => {
    await enqueue(sql, { kind: "run.progress", subjectId: subject, payload: { steps: 3, latest: "step 60 of 60", latestAt: 2000 } }, clock.at);
    // Another replica flushes an older step afterwards.
    await enqueue(sql, { kind: "run.progress", subjectId: subject, payload: { steps: 2, latest: "step 58 of 60", latestAt: 1000 } }, clock.at);
    // A handover with no new text (the final count) keeps the text.
    await enqueue(sql, { kind: "run.progress", subjectId: subject, payload: { steps: 0, latest: "", done: true } }, clock.at);
    const [row] = await sql.query<{ payload: Record<string, unknown> }>(`SELECT payload FROM "SlackEffect" WHERE kind = 'run.progress'`, []);
    expect(row!.payload).toMatchObject({ steps: 5, latest: "step 60 of 60", latestAt: 2000, done: true });
    await enqueue(sql, { kind: "run.progress", subjectId: subject, payload: { steps: 1, latest: "step 61", latestAt: 3000 } }, clock.at);
    const [later] = await sql.query<{ payload: Record<string, unknown> }>(`SELECT payload FROM "SlackEffect" WHERE kind = 'run.progress'`, []);
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
      const store = sqlOf(sql);
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
  });
});
