// Signed or not, a request to /slack/events is outside input. Its signature is checked first, over
// the raw bytes (a forged or unsigned request is answered 401 without being parsed; one whose headers
// cannot be a signature is not even read). Only then is its body bounded and its shape checked (zod)
// before Bolt sees it. Bolt reads fields of the body without checks (a JSON body `null` was an
// unhandled rejection that ended the process; `event: null`, `view: null`, `actions: 3` were 500s with
// a stack trace in the log), so a malformed body is answered 400 here. Bolt then verifies the
// signature again on the same bytes (it reuses req.rawBody).
import type { IncomingMessage, ServerResponse } from "node:http";
import { parse as parseQuery } from "node:querystring";
import { type HTTPReceiver, isValidSlackRequest } from "@slack/bolt";
import { z } from "zod";
import { type Logger, sampledLog } from "../../log/log.js";
import { JsonTooComplex, parseBoundedJson } from "../../text/bounded-json.js";
import { readBody, BodyTooLarge as TooLarge } from "../http/routes.js";

const MAX_SLACK_BODY_BYTES = 1024 * 1024;

const id = z.string().min(1).max(255);
const withId = z.looseObject({ id });
const action = z.looseObject({ action_id: z.string().max(255), block_id: z.string().max(255).optional(), value: z.string().max(2000).optional(), type: z.string().optional() });
const viewState = z.looseObject({ values: z.record(z.string(), z.record(z.string(), z.looseObject({}))) });
const view = z.looseObject({
  id,
  callback_id: z.string().max(255).optional(),
  private_metadata: z.string().max(3000).optional(),
  hash: z.string().optional(),
  state: viewState.optional(),
});
const container = z.looseObject({
  type: z.string().optional(),
  channel_id: z.string().optional(),
  message_ts: z.string().optional(),
  thread_ts: z.string().optional(),
  view_id: z.string().optional(),
});

/** The interactive payloads Crewline handles, with the parts its handlers (and Bolt) read. */
const interactive = z.discriminatedUnion("type", [
  z.looseObject({
    type: z.literal("block_actions"),
    user: withId,
    actions: z.array(action).min(1).max(50),
    team: withId.nullish(),
    channel: withId.optional(),
    container: container.optional(),
    message: z.looseObject({ ts: z.string().optional(), thread_ts: z.string().optional() }).optional(),
    view: view.optional(),
    state: viewState.optional(),
  }),
  z.looseObject({ type: z.literal("view_submission"), user: withId, view: view.extend({ callback_id: z.string().max(255), state: viewState }), team: withId.nullish() }),
  z.looseObject({ type: z.literal("view_closed"), user: withId, view, team: withId.nullish() }),
  z.looseObject({ type: z.enum(["shortcut", "message_action", "block_suggestion"]), user: withId, team: withId.nullish() }),
]);

const command = z.looseObject({
  command: z.string().min(1).max(100),
  text: z.string().max(4000).optional(),
  user_id: id,
  channel_id: id,
  team_id: z.string().max(255).optional(),
  trigger_id: id,
});

const events = z.discriminatedUnion("type", [
  z.looseObject({ type: z.literal("url_verification"), challenge: z.string().max(1000) }),
  z.looseObject({ type: z.literal("event_callback"), event: z.looseObject({ type: z.string().min(1) }), team_id: z.string().optional(), event_id: z.string().optional() }),
  z.looseObject({ type: z.literal("app_rate_limited") }),
]);

const anObject = z.record(z.string(), z.unknown());

/** Why a /slack/events body is not one Crewline can take, or undefined when it is. */
export function slackBodyProblem(contentType: string | undefined, text: string): string | undefined {
  try {
    if (isForm(contentType)) {
      const form = parseQuery(text);
      if (form.ssl_check === "1") return undefined;
      if (form.payload !== undefined) {
        if (typeof form.payload !== "string") return "payload must be one JSON object";
        const payload = parseBoundedJson(form.payload);
        if (!anObject.safeParse(payload).success) return "payload must be a JSON object";
        return interactive.safeParse(payload).success ? undefined : "unexpected interactive payload";
      }
      return command.safeParse(form).success ? undefined : "unexpected form body";
    }
    const body = parseBoundedJson(text);
    if (!anObject.safeParse(body).success) return "body must be a JSON object";
    return events.safeParse(body).success ? undefined : "unexpected event body";
  } catch (err) {
    return err instanceof JsonTooComplex ? err.message : "body is not JSON";
  }
}

function refuse(res: ServerResponse, status: number, error: string): void {
  const text = JSON.stringify({ error });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** Slack's ssl_check (a tiny form body Bolt answers without a signature) is never longer than this. */
const MAX_UNSIGNED_BYTES = 1024;
const SIGNATURE = /^v0=[0-9a-f]{64}$/;
/** Bolt refuses requests signed longer ago than this. */
const MAX_SIGNATURE_AGE_S = 5 * 60;

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === "string" ? value : undefined;
}

function isForm(contentType: string | undefined): boolean {
  return (contentType ?? "").split(";")[0]!.trim().toLowerCase() === "application/x-www-form-urlencoded";
}

/** Whether the signature headers can be a valid signature at all (format, age): checked before the body is read. */
function signatureHeadersLookValid(req: IncomingMessage, nowS: number): boolean {
  const timestamp = Number(header(req, "x-slack-request-timestamp"));
  return SIGNATURE.test(header(req, "x-slack-signature") ?? "") && Number.isInteger(timestamp) && timestamp >= nowS - MAX_SIGNATURE_AGE_S;
}

/** Bolt's own check (HMAC over the raw body, timestamp), without parsing anything. */
function signedBySlack(req: IncomingMessage, signingSecret: string, raw: Buffer): boolean {
  return isValidSlackRequest({
    signingSecret,
    body: raw.toString("utf8"),
    headers: { "x-slack-signature": header(req, "x-slack-signature") ?? "", "x-slack-request-timestamp": Number(header(req, "x-slack-request-timestamp")) },
  });
}

/** Slack's unsigned SSL check, which Bolt answers (and strips of anything else): a tiny form body. */
function isSslCheck(req: IncomingMessage, raw: Buffer): boolean {
  return isForm(req.headers["content-type"]) && raw.length <= MAX_UNSIGNED_BYTES && parseQuery(raw.toString("utf8")).ssl_check === "1";
}

/**
 * The path as Bolt's HTTPReceiver routes it (`new URL(url, base).pathname`): dot segments, `%2e`,
 * backslashes and absolute or `//host` targets all resolve, so `/slack/./events` is /slack/events to
 * Bolt and must be to the guard too. Undefined when Bolt could not parse it either (it throws).
 */
function routedPath(url: string | undefined): string | undefined {
  try {
    return new URL(url ?? "", "http://localhost").pathname;
  } catch {
    return undefined;
  }
}

/** Puts the signature check, then the shape check, in front of the receiver's /slack/events endpoint. */
export function guardSlackEvents(receiver: HTTPReceiver, log: Logger, signingSecret: string, endpoint = "/slack/events"): HTTPReceiver {
  const next = receiver.requestListener;
  // Anyone can send these: one line per reason a minute, with the count left out.
  const refusals = sampledLog(log);
  const forged = (req: IncomingMessage, res: ServerResponse, reason: string) => {
    req.resume();
    refusals.warn("unsigned or forged Slack request refused", reason, { reason });
    refuse(res, 401, "invalid request signature");
  };
  receiver.requestListener = (req, res) => {
    // Matched as Bolt will route it: the raw path let `/slack/./events` reach Bolt unguarded.
    if ((req.method ?? "").toUpperCase() !== "POST" || routedPath(req.url) !== endpoint) return next(req, res);
    // Headers that cannot be a signature: nothing but an SSL check (a tiny form) is worth reading.
    const plausible = signatureHeadersLookValid(req, Math.floor(Date.now() / 1000));
    if (!plausible && !(isForm(req.headers["content-type"]) && Number(req.headers["content-length"] ?? 0) <= MAX_UNSIGNED_BYTES))
      return forged(req, res, "no valid signature headers");
    readBody(req, plausible ? MAX_SLACK_BODY_BYTES : MAX_UNSIGNED_BYTES).then(
      (raw) => {
        if (!plausible || !signedBySlack(req, signingSecret, raw)) {
          if (isSslCheck(req, raw)) return next(Object.assign(req, { rawBody: raw }), res);
          return forged(req, res, plausible ? "signature mismatch" : "no valid signature headers");
        }
        const problem = slackBodyProblem(req.headers["content-type"], raw.toString("utf8"));
        if (problem) {
          log.warn("malformed Slack request refused", { problem });
          return refuse(res, 400, problem);
        }
        // Bolt's bufferIncomingMessage takes an already-read body from here.
        (req as IncomingMessage & { rawBody?: Buffer }).rawBody = raw;
        next(req, res);
      },
      (err) => {
        if (err instanceof TooLarge) {
          if (!plausible) return forged(req, res, "no valid signature headers");
          req.resume();
          return refuse(res, 413, "request body too large");
        }
        if (!res.headersSent) refuse(res, 400, "unreadable request body");
      },
    );
  };
  return receiver;
}

/**
 * Answers an error a Slack handler threw (after Bolt's app.error logged it): no stack trace, no
 * detail; a malformed part of the payload (ZodError) is the sender's fault (400).
 */
export async function answerHandlerError({ error, response }: { error: Error; response: ServerResponse }): Promise<boolean> {
  const cause = (error as Error & { original?: unknown }).original ?? error;
  const status = cause instanceof z.ZodError ? 400 : 500;
  if (!response.headersSent) refuse(response, status, status === 400 ? "malformed request" : "internal error");
  return false;
}
