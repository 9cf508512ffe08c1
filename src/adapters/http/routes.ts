// Plain HTTP routes served beside Slack's /slack/events: crew callbacks and the health check.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../../log/log.js";
import { JsonTooComplex, parseBoundedJson } from "../../text/bounded-json.js";
import { sanitizeJson, sanitizeText } from "../../text/sanitize.js";
import type { CallbackOutcome, CallbackRefusal } from "../../usecases/callbacks.js";
import type { Lifecycle } from "../../usecases/lifecycle.js";
import { noTelemetry, type Telemetry } from "../../usecases/telemetry.js";

export const MAX_CALLBACK_BYTES = 2 * 1024 * 1024;
export const CALLBACK_PATH = "/hooks/:executionId/:kind/:secret";

type ParamsRequest = IncomingMessage & { params?: Record<string, string> };

export class BodyTooLarge extends Error {}

// Events rather than `for await`: this runs for every step callback, and the async iterator costs more.
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"] ?? 0);
    if (declared > limit) return reject(new BodyTooLarge());
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off("data", onData);
        reject(new BodyTooLarge());
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.once("end", () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    req.once("error", reject);
  });
}

const CALLBACK_URL = /^\/hooks\/([^/?#]+)\/([^/?#]+)\/([^/?#]+)\/?(?:\?.*)?$/;

/**
 * The parameters of a callback URL (the same ones CALLBACK_PATH names), or undefined. Lets the HTTP
 * server route callbacks before Bolt's router, which compiles its route patterns on every request.
 */
/** Whether a request path is ours (any case, repeated slashes): it must never reach Bolt, which logs paths. */
export function isCallbackPath(url: string | undefined): boolean {
  return !!url && /^\/+hooks(?:[/?#]|$)/i.test(url);
}

export function matchCallbackUrl(url: string | undefined): { executionId: string; kind: string; secret: string } | undefined {
  const m = url ? CALLBACK_URL.exec(url) : null;
  if (!m) return undefined;
  try {
    return { executionId: decodeURIComponent(m[1]!), kind: decodeURIComponent(m[2]!), secret: decodeURIComponent(m[3]!) };
  } catch {
    return undefined; // malformed escapes: no callback of ours
  }
}

/** Each refusal and outcome of a callback as the crew is answered. */
const REFUSALS: Record<CallbackRefusal["kind"], [status: number, error: string]> = {
  unknown_callback: [404, "unknown callback"],
  unknown_run: [404, "unknown execution"],
  bad_secret: [401, "invalid callback secret"],
  bad_authorization: [401, "invalid or missing authorization"],
  run_ended: [410, "this run has ended; its callbacks are no longer taken"],
};

function answerOf(outcome: CallbackOutcome): [status: number, body: Record<string, unknown>] {
  switch (outcome.kind) {
    case "accepted":
      return [202, { ok: true, message: "accepted" }];
    case "duplicate":
      return [200, { ok: true, message: "duplicate delivery ignored" }];
    case "run_ended":
      return [REFUSALS.run_ended[0], { error: REFUSALS.run_ended[1] }];
    case "nothing_new":
      return [200, { ok: true, message: "nothing new" }];
    case "names_another_run":
      return [409, { error: "this callback names another run than its URL" }];
    case "malformed":
      return [400, { error: outcome.problem }];
  }
}

export function reply(res: ServerResponse, status: number, body: Record<string, unknown>): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** Reports the request's answer once it is sent, whichever way it was answered. */
export function reportAnswer(res: ServerResponse, kind: string, telemetry: Telemetry): void {
  res.once("finish", () => telemetry.emit({ type: "callback.answered", kind, status: res.statusCode }));
}

/**
 * /hooks/{executionId}/{step|task|crew}/{secret}: answered fast; Slack work happens after. Every
 * request under /hooks/ comes here whatever its method or shape (405 for non-POST).
 */
export function callbackHandler(lifecycle: Lifecycle, log: Logger, telemetry: Telemetry = noTelemetry) {
  return async (req: ParamsRequest, res: ServerResponse) => {
    const arrived = Date.now();
    const { executionId = "", kind = "", secret = "" } = req.params ?? {};
    reportAnswer(res, kind, telemetry);
    if (req.method !== "POST") {
      req.resume();
      res.setHeader("allow", "POST");
      return reply(res, 405, { error: "callbacks are POST requests" });
    }
    try {
      // The URL's execution id and secret (and the bearer token) first: a forged request is answered
      // without its body being read or parsed.
      const checked = await lifecycle.callbacks.authenticate(sanitizeText(executionId), sanitizeText(kind), sanitizeText(secret), req.headers.authorization);
      if ("refused" in checked) {
        req.resume();
        const [status, error] = REFUSALS[checked.refused.kind];
        return reply(res, status, { error });
      }
      const body = await readCallbackBody(req, res);
      if (body === undefined) return;
      const outcome = await lifecycle.callbacks.accept(checked.caller, body.value);
      reply(res, ...answerOf(outcome));
      if (outcome.kind === "accepted") {
        // Reported before the Slack work begins, which may be before the answer has left.
        telemetry.emit({ type: "callback.accepted", kind, executionId, at: arrived });
        outcome.after?.();
      }
    } catch (err) {
      log.error("callback intake failed", { executionId, kind, err });
      if (!res.headersSent) reply(res, 500, { error: "internal error" });
    }
  };
}

/** The body of an authenticated callback, bounded and parsed; undefined once a 4xx has been answered. */
async function readCallbackBody(req: IncomingMessage, res: ServerResponse): Promise<{ value: unknown } | undefined> {
  try {
    const raw = await readBody(req, MAX_CALLBACK_BYTES);
    // Bounded before parsing (nesting, value count), then stored text PostgreSQL can hold.
    return { value: sanitizeJson(parseBoundedJson(raw.toString("utf8"))) };
  } catch (err) {
    if (err instanceof BodyTooLarge) {
      reply(res, 413, { error: `callback bodies are limited to ${MAX_CALLBACK_BYTES} bytes` });
      req.resume();
    } else if (err instanceof JsonTooComplex) {
      reply(res, 400, { error: `callback body refused: ${err.message}` });
    } else {
      reply(res, 400, { error: "callback body must be JSON" });
    }
    return undefined;
  }
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
