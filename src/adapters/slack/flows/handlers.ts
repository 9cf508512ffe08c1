// The HTTP intake (POST /hooks/flows/<name>) and the Slack buttons of flow feedback requests.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../../../log/log.js";
import type { FlowRequests } from "../../../usecases/flows.js";
import { BodyTooLarge, readBody } from "../../http/routes.js";

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
