import crypto from "node:crypto";
import { CompiledQuery } from "kysely";
// What a review post records, on a real database: a fresh post shows the state it was made in; a
// message found again after an interrupted attempt shows the state of that attempt, unknown here, so
// it is brought up to date with a review.show. A thread reply is handed to Slack as the facts its
// use case enqueued, or as the words an earlier version stored. The announcement's live render
// (run.started) never leaves a stopped run's announcement showing it live. While a live plan waits for
// its Slack token, the message that shows the run's latest step is refreshed when its refresh is due,
// and a refresh refused its token is tried again when overdue, then as a notice. A notice asking for a
// decision is dropped once its review was decided or its run ended; one saying what happened is not.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { prismaOf } from "../../test/support/prisma.js";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { EFFECT_KINDS, type EffectJob } from "../domain/effects.js";
import { EARLY_PROGRESS_OVERDUE_MS, EARLY_PROGRESS_REFRESH_MS } from "../domain/plan.js";
import { silentLogger } from "../log/log.js";
import { enqueueEffect } from "../store/effects.js";
import type { Sql } from "../store/sql.js";
import { inTransaction } from "../store/sql.js";
import type { FlowNotifier, RunNotifier } from "../usecases/ports.js";
import { BudgetWait, SlackBudget, type SlackGate } from "./budget.js";
import { slackEffectPerformer } from "./perform.js";
import { OutboxWorker } from "./worker.js";

let db: TestDatabase;
let sql: Sql;
/** Rows of a statement written as text. */
const query = async <T = unknown>(text: string, values: unknown[] = []): Promise<T[]> => (await sql.executeQuery<T>(CompiledQuery.raw(text, values))).rows;

beforeEach(async () => {
  db = await createTestDatabase();
  sql = db.database.sql;
});
afterEach(async () => db.drop());

/** A run with a thread in channel C1 of T1; `data` sets the rest (its state, its stream, its early message). */
function runRow(data: Record<string, unknown>) {
  return prismaOf(db.database).execution.create({
    data: { crewName: "research", teamId: "T1", channelId: "C1", userId: "U1", inputs: {}, state: "running", requestId: "r", webhookSecret: "s", threadTs: "100.000", ...data },
  });
}

async function pendingReview(): Promise<string> {
  const execution = await runRow({ state: "waiting" });
  const review = await prismaOf(db.database).review.create({
    data: { executionId: execution.id, taskKey: "t1", taskName: "draft", round: 1, output: "text", outputHash: "h", state: "pending" },
  });
  return review.id;
}

function notifier(found: string | undefined, posts: string[]): RunNotifier {
  return {
    findPosted: async () => found,
    postReview: async () => {
      posts.push("post");
      return { ts: "200.000" };
    },
    reviewFiles: () => ({ output: false, diff: false }),
    postThreadNotice: async (_e, notice) => void posts.push(JSON.stringify(notice)),
  } as Partial<RunNotifier> as RunNotifier;
}

/** When the effects below were enqueued (a look-up for an interrupted post starts about then). */
const ENQUEUED = new Date("2026-11-23T09:59:00.000Z");

const job = (reviewId: string, interrupted: boolean): EffectJob => ({
  id: "00000000-0000-4000-8000-0000000000e1",
  kind: "review.post",
  subjectId: reviewId,
  key: `review.post:${reviewId}`,
  payload: null,
  attempts: 2,
  generation: 0,
  interrupted,
  createdAt: ENQUEUED,
});

const shown = (id: string) => query<{ messageTs: string | null; shownState: string | null }>(`SELECT "messageTs", "shownState" FROM "Review" WHERE id = $1::uuid`, [id]);
const showsDue = (id: string) => query(`SELECT 1 FROM "SlackEffect" WHERE kind = 'review.show' AND "subjectId" = $1::uuid AND state = 'due'`, [id]);

describe("review.post", () => {
  it("records a fresh post as showing the review's state, with nothing more to show", async () => {
    const id = await pendingReview();
    const posts: string[] = [];
    const outcome = await slackEffectPerformer({ sql, notifier: notifier(undefined, posts) })(job(id, false));
    await inTransaction(sql, (tx) => outcome!.record!(tx));
    expect(posts).toEqual(["post"]);
    expect(await shown(id)).toEqual([{ messageTs: "200.000", shownState: "pending" }]);
    expect(await showsDue(id)).toHaveLength(0);
  });

  it("records a message found again as showing an unknown state, and asks for it to be shown as it is now", async () => {
    const id = await pendingReview();
    const posts: string[] = [];
    const outcome = await slackEffectPerformer({ sql, notifier: notifier("150.000", posts) })(job(id, true));
    await inTransaction(sql, (tx) => outcome!.record!(tx));
    expect(posts).toEqual([]);
    expect(await shown(id)).toEqual([{ messageTs: "150.000", shownState: null }]);
    expect(await showsDue(id)).toHaveLength(1);
  });

  it("looks for an interrupted post in the run's thread from when its effect was enqueued", async () => {
    const id = await pendingReview();
    const looked: { threadTs: string | null; effectId: string; since: Date | undefined }[] = [];
    const notify: RunNotifier = {
      ...notifier(undefined, []),
      findPosted: async (_e, threadTs, effectId, since) => {
        looked.push({ threadTs, effectId, since });
        return "150.000";
      },
    };
    await slackEffectPerformer({ sql, notifier: notify })(job(id, true));
    expect(looked).toEqual([{ threadTs: "100.000", effectId: job(id, true).id, since: ENQUEUED }]);
  });
});

describe("run.message", () => {
  const message = (subjectId: string, payload: Record<string, unknown>): EffectJob => ({
    id: "00000000-0000-4000-8000-0000000000e2",
    kind: "run.message",
    subjectId,
    key: `run.message:${subjectId}:x`,
    payload,
    attempts: 0,
    generation: 0,
    interrupted: false,
    createdAt: ENQUEUED,
  });
  const runOf = async (reviewId: string) => (await prismaOf(db.database).review.findUniqueOrThrow({ where: { id: reviewId } })).executionId;

  it("hands the notice's facts to Slack, and a row an earlier version enqueued as the words it holds", async () => {
    const run = await runOf(await pendingReview());
    const posts: string[] = [];
    const perform = slackEffectPerformer({ sql, notifier: notifier(undefined, posts) });
    const notice = { kind: "escalation", ids: ["U2", "S1"], taskName: "draft", round: 2, reminders: 3 };
    await perform(message(run, { notice }));
    await perform(message(run, { text: "🔺 <@U2>: *draft* is still waiting" }));
    expect(posts.map((p) => JSON.parse(p))).toEqual([notice, { kind: "text", text: "🔺 <@U2>: *draft* is still waiting" }]);
  });
});

describe("notices whose review was decided, or whose run ended, while they waited for Slack", () => {
  const effect = (kind: "run.message" | "review.deadline", subjectId: string, payload: Record<string, unknown>): EffectJob => ({
    id: "00000000-0000-4000-8000-0000000000e4",
    kind,
    subjectId,
    key: `${kind}:${subjectId}:x`,
    payload,
    attempts: 1,
    generation: 0,
    interrupted: false,
    createdAt: ENQUEUED,
  });
  const runOf = async (reviewId: string) => (await prismaOf(db.database).review.findUniqueOrThrow({ where: { id: reviewId } })).executionId;
  /** What reached Slack: run notices as their facts, deadline notices as their kind. */
  const slack = (posts: string[]): RunNotifier =>
    ({
      ...notifier(undefined, posts),
      postDeadlineNotice: async (_e, _r, notice) => void posts.push(`deadline:${notice.kind}`),
    }) as RunNotifier;
  const escalation = { kind: "escalation", ids: ["U2"], taskName: "draft", round: 1, reminders: 1 };
  const reassignment = { kind: "reassignment", to: "U3", by: "U2", taskName: "draft", round: 1 };

  it("a decided review gets no deadline reminder, escalation or reassignment; what happened regardless is still said", async () => {
    const id = await pendingReview();
    const run = await runOf(id);
    const posts: string[] = [];
    const perform = slackEffectPerformer({ sql, notifier: slack(posts) });
    const askToDecide = async () => {
      await perform(effect("review.deadline", id, { kind: "reminder", who: "<@U2>", withinMs: 60_000 }));
      await perform(effect("run.message", run, { notice: escalation }));
      await perform(effect("run.message", run, { notice: reassignment }));
    };
    await askToDecide();
    expect(posts).toEqual(["deadline:reminder", JSON.stringify(escalation), JSON.stringify(reassignment)]);
    posts.length = 0;
    await query(`UPDATE "Review" SET state = 'approved' WHERE id = $1::uuid`, [id]);
    await askToDecide();
    expect(posts).toEqual([]);

    const interrupted = { kind: "decision_interrupted", by: "U2", taskName: "draft", round: 1 };
    await perform(effect("review.deadline", id, { kind: "not_delivered", action: "reject", message: "crew down" }));
    await perform(effect("run.message", run, { notice: interrupted }));
    expect(posts).toEqual(["deadline:not_delivered", JSON.stringify(interrupted)]);
  });

  it("a run that ended gets no reminder or escalation about its still pending review; its stop is still said", async () => {
    const id = await pendingReview();
    const run = await runOf(id);
    await query(`UPDATE "Execution" SET state = 'stopped', "finishedAt" = now() WHERE id = $1::uuid`, [run]);
    const posts: string[] = [];
    const perform = slackEffectPerformer({ sql, notifier: slack(posts) });
    await perform(effect("review.deadline", id, { kind: "reminder", who: "<@U2>", withinMs: 60_000 }));
    await perform(effect("run.message", run, { notice: escalation }));
    const stop = { kind: "run_stopped", by: "U2", how: "stopped" };
    await perform(effect("run.message", run, { notice: stop }));
    expect(posts).toEqual([JSON.stringify(stop)]);
  });
});

describe("run.started", () => {
  const started = (subjectId: string): EffectJob => ({
    id: "00000000-0000-4000-8000-0000000000e3",
    kind: "run.started",
    subjectId,
    key: `run.started:${subjectId}`,
    payload: null,
    attempts: 0,
    generation: 0,
    interrupted: false,
    createdAt: ENQUEUED,
  });
  const runOf = async (reviewId: string) => (await prismaOf(db.database).review.findUniqueOrThrow({ where: { id: reviewId } })).executionId;
  /** Slack's answer to the live render comes back after the run was stopped (by another effect, another replica). */
  const stoppedWhileShown = (shownStates: string[]): RunNotifier =>
    ({
      updateAnnouncement: async (e: { id: string; state: string }) => {
        shownStates.push(e.state);
        await query(`UPDATE "Execution" SET state = 'stopped', "finishedAt" = now() WHERE id = $1::uuid`, [e.id]);
      },
    }) as Partial<RunNotifier> as RunNotifier;

  it("says a review waits once one has waited through a reminder", async () => {
    const reviewId = await pendingReview();
    const run = await runOf(reviewId);
    const shownStates: string[] = [];
    const recording = { updateAnnouncement: async (e: { state: string }) => void shownStates.push(e.state) } as Partial<RunNotifier> as RunNotifier;
    await slackEffectPerformer({ sql, notifier: recording })(started(run));
    await query(`UPDATE "Review" SET "remindersSent" = 1 WHERE id = $1::uuid`, [reviewId]);
    await slackEffectPerformer({ sql, notifier: recording })(started(run));
    expect(shownStates).toEqual(["running", "waiting"]);
  });

  it("shows the live run; when the run ended meanwhile, asks for the final state to be shown again after it", async () => {
    const run = await runOf(await pendingReview());
    const shownStates: string[] = [];
    const outcome = await slackEffectPerformer({ sql, notifier: stoppedWhileShown(shownStates) })(started(run));
    // Its review has not waited through a reminder yet: the announcement reads as running.
    expect(shownStates).toEqual(["running"]);
    expect(outcome?.next).toEqual([{ kind: "run.announcement", subjectId: run }]);
    // An ended run: nothing to show (run.announcement shows its final state).
    shownStates.length = 0;
    expect(await slackEffectPerformer({ sql, notifier: stoppedWhileShown(shownStates) })(started(run))).toBeUndefined();
    expect(shownStates).toEqual([]);
  });
});

describe("run.progress while its live plan waits for Slack's Tier 2", () => {
  const T0 = Date.parse("2026-11-26T12:00:00Z");

  /**
   * A running run whose early message shows a step `shownAgoMs` old; the crew sent a newer one since.
   * The plan's token is 10 s away; other calls go through `budget` when given (at progress's priority,
   * as the outbox's worker asks), else freely. `performAt` runs the effect again, that many ms after T0.
   */
  async function waitingPlan(shownAgoMs: number, budget?: SlackBudget) {
    const execution = await runRow({ state: "running", earlyTs: "150.000", earlyStepAt: new Date(T0 - shownAgoMs) });
    const refreshed: number[] = [];
    const notify = {
      planCall: () => ({ method: "chat.startStream", shown: {}, send: async () => ({ ts: "300.000" }) }),
      showEarlyProgress: async (_e: unknown, _plan: unknown, shown: { stepAt: Date }) => {
        refreshed.push(shown.stepAt.getTime());
        return { ts: "150.000" };
      },
    } as Partial<RunNotifier> as RunNotifier;
    const performAt = async (afterMs: number) => {
      const now = new Date(T0 + afterMs);
      const gate: SlackGate = async (call) => {
        if (call.method === "chat.startStream") throw new BudgetWait(call, new Date(T0 + 10_000));
        const taken = budget ? await budget.take(call, EFFECT_KINDS["run.progress"].priority, now) : { ok: true as const };
        if (!taken.ok) throw new BudgetWait(call, taken.retryAt);
      };
      const perform = slackEffectPerformer({ sql, notifier: notify, clock: { now: () => now } });
      const progress: EffectJob = {
        id: "00000000-0000-4000-8000-0000000000e2",
        kind: "run.progress",
        subjectId: execution.id,
        key: `run.progress:${execution.id}`,
        payload: { steps: 12, latest: "Reading sources", latestAt: T0 - 50, task: "research_task", taskAt: T0 - 5000 },
        attempts: 0,
        generation: 0,
        interrupted: false,
        createdAt: ENQUEUED,
      };
      return perform(progress, gate);
    };
    // The first run: what it returned, or the budget's refusal it threw.
    let refusal: BudgetWait | undefined;
    const outcome = await performAt(0).catch((err: unknown) => {
      if (!(err instanceof BudgetWait)) throw err;
      refusal = err;
      return undefined;
    });
    return { outcome, refusal, refreshed, performAt };
  }

  it("a refresh due in 100 ms is due then, not a second from now: the newer step waits no longer than a refresh", async () => {
    const { outcome, refreshed } = await waitingPlan(EARLY_PROGRESS_REFRESH_MS - 100);
    expect(refreshed).toEqual([]);
    expect(outcome?.again?.getTime()).toBe(T0 + 100);
  });

  it("a refresh that is due shows the newer step, and the next one is due a refresh after that step", async () => {
    const { outcome, refreshed } = await waitingPlan(EARLY_PROGRESS_REFRESH_MS + 100);
    expect(refreshed).toEqual([T0 - 50]);
    expect(outcome?.again?.getTime()).toBe(T0 - 50 + EARLY_PROGRESS_REFRESH_MS);
  });

  it("a refresh refused its token while decisions emptied Tier 3 comes when overdue, as a notice: not after half the bucket refilled", async () => {
    // Tier 3 as Slack's (50 a minute, a bucket of 8 less the headroom of 1), emptied by decisions shown at once.
    const budget = new SlackBudget(sql);
    const decision = { team: "T1", method: "chat.update" };
    while ((await budget.take(decision, 0, new Date(T0))).ok);
    const tokenEvery = 60_000 / 50;
    // The refresh is due (its step 6.5 s old) and refused: progress leaves half the bucket, so its token is
    // four refills away. It is tried again when its step is EARLY_PROGRESS_OVERDUE_MS old instead.
    const { refusal, refreshed, performAt } = await waitingPlan(EARLY_PROGRESS_OVERDUE_MS - 500, budget);
    expect(refusal?.retryAt.getTime()).toBe(T0 + 500);
    expect(refreshed).toEqual([]);
    // Then it leaves one token to what a person waits on, no more: with two tokens back it goes.
    await expect(performAt(tokenEvery + 500)).rejects.toBeInstanceOf(BudgetWait);
    await performAt(2 * tokenEvery + 500);
    expect(refreshed).toEqual([T0 - 50]);
  });
});

describe("Slack's budget in a run's thread (the worker performing these effects, a real budget)", () => {
  const T0 = new Date("2026-11-27T12:00:00.000Z");
  const clock = { at: T0, now: () => clock.at };
  const later = (ms: number) => {
    clock.at = new Date(clock.at.getTime() + ms);
  };
  beforeEach(() => {
    clock.at = T0;
  });

  /** A run in channel C1 with a review posted and pending; `unposted` more reviews not posted yet. */
  async function runWithReviews(unposted: number) {
    const prisma = prismaOf(db.database);
    const execution = await prisma.execution.create({
      data: {
        crewName: "research",
        teamId: "T1",
        channelId: "C1",
        userId: "U1",
        inputs: {},
        state: "waiting",
        requestId: crypto.randomUUID(),
        webhookSecret: "s",
        threadTs: "100.000",
      },
    });
    const review = (i: number, messageTs: string | null) =>
      prisma.review.create({
        data: {
          executionId: execution.id,
          taskKey: `t${i}`,
          taskName: `task ${i}`,
          round: 1,
          output: "text",
          outputHash: `h${i}`,
          state: messageTs ? "pending" : "posted",
          messageTs,
          createdAt: new Date(T0.getTime() + i),
        },
      });
    await review(0, "110.000");
    const toPost = [];
    for (let i = 1; i <= unposted; i++) toPost.push((await review(i, null)).id);
    return { execution, toPost };
  }

  /** What reached Slack, in order: reviews by id, notices by their text; and the look-ups made. */
  function slack(o: { lookup?: () => Promise<string | undefined> } = {}) {
    const posted: string[] = [];
    const looked: string[] = [];
    const notify = {
      findPosted: async (_e: unknown, threadTs: string | null) => {
        looked.push(threadTs ?? "channel");
        return o.lookup?.();
      },
      postReview: async (_e: unknown, r: { id: string }) => {
        posted.push(r.id);
        return { ts: `2${posted.length}0.000` };
      },
      reviewFiles: () => ({ output: false, diff: false }),
      postThreadNotice: async (_e: unknown, notice: { text?: string }) => void posted.push(String(notice.text)),
    } as Partial<RunNotifier> as RunNotifier;
    return { posted, looked, notify };
  }

  const workerWith = (notify: RunNotifier, concurrency = 1) =>
    new OutboxWorker({
      db: sql,
      perform: slackEffectPerformer({ sql, notifier: notify, clock }),
      log: silentLogger,
      clock,
      options: { replicaId: "r1", concurrency, minBackoffMs: 1000, maxBackoffMs: 4000 },
    });
  const postCall = { team: "T1", channel: "C1", method: "chat.postMessage" };

  it("a notice ahead of a review in its thread takes its token as the review would: other runs' reviews in the channel do not hold both back", async () => {
    const a = await runWithReviews(1);
    const b = await runWithReviews(4);
    const budget = new SlackBudget(sql);
    // The channel's posts (Slack's pace: one a second, 3 tokens to spend) are down to their last token.
    for (let i = 0; i < 2; i++) expect((await budget.take(postCall, 0, clock.now())).ok).toBe(true);
    // An escalation in run A's thread, then its next review behind it.
    await enqueueEffect(sql, { kind: "run.message", subjectId: a.execution.id, part: "x", payload: { text: "escalated" } }, clock.now());
    await enqueueEffect(sql, { kind: "review.post", subjectId: a.toPost[0]! }, clock.now());
    const { posted, notify } = slack();
    const worker = workerWith(notify);
    // Each second one of run B's reviews in the same channel falls due: what a person waits on, as A's review is.
    for (const id of b.toPost) {
      while ((await worker.runDue()) > 0);
      later(1000);
      await enqueueEffect(sql, { kind: "review.post", subjectId: id }, clock.now());
    }
    while ((await worker.runDue()) > 0);
    // Run A's review went with the first token after its escalation, in its thread's order, not after B's reviews.
    const notice = posted.indexOf("escalated");
    expect(notice).toBeGreaterThanOrEqual(0);
    expect(posted.indexOf(a.toPost[0]!)).toBe(notice + 1);
    expect(posted.indexOf(a.toPost[0]!)).toBeLessThan(posted.indexOf(b.toPost[1]!));
  });

  it("a notice with no review behind it in its thread leaves the channel's last token to what a person waits on", async () => {
    const a = await runWithReviews(0);
    const budget = new SlackBudget(sql);
    for (let i = 0; i < 2; i++) expect((await budget.take(postCall, 0, clock.now())).ok).toBe(true);
    await enqueueEffect(sql, { kind: "run.message", subjectId: a.execution.id, part: "x", payload: { text: "escalated" } }, clock.now());
    const { posted, notify } = slack();
    await workerWith(notify).runDue();
    expect(posted).toEqual([]);
    expect((await budget.take(postCall, 0, clock.now())).ok).toBe(true);
  });

  it("a notice ahead of a review post given up leaves the channel's last token: only a post still due is waited on", async () => {
    const a = await runWithReviews(1);
    const budget = new SlackBudget(sql);
    for (let i = 0; i < 2; i++) expect((await budget.take(postCall, 0, clock.now())).ok).toBe(true);
    await enqueueEffect(sql, { kind: "run.message", subjectId: a.execution.id, part: "x", payload: { text: "escalated" } }, clock.now());
    await enqueueEffect(sql, { kind: "review.post", subjectId: a.toPost[0]! }, clock.now());
    await query(`UPDATE "SlackEffect" SET state = 'dead' WHERE kind = 'review.post'`);
    const { posted, notify } = slack();
    await workerWith(notify).runDue();
    expect(posted).toEqual([]);
    expect((await budget.take(postCall, 0, clock.now())).ok).toBe(true);
  });

  /** The review post of run A, its earlier attempt's answer lost (it may be in Slack: looked for first). */
  async function interruptedPost() {
    const a = await runWithReviews(1);
    await enqueueEffect(sql, { kind: "review.post", subjectId: a.toPost[0]! }, clock.now());
    await query(`UPDATE "SlackEffect" SET attempts = 1, "lastError" = '(may have reached Slack) HTTP 503' WHERE kind = 'review.post'`);
    return a;
  }
  const repliesCall = { team: "T1", method: "conversations.replies" };

  it("the look-up before an interrupted post takes a token of its own method (Tier 3): with none left it waits, looking and posting nothing", async () => {
    const a = await interruptedPost();
    const budget = new SlackBudget(sql);
    while ((await budget.take(repliesCall, 0, clock.now())).ok);
    const { posted, looked, notify } = slack();
    await workerWith(notify).runDue();
    expect(looked).toEqual([]);
    expect(posted).toEqual([]);
    const [row] = await query<{ lastError: string; attempts: number }>(`SELECT "lastError", attempts FROM "SlackEffect" WHERE kind = 'review.post'`);
    expect(row).toMatchObject({ lastError: "(may have reached Slack) waiting for Slack's conversations.replies budget", attempts: 1 });
    // Its token back, it looks, then posts.
    later(2000);
    await workerWith(notify).runDue();
    expect(looked).toEqual(["100.000"]);
    expect(posted).toEqual([a.toPost[0]]);
  });

  it("an interrupted post that looked and did not find itself waits for its post's token without looking again", async () => {
    const a = await interruptedPost();
    const budget = new SlackBudget(sql);
    while ((await budget.take(postCall, 0, clock.now())).ok);
    const { posted, looked, notify } = slack();
    await workerWith(notify).runDue();
    expect(looked).toEqual(["100.000"]);
    expect(posted).toEqual([]);
    const [row] = await query<{ lastError: string }>(`SELECT "lastError" FROM "SlackEffect" WHERE kind = 'review.post'`);
    expect(row!.lastError).toBe("waiting for Slack's chat.postMessage budget");
    // Its token back, it posts, without a second look-up.
    later(5000);
    await workerWith(notify).runDue();
    expect(looked).toEqual(["100.000"]);
    expect(posted).toEqual([a.toPost[0]]);
  });

  it("a 429 on the look-up pauses conversations.replies for its Retry-After, not the workspace's posts", async () => {
    await interruptedPost();
    const limited = () => Promise.reject(Object.assign(new Error("rate limited"), { code: "slack_webapi_rate_limited_error", retryAfter: 30 }));
    const { posted, notify } = slack({ lookup: limited });
    await workerWith(notify).runDue();
    expect(posted).toEqual([]);
    const budget = new SlackBudget(sql);
    expect(await budget.take({ team: "T1", channel: "C2", method: "chat.postMessage" }, 0, clock.now())).toEqual({ ok: true });
    expect(await budget.take(repliesCall, 0, clock.now())).toEqual({ ok: false, retryAt: new Date(T0.getTime() + 30_000) });
  });
});

describe("the budget an effect spends", () => {
  it("a reminder refused its channel's post token takes no permalink token meanwhile (Tier 4, which live plans need)", async () => {
    const p = prismaOf(db.database);
    const execution = await p.execution.create({
      data: { crewName: "research", teamId: "T1", channelId: "C1", userId: "U1", inputs: {}, state: "waiting", requestId: "r-remind", webhookSecret: "s", threadTs: "100.000" },
    });
    const review = await p.review.create({
      data: { executionId: execution.id, taskKey: "t1", taskName: "draft", round: 1, output: "text", outputHash: "h", state: "pending", messageTs: "200.000" },
    });
    const notifier = { findPosted: async () => undefined, postReminder: async () => undefined } as Partial<RunNotifier> as RunNotifier;
    const asked: string[] = [];
    const gate: SlackGate = async (c) => {
      asked.push(c.method);
      if (c.method === "chat.postMessage") throw new BudgetWait(c, new Date(Date.now() + 1000));
    };
    const reminder: EffectJob = {
      id: crypto.randomUUID(),
      kind: "review.reminder",
      subjectId: review.id,
      key: `review.reminder:${review.id}:1`,
      payload: { who: "<@U1>", waitedMs: 60_000 },
      attempts: 1,
      generation: 0,
      interrupted: false,
      createdAt: new Date(),
    };
    await expect(slackEffectPerformer({ sql, notifier })(reminder, gate)).rejects.toBeInstanceOf(BudgetWait);
    expect(asked).toEqual(["chat.postMessage"]);
  });

  it("with one bot token, a flow request of no stored workspace spends the token's workspace's budget, as a run in the same channel does", async () => {
    const p = prismaOf(db.database);
    const execution = await p.execution.create({
      data: { crewName: "research", teamId: "T1", channelId: "C1", userId: "U1", inputs: {}, state: "waiting", requestId: "r-budget", webhookSecret: "s", threadTs: "100.000" },
    });
    const review = await p.review.create({ data: { executionId: execution.id, taskKey: "t1", taskName: "draft", round: 1, output: "text", outputHash: "h", state: "pending" } });
    const request = await p.flowRequest.create({
      data: { flowName: "content", requestId: "q1", teamId: null, channelId: "C1", output: "out", emit: [], callbackUrl: "https://x" },
    });
    const notifier = {
      findPosted: async () => undefined,
      postReview: async () => ({ ts: "1.0" }),
      reviewFiles: () => ({ output: false, diff: false }),
    } as Partial<RunNotifier> as RunNotifier;
    const flows = { findPosted: async () => undefined, postRequest: async () => ({ ts: "2.0" }), requestNeedsFile: () => false } as Partial<FlowNotifier> as FlowNotifier;
    const asked: { team: string; channel?: string; method: string }[] = [];
    const gate: SlackGate = async (c) => void asked.push({ team: c.team, channel: c.channel, method: c.method });
    const perform = slackEffectPerformer({ sql, notifier, flows, defaultTeam: () => "T1" });
    const job = (kind: EffectJob["kind"], subjectId: string): EffectJob => ({
      id: crypto.randomUUID(),
      kind,
      subjectId,
      key: `${kind}:${subjectId}`,
      payload: null,
      attempts: 1,
      generation: 0,
      interrupted: false,
      createdAt: new Date(),
    });
    await perform(job("review.post", review.id), gate);
    await perform(job("flow.post", request.id), gate);
    expect(asked).toEqual([
      { team: "T1", channel: "C1", method: "chat.postMessage" },
      { team: "T1", channel: "C1", method: "chat.postMessage" },
    ]);
  });
});

describe("run.progress at a run's end, when Slack had ended its stream", () => {
  const gone = () =>
    Object.assign(new Error("An API error occurred: message_not_in_streaming_state"), {
      code: "slack_webapi_platform_error",
      data: { ok: false, error: "message_not_in_streaming_state" },
    });

  async function endedRun(state: string, extra: { earlyTs?: string; streamTs?: string | null } = {}) {
    const execution = await runRow({ state, streamTs: "300.000", streamShown: {}, ...extra });
    const calls: string[] = [];
    const notify = {
      planCall: (_e: unknown, _plan: unknown, stream: { ts: string | null }) => ({
        method: stream.ts ? "chat.stopStream" : "chat.startStream",
        shown: { "#title": "t" },
        send: async () => {
          calls.push(stream.ts ? `stop ${stream.ts}` : "start");
          if (stream.ts) throw gone();
          return { ts: "400.000" };
        },
      }),
      showEarlyProgress: async () => {
        calls.push("early message");
        return { ts: "150.000" };
      },
      showProgress: async (_e: unknown, progress: { state?: string }, ts: string | null) => {
        calls.push(`progress ${ts} ${progress.state}`);
        return { ts: ts ?? "160.000" };
      },
    } as Partial<RunNotifier> as RunNotifier;
    const perform = slackEffectPerformer({ sql, notifier: notify });
    /** Performs the run's progress effect once, recording what it says as the worker would. */
    const performOnce = async (interrupted = false) => {
      const outcome = await perform({
        ...job(execution.id, interrupted),
        kind: "run.progress",
        key: `run.progress:${execution.id}`,
        payload: { steps: 3, latest: "Reading", latestAt: 1 },
      });
      if (outcome?.record) await inTransaction(sql, outcome.record);
      return outcome;
    };
    const row = () => prismaOf(db.database).execution.findUniqueOrThrow({ where: { id: execution.id } });
    return { calls, performOnce, row };
  }

  it("after a stop whose answer was lost, takes Slack's 'not streaming' as that stop: recorded stopped, no new plan", async () => {
    const { calls, performOnce, row } = await endedRun("completed");
    const outcome = await performOnce(true);
    expect(calls).toEqual(["stop 300.000"]);
    expect(outcome?.next ?? []).toEqual([]);
    expect(await row()).toMatchObject({ streamTs: "300.000", streamStoppedAt: expect.any(Date) });
    expect(await performOnce()).toBeUndefined();
    expect(calls).toEqual(["stop 300.000"]);
  });

  it("without a stop before it, starts a new plan showing the end (a stopped run as a completed one)", async () => {
    const { calls, performOnce, row } = await endedRun("stopped");
    expect((await performOnce())?.next).toEqual([{ kind: "run.progress", subjectId: (await row()).id }]);
    expect(await row()).toMatchObject({ streamTs: null, streamStoppedAt: null });
    await performOnce();
    expect(calls).toEqual(["stop 300.000", "start"]);
    expect((await row()).streamTs).toBe("400.000");
  });

  it("a run stopped before its plan ever started gets none (no Tier 2 start and stop for it)", async () => {
    const { calls, performOnce } = await endedRun("stopped", { streamTs: null });
    expect(await performOnce()).toBeUndefined();
    expect(calls).toEqual([]);
  });

  it("a stopped run whose steps showed in a message before its plan started: that message shows the stop, once, not that the plan never started", async () => {
    const { calls, performOnce, row } = await endedRun("stopped", { earlyTs: "150.000" });
    await performOnce();
    expect(await row()).toMatchObject({ streamTs: null, progressTs: "150.000" });
    await performOnce();
    await performOnce();
    expect(calls).toEqual(["stop 300.000", "progress 150.000 stopped"]);
    expect((await row()).streamStoppedAt).not.toBeNull();
  });
});

describe("run.progress when Slack refuses streaming", () => {
  it("a run whose own stream's call is refused goes on as a message: its stream is let go, not appended to again and again", async () => {
    const execution = await runRow({ state: "running", streamTs: "300.000", streamShown: {} });
    const refused = Object.assign(new Error("An API error occurred: not_allowed"), { code: "slack_webapi_platform_error", data: { ok: false, error: "not_allowed" } });
    const notify = {
      planCall: () => ({
        method: "chat.appendStream",
        shown: {},
        send: async () => {
          throw refused;
        },
      }),
    } as Partial<RunNotifier> as RunNotifier;
    const outcome = await slackEffectPerformer({ sql, notifier: notify })({
      ...job(execution.id, false),
      kind: "run.progress",
      key: `run.progress:${execution.id}`,
      payload: { steps: 3, latest: "Reading", latestAt: 1 },
    });
    if (outcome?.record) await inTransaction(sql, outcome.record);
    expect(await prismaOf(db.database).streamingRefusal.count()).toBe(1);
    expect((await prismaOf(db.database).execution.findUniqueOrThrow({ where: { id: execution.id } })).streamTs).toBeNull();
  });
});

describe("review.post after its run was stopped", () => {
  async function stoppedRunWith(state: "posted" | "closed") {
    const reviewId = await pendingReview();
    await query(`UPDATE "Review" SET state = $2 WHERE id = $1::uuid`, [reviewId, state]);
    await query(`UPDATE "Execution" SET state = 'stopped', "stoppedBy" = 'U1'`);
    const posts: string[] = [];
    const perform = slackEffectPerformer({ sql, notifier: notifier(undefined, posts) });
    return { posts, post: (attempts: number) => perform({ ...job(reviewId, false), attempts }) };
  }

  it("a task message, even one whose first turn came after the stop (a budget wait, a 429), and a review the stop closed, are posted: the output is the run's", async () => {
    const task = await stoppedRunWith("posted");
    await task.post(1);
    expect(task.posts).toEqual(["post"]);
    await query(`DELETE FROM "Review"`);
    await query(`DELETE FROM "Execution"`);
    const review = await stoppedRunWith("closed");
    await review.post(1);
    expect(review.posts).toEqual(["post"]);
  });
});
