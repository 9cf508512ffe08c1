// The look-up an interrupted post makes before posting again (findPostedMessage), against a Web API
// that pages a thread as Slack does: oldest replies first, `limit` at a time, a cursor to the next page.
// (The shared Slack stand-in answers a whole thread at once, so it cannot show a post on a later page.)
import http from "node:http";
import type { AddressInfo } from "node:net";
import { webApi } from "@slack/bolt";
import { afterEach, expect, it } from "vitest";
import { EFFECT_EVENT_TYPE, findPostedMessage } from "../../src/adapters/slack/notifier.js";
import { silentLogger } from "../../src/log/log.js";

const THREAD = "1700000000.000100";
let server: http.Server | undefined;
afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

/** A thread of `replies` replies, the one at `ours` posted by the effect `effect`; records each page asked for. */
async function slackWithThread(replies: number, ours: number, effect: string) {
  const messages = Array.from({ length: replies + 1 }, (_, i) => ({
    ts: `1700000000.${String(100 + i).padStart(6, "0")}`,
    text: i === 0 ? "the run" : `reply ${i}`,
    ...(i === ours ? { metadata: { event_type: EFFECT_EVENT_TYPE, event_payload: { effect } } } : {}),
  }));
  const pages: { cursor: string; limit: number }[] = [];
  server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      const args = new URLSearchParams(body);
      const cursor = args.get("cursor") ?? "";
      const limit = Number(args.get("limit") ?? 1000);
      pages.push({ cursor, limit });
      const from = Number(cursor || 0);
      const next = from + limit < messages.length ? String(from + limit) : "";
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ok: true, messages: messages.slice(from, from + limit), has_more: !!next, response_metadata: { next_cursor: next } }));
    });
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  const client = new webApi.WebClient("xoxb-test", { slackApiUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/`, retryConfig: { retries: 0 } });
  return { client, pages, ts: messages[ours]!.ts };
}

it("finds a post deep in a long thread on a later page, reading no further than that page", async () => {
  const effect = "00000000-0000-4000-8000-0000000000e1";
  const slack = await slackWithThread(450, 430, effect);
  expect(await findPostedMessage(slack.client, silentLogger, "C1", THREAD, effect)).toBe(slack.ts);
  expect(slack.pages.map((p) => p.cursor)).toEqual(["", "200", "400"]);
});
