// Signed or not, a request to /slack/events is outside input: its body is bounded and its shape
// checked (zod) before Bolt sees it. Bolt reads fields of the body without checks (a JSON body `null`
// was an unhandled rejection that ended the process; `event: null`, `view: null`, `actions: 3` were
// 500s with a stack trace in the log), so a malformed body is answered 400 here. Bolt then verifies
// the signature on the same bytes (it reuses req.rawBody).
import type { IncomingMessage, ServerResponse } from "node:http";
import { parse as parseQuery } from "node:querystring";
import type { HTTPReceiver } from "@slack/bolt";
import { z } from "zod";
import type { Logger } from "../../log/log.js";
import { JsonTooComplex, parseBoundedJson } from "../../text/bounded-json.js";
import { readBody, BodyTooLarge as TooLarge } from "../http/routes.js";

export const MAX_SLACK_BODY_BYTES = 1024 * 1024;

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
    if ((contentType ?? "").split(";")[0]!.trim().toLowerCase() === "application/x-www-form-urlencoded") {
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

/** Puts the shape check in front of the receiver's /slack/events endpoint. */
export function guardSlackEvents(receiver: HTTPReceiver, log: Logger, endpoint = "/slack/events"): HTTPReceiver {
  const next = receiver.requestListener;
  receiver.requestListener = (req, res) => {
    const path = (req.url ?? "").split("?")[0];
    if (req.method !== "POST" || path !== endpoint) return next(req, res);
    readBody(req, MAX_SLACK_BODY_BYTES).then(
      (raw) => {
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
