// Plain HTTP routes served beside Slack's /slack/events: crew callbacks and the health check.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Lifecycle } from "../lifecycle/index.js";
import type { Logger } from "../log.js";

export const MAX_CALLBACK_BYTES = 2 * 1024 * 1024;
export const CALLBACK_PATH = "/hooks/:executionId/:kind/:secret";

type ParamsRequest = IncomingMessage & { params?: Record<string, string> };

class BodyTooLarge extends Error {}

async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > limit) throw new BodyTooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new BodyTooLarge();
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function reply(res: ServerResponse, status: number, body: Record<string, unknown>): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** POST /hooks/{executionId}/{step|task|crew}/{secret}: answered fast; Slack work happens after. */
export function callbackHandler(lifecycle: Lifecycle, log: Logger) {
  return async (req: ParamsRequest, res: ServerResponse) => {
    const { executionId = "", kind = "", secret = "" } = req.params ?? {};
    let body: unknown;
    try {
      const raw = await readBody(req, MAX_CALLBACK_BYTES);
      body = JSON.parse(raw.toString("utf8"));
    } catch (err) {
      if (err instanceof BodyTooLarge) {
        reply(res, 413, { error: `callback bodies are limited to ${MAX_CALLBACK_BYTES} bytes` });
        req.resume();
      } else {
        reply(res, 400, { error: "callback body must be JSON" });
      }
      return;
    }
    try {
      const answer = await lifecycle.callbacks.accept(executionId, kind, secret, body);
      reply(res, answer.status, answer.status < 300 ? { ok: true, message: answer.message } : { error: answer.message });
      answer.after?.();
    } catch (err) {
      log.error("callback intake failed", { executionId, kind, err });
      if (!res.headersSent) reply(res, 500, { error: "internal error" });
    }
  };
}

/** GET /healthz: 200 when the database answers. */
export function healthHandler(check: () => Promise<void>) {
  return async (_req: IncomingMessage, res: ServerResponse) => {
    try {
      await check();
      reply(res, 200, { ok: true });
    } catch {
      reply(res, 503, { ok: false, error: "database unavailable" });
    }
  };
}
