// The look-up an interrupted post makes before posting again (findPostedMessage), against a Web API
// that pages a thread as Slack does: oldest replies first, `limit` at a time, a cursor to the next page.
// (The shared Slack stand-in answers a whole thread at once, so it cannot show a post on a later page.)
// The look-up reads from a minute before its effect was enqueued (`oldest`), two pages at most, and takes
// a refused second page (Slack gives apps outside the Marketplace one call a minute) for "not there".
import http from "node:http";
import type { AddressInfo } from "node:net";
import { webApi } from "@slack/bolt";
import { CompiledQuery } from "kysely";
import { afterEach, expect, it } from "vitest";
import { singleTokenClients } from "../../src/adapters/slack/clients.js";
import { EFFECT_EVENT_TYPE, findPostedMessage, SlackRunNotifier } from "../../src/adapters/slack/notifier.js";
import { silentLogger } from "../../src/log/log.js";
import { slackEffectPerformer } from "../../src/outbox/perform.js";
import { OutboxWorker } from "../../src/outbox/worker.js";
import { enqueueEffect } from "../../src/store/effects.js";
import { prismaOf } from "../support/prisma.js";
import { createTestDatabase, type TestDatabase } from "../support/test-database.js";

/** Slack's ts of a time (seconds, six decimals). */
const tsOf = (ms: number) => (ms / 1000).toFixed(6);
/** The thread's parent, and its replies 10 s apart. */
const T0 = 1_700_000_000_000;
const replyAt = (i: number) => T0 + i * 10_000;
const THREAD = tsOf(replyAt(0));
let server: http.Server | undefined;
let db: TestDatabase | undefined;
afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
  await db?.drop();
  db = undefined;
});

interface Page {
  method: string;
  cursor: string;
  limit: number;
  oldest: string | null;
  inclusive: string | null;
}

/**
 * A thread of `replies` replies 10 s apart, the one at `ours` (if any) posted by the effect `effect`;
 * records each page asked for. `pageSize`: the most a page holds whatever is asked (15 for an app outside
 * the Marketplace); `refuse`: pages answered with a rate limit; `failPosts`: posts answered with a 503
 * (and not made). Posts that go through are added to the thread, at `now`.
 */
async function slackWithThread(
  replies: number,
  ours: number,
  effect: string,
  o: { pageSize?: number; refuse?: (page: Page, index: number) => boolean; failPosts?: number; now?: () => number } = {},
) {
  const messages: { ts: string; text: string; metadata?: unknown }[] = Array.from({ length: replies + 1 }, (_, i) => ({
    ts: tsOf(replyAt(i)),
    text: i === 0 ? "the run" : `reply ${i}`,
    ...(i === ours ? { metadata: { event_type: EFFECT_EVENT_TYPE, event_payload: { effect } } } : {}),
  }));
  const pages: Page[] = [];
  const posts: { ts: string; metadata: unknown }[] = [];
  let failPosts = o.failPosts ?? 0;
  server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      const method = (req.url ?? "").replace(/^\/api\//, "");
      const args = new URLSearchParams(body);
      const answer = (status: number, json: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { "content-type": "application/json", ...headers });
        res.end(JSON.stringify(json));
      };
      if (method === "chat.postMessage") {
        if (failPosts-- > 0) return answer(503, { ok: false, error: "service_unavailable" });
        const posted = { ts: tsOf(o.now?.() ?? Date.now()), text: args.get("text") ?? "", metadata: JSON.parse(args.get("metadata") ?? "null") };
        messages.push(posted);
        posts.push(posted);
        return answer(200, { ok: true, channel: args.get("channel"), ts: posted.ts });
      }
      if (method !== "conversations.replies" && method !== "conversations.history") return answer(200, { ok: true });
      const page: Page = { method, cursor: args.get("cursor") ?? "", limit: Number(args.get("limit") ?? 1000), oldest: args.get("oldest"), inclusive: args.get("inclusive") };
      pages.push(page);
      if (o.refuse?.(page, pages.length - 1)) return answer(429, { ok: false, error: "ratelimited" }, { "retry-after": "60" });
      const oldest = Number(page.oldest ?? 0);
      const listed = messages.filter((m) => (page.inclusive === "true" ? Number(m.ts) >= oldest : Number(m.ts) > oldest));
      const limit = Math.min(page.limit, o.pageSize ?? page.limit);
      const from = Number(page.cursor || 0);
      const next = from + limit < listed.length ? String(from + limit) : "";
      answer(200, { ok: true, messages: listed.slice(from, from + limit), has_more: !!next, response_metadata: { next_cursor: next } });
    });
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  const client = new webApi.WebClient("xoxb-test", {
    slackApiUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/`,
    retryConfig: { retries: 0 },
    rejectRateLimitedCalls: true,
  });
  return { client, pages, posts, ts: messages[ours]?.ts };
}

const effect = "00000000-0000-4000-8000-0000000000e1";

it("finds a post on a later page of a long thread, reading no further than that page", async () => {
  const slack = await slackWithThread(450, 300, effect);
  // Enqueued before the thread began: `oldest` skips nothing.
  expect(await findPostedMessage(slack.client, silentLogger, "C1", THREAD, effect, new Date(T0 - 3600_000))).toBe(slack.ts);
  expect(slack.pages.map((p) => p.cursor)).toEqual(["", "200"]);
});

it("reads the thread from a minute before the effect was enqueued, so the post is on the first page even of 15 messages", async () => {
  // An app outside the Marketplace: 15 messages a page. The effect was enqueued after reply 425, its post is reply 430.
  const slack = await slackWithThread(450, 430, effect, { pageSize: 15 });
  const since = new Date(replyAt(425) + 5_000);
  expect(await findPostedMessage(slack.client, silentLogger, "C1", THREAD, effect, since)).toBe(slack.ts);
  expect(slack.pages).toEqual([{ method: "conversations.replies", cursor: "", limit: 200, oldest: tsOf(since.getTime() - 60_000), inclusive: "true" }]);
});

it("looks in the channel (a message not in a thread) from a minute before the effect, too", async () => {
  const slack = await slackWithThread(20, 5, effect);
  const since = new Date(replyAt(5) - 1_000);
  expect(await findPostedMessage(slack.client, silentLogger, "C1", null, effect, since)).toBe(slack.ts);
  expect(slack.pages).toEqual([{ method: "conversations.history", cursor: "", limit: 200, oldest: tsOf(since.getTime() - 60_000), inclusive: "true" }]);
});

it("answers a rate limit on the second page as not found (post again), and one on the first as a failure (retried)", async () => {
  const since = new Date(replyAt(10));
  // 30 replies since the effect, 15 a page: the second page is refused, as Slack does at one call a minute.
  const second = await slackWithThread(40, -1, effect, { pageSize: 15, refuse: (_, i) => i > 0 });
  expect(await findPostedMessage(second.client, silentLogger, "C1", THREAD, effect, since)).toBeUndefined();
  expect(second.pages.map((p) => p.cursor)).toEqual(["", "15"]);
  await new Promise<void>((resolve) => server!.close(() => resolve()));
  const first = await slackWithThread(40, -1, effect, { pageSize: 15, refuse: () => true });
  await expect(findPostedMessage(first.client, silentLogger, "C1", THREAD, effect, since)).rejects.toMatchObject({ code: "slack_webapi_rate_limited_error" });
});

// Before, the refused second page failed the attempt: retried a minute later, it read the first page and was
// refused again, for ever (a rate limit is not counted as an attempt), and the review never showed.
it("posts a review whose answer was lost once, when Slack rate-limits every second page of the look-up, rather than never", async () => {
  db = await createTestDatabase();
  const sql = db.database.sql;
  // The review is enqueued after reply 10; 30 more replies come before its post is tried again.
  const clock = { at: new Date(replyAt(10) + 1_000), now: () => clock.at };
  const slack = await slackWithThread(40, -1, effect, { pageSize: 15, refuse: (p) => p.cursor !== "", failPosts: 1, now: () => clock.at.getTime() });
  const execution = await prismaOf(db.database).execution.create({
    data: {
      crewName: "research",
      teamId: "T1",
      channelId: "C1",
      userId: "U1",
      inputs: {},
      state: "waiting",
      requestId: "r",
      webhookSecret: "s",
      threadTs: THREAD,
      progressTs: "1.000000",
    },
  });
  const review = await prismaOf(db.database).review.create({
    data: { executionId: execution.id, taskKey: "t1", taskName: "draft", round: 1, output: "text", outputHash: "h", state: "pending" },
  });
  await enqueueEffect(sql, { kind: "review.post", subjectId: review.id }, clock.at);
  const perform = slackEffectPerformer({ sql, clock, notifier: new SlackRunNotifier(singleTokenClients(slack.client), silentLogger) });
  const worker = new OutboxWorker({
    db: sql,
    perform,
    log: silentLogger,
    clock,
    options: { replicaId: "r1", budget: false, minBackoffMs: 1000, maxBackoffMs: 4000, maxAttempts: 3 },
  });
  // The first post fails with a 503 (it may have reached Slack); every later attempt looks for it first.
  for (let attempt = 0; attempt < 3; attempt++) {
    await worker.runDue();
    clock.at = new Date(clock.at.getTime() + 61_000);
  }
  const [row] = (await sql.executeQuery<{ state: string }>(CompiledQuery.raw(`SELECT state FROM "SlackEffect" WHERE kind = 'review.post'`, []))).rows;
  expect(row?.state).toBe("done");
  expect(slack.posts).toHaveLength(1);
  expect(slack.posts[0]!.metadata).toMatchObject({ event_type: EFFECT_EVENT_TYPE });
  const stored = await prismaOf(db.database).review.findUniqueOrThrow({ where: { id: review.id } });
  expect(stored.messageTs).toBe(slack.posts[0]!.ts);
  // It looked (from a minute before the effect) before posting again: its first page, then the refused second.
  expect(slack.pages.map((p) => [p.cursor, p.oldest])).toEqual([
    ["", tsOf(replyAt(10) + 1_000 - 60_000)],
    ["15", tsOf(replyAt(10) + 1_000 - 60_000)],
  ]);
});
