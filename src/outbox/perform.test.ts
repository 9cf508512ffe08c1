// What a review post records, on a real database: a fresh post shows the state it was made in; a
// message found again after an interrupted attempt shows the state of that attempt, unknown here, so
// it is brought up to date with a review.show. A thread reply is handed to Slack as the facts its
// use case enqueued, or as the words an earlier version stored.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import type { EffectJob } from "../domain/effects.js";
import { type SqlRunner, sqlRunnerFor } from "../store/db/sql.js";
import { inTransaction, sqlOf } from "../store/sql.js";
import type { RunNotifier } from "../usecases/ports.js";
import { slackEffectPerformer } from "./perform.js";

let db: TestDatabase;
let sql: SqlRunner;

beforeEach(async () => {
  db = await createTestDatabase();
  sql = sqlRunnerFor(db.database.prisma);
});
afterEach(async () => db.drop());

async function pendingReview(): Promise<string> {
  const execution = await db.database.prisma.execution.create({
    data: { crewName: "research", teamId: "T1", channelId: "C1", userId: "U1", inputs: {}, state: "waiting", requestId: "r", webhookSecret: "s", threadTs: "100.000" },
  });
  const review = await db.database.prisma.review.create({
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

const job = (reviewId: string, interrupted: boolean): EffectJob => ({
  id: "00000000-0000-4000-8000-0000000000e1",
  kind: "review.post",
  subjectId: reviewId,
  key: `review.post:${reviewId}`,
  payload: null,
  attempts: 2,
  generation: 0,
  interrupted,
});

const shown = (id: string) => sql.query<{ messageTs: string | null; shownState: string | null }>(`SELECT "messageTs", "shownState" FROM "Review" WHERE id = $1::uuid`, [id]);
const showsDue = (id: string) => sql.query(`SELECT 1 FROM "SlackEffect" WHERE kind = 'review.show' AND "subjectId" = $1::uuid AND state = 'due'`, [id]);

describe("review.post", () => {
  it("records a fresh post as showing the review's state, with nothing more to show", async () => {
    const id = await pendingReview();
    const posts: string[] = [];
    const outcome = await slackEffectPerformer({ sql, notifier: notifier(undefined, posts) })(job(id, false));
    await inTransaction(sqlOf(sql), (tx) => outcome!.record!(tx));
    expect(posts).toEqual(["post"]);
    expect(await shown(id)).toEqual([{ messageTs: "200.000", shownState: "pending" }]);
    expect(await showsDue(id)).toHaveLength(0);
  });

  it("records a message found again as showing an unknown state, and asks for it to be shown as it is now", async () => {
    const id = await pendingReview();
    const posts: string[] = [];
    const outcome = await slackEffectPerformer({ sql, notifier: notifier("150.000", posts) })(job(id, true));
    await inTransaction(sqlOf(sql), (tx) => outcome!.record!(tx));
    expect(posts).toEqual([]);
    expect(await shown(id)).toEqual([{ messageTs: "150.000", shownState: null }]);
    expect(await showsDue(id)).toHaveLength(1);
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
  });
  const runOf = async (reviewId: string) => (await db.database.prisma.review.findUniqueOrThrow({ where: { id: reviewId } })).executionId;

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
