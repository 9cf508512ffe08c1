// The HTTP intake of flow feedback requests (POST /hooks/flows/<name>): the signature, the body's limits
// and parsing, and the answer; the use case records a request that passed them.
import type { IncomingMessage, ServerResponse } from "node:http";
import { type Logger, sampledLog } from "../../log/log.js";
import { parseFlowBody } from "../../protocols/flows/request.js";
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyFlowSignature } from "../../protocols/flows/signature.js";
import { JsonTooComplex, parseBoundedJson } from "../../text/bounded-json.js";
import { sanitizeJson } from "../../text/sanitize.js";
import type { FlowRequests } from "../../usecases/flows.js";
import { noTelemetry, type Telemetry } from "../../usecases/telemetry.js";
import { BodyTooLarge, readBody, reply, reportAnswer } from "./routes.js";

export const FLOW_HOOK_PREFIX = "/hooks/flows/";
export const FLOW_HOOK_PATH = "/hooks/flows/:flowName";
export const MAX_FLOW_BODY_BYTES = 1024 * 1024;

const FLOW_URL = /^\/hooks\/flows\/([^/?#]+)\/?(?:\?.*)?$/;

export function flowWebhookUrl(publicUrl: string | undefined, flowName: string): string {
  return `${publicUrl ?? "<PUBLIC_URL>"}${FLOW_HOOK_PREFIX}${encodeURIComponent(flowName)}`;
}

export function matchFlowUrl(url: string | undefined): string | undefined {
  const m = url ? FLOW_URL.exec(url) : null;
  if (!m) return undefined;
  try {
    return decodeURIComponent(m[1]!);
  } catch {
    return undefined;
  }
}

/** POST /hooks/flows/<name>: answered as soon as the request is recorded; Slack work happens after. */
export function flowIntakeHandler(flows: FlowRequests, log: Logger, telemetry: Telemetry = noTelemetry, now: () => number = Date.now) {
  // Anyone can send these: one line per flow and reason a minute, with the count left out.
  const refusals = sampledLog(log);
  return async (req: IncomingMessage, res: ServerResponse) => {
    reportAnswer(res, "flow", telemetry);
    const name = matchFlowUrl(req.url);
    const flow = name === undefined ? undefined : flows.flow(name);
    if (!flow) {
      req.resume();
      return reply(res, 404, { error: "unknown flow" });
    }
    const refused = (reason: string) => {
      refusals.warn("flow request refused: bad signature", `${flow.name}\0${reason}`, { flow: flow.name, reason });
      reply(res, 401, { error: "invalid or missing signature" });
    };
    // The platform does not retry a 4xx, and the flow waits for an answer that will not come: the
    // operator is told which flow and which field (never a value, the callback URL or its token).
    const malformed = (problem: "unreadable" | "not_json" | "too_complex" | "invalid", field: string, error: string) => {
      refusals.warn("flow request malformed: answered 400", `${flow.name}\0${problem}\0${field}`, { flow: flow.name, problem, field });
      reply(res, 400, { error });
    };
    // Missing, malformed or stale headers are refused before the body is read: over an empty body only
    // the HMAC can fail ("mismatch"), and that one needs the real body.
    const headers = { secret: flow.secret, timestamp: req.headers[TIMESTAMP_HEADER], signature: req.headers[SIGNATURE_HEADER], nowMs: now() };
    const early = verifyFlowSignature({ ...headers, rawBody: Buffer.alloc(0) });
    if (!early.ok && early.reason !== "mismatch") {
      req.resume();
      return refused(early.reason);
    }
    let raw: Buffer;
    try {
      raw = await readBody(req, MAX_FLOW_BODY_BYTES);
    } catch (err) {
      if (err instanceof BodyTooLarge) {
        req.resume();
        return reply(res, 413, { error: `feedback requests are limited to ${MAX_FLOW_BODY_BYTES} bytes` });
      }
      return malformed("unreadable", "body", "could not read the body");
    }
    const verdict = verifyFlowSignature({ ...headers, rawBody: raw, nowMs: now() });
    if (!verdict.ok) return refused(verdict.reason);
    let body: unknown;
    try {
      // Bounded before parsing (nesting, value count), then text PostgreSQL can store (like crew callbacks).
      body = sanitizeJson(parseBoundedJson(raw.toString("utf8")));
    } catch (err) {
      if (err instanceof JsonTooComplex) return malformed("too_complex", "body", `feedback request refused: ${err.message}`);
      return malformed("not_json", "body", "the body must be JSON");
    }
    const parsed = parseFlowBody(body);
    if (parsed.kind === "invalid") return malformed("invalid", parsed.field, `malformed feedback request: ${parsed.problem}`);
    if (parsed.kind === "ignored") {
      log.info("flow event ignored", { flow: flow.name, eventType: parsed.eventType });
      return reply(res, 200, { ok: true, ignored: true });
    }
    try {
      const outcome = await flows.record(flow, parsed.request);
      if (outcome.kind === "duplicate") return reply(res, 200, { ok: true, duplicate: true });
      reply(res, 202, { ok: true });
      outcome.after();
    } catch (err) {
      log.error("flow request intake failed", { flow: flow.name, err: err instanceof Error ? err.message.slice(0, 200) : "error" });
      if (!res.headersSent) reply(res, 500, { error: "internal error" });
    }
  };
}
