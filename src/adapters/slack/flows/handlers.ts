// The HTTP intake (POST /hooks/flows/<name>) and the Slack buttons of flow feedback requests.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { App } from "@slack/bolt";
import { z } from "zod";
import type { Logger } from "../../../log/log.js";
import type { FlowRequests } from "../../../usecases/flows.js";
import { BodyTooLarge, readBody } from "../../http/routes.js";
import { FLOW_FEEDBACK_ACTION, FLOW_FEEDBACK_BLOCK, FLOW_OUTCOME_ACTION_PREFIX, FLOW_SEND_ACTION } from "../blocks/index.js";
import { flowReplyFor } from "../decisions/replies.js";

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

function reply(res: ServerResponse, status: number, body: Record<string, unknown>): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** POST /hooks/flows/<name>: answered as soon as the request is recorded; Slack work happens after. */
export function flowIntakeHandler(flows: FlowRequests, log: Logger) {
  return async (req: IncomingMessage, res: ServerResponse) => {
    const name = matchFlowUrl(req.url);
    if (!name || !flows.flow(name)) {
      req.resume();
      return reply(res, 404, { error: "unknown flow" });
    }
    let raw: Buffer;
    try {
      raw = await readBody(req, MAX_FLOW_BODY_BYTES);
    } catch (err) {
      if (err instanceof BodyTooLarge) {
        req.resume();
        return reply(res, 413, { error: `feedback requests are limited to ${MAX_FLOW_BODY_BYTES} bytes` });
      }
      return reply(res, 400, { error: "could not read the body" });
    }
    try {
      const answer = await flows.intake(name, req.headers, raw);
      reply(res, answer.status, answer.body);
      answer.after?.();
    } catch (err) {
      log.error("flow request intake failed", { flow: name, err: err instanceof Error ? err.message.slice(0, 200) : "error" });
      if (!res.headersSent) reply(res, 500, { error: "internal error" });
    }
  };
}

const flowClick = z.object({
  user: z.object({ id: z.string() }),
  container: z.object({ channel_id: z.string().optional(), message_ts: z.string().optional() }).partial().optional(),
  channel: z.object({ id: z.string() }).optional(),
  message: z.object({ ts: z.string() }).partial().optional(),
  actions: z.array(z.object({ action_id: z.string().max(255), value: z.string().max(2000) })).min(1),
  state: z.object({ values: z.record(z.string(), z.record(z.string(), z.object({ value: z.string().nullish() }).passthrough())) }).optional(),
});

export const FLOW_ACTION_PATTERN = new RegExp(`^(${FLOW_OUTCOME_ACTION_PREFIX}\\d{1,2}|${FLOW_SEND_ACTION})$`);

export function registerFlowActions(app: App, flows: FlowRequests, log: Logger): void {
  app.action(FLOW_ACTION_PATTERN, async ({ ack, body, client }) => {
    await ack();
    const click = flowClick.safeParse(body);
    if (!click.success) {
      log.warn("flow click with an unexpected payload", { issues: click.error.issues.slice(0, 3).map((i) => i.path.join(".")) });
      return;
    }
    const { user, actions, state, container } = click.data;
    const action = actions[0]!;
    const channelId = container?.channel_id ?? click.data.channel?.id;
    const outcome = await flows.decide({
      requestId: action.value,
      userId: user.id,
      outcomeIndex: action.action_id === FLOW_SEND_ACTION ? undefined : Number(action.action_id.slice(FLOW_OUTCOME_ACTION_PREFIX.length)),
      feedback: state?.values[FLOW_FEEDBACK_BLOCK]?.[FLOW_FEEDBACK_ACTION]?.value ?? "",
      channelId,
      messageTs: container?.message_ts ?? click.data.message?.ts,
    });
    const text = flowReplyFor(outcome);
    if (text && channelId)
      await client.chat.postEphemeral({ channel: channelId, user: user.id, text }).catch((err) => log.warn("could not send ephemeral reply", { err: (err as Error).message }));
  });
}
