// A flow deployment (the local flow service) sending signed feedback requests to the running bot, and
// clicks on the request messages as Slack sends them.

import http from "node:http";
import type { AddressInfo } from "node:net";
import { FLOW_ACTIONS_BLOCK, FLOW_EDIT_VIEW_CALLBACK, FLOW_FEEDBACK_ACTION, FLOW_FEEDBACK_BLOCK } from "../../src/adapters/slack/blocks/index.js";
import type { FlowConfig } from "../../src/config/config.js";
import { type SimFlowService, startFlowService } from "../../src/sim/flow-service.js";
import type { FakeMessage } from "./fake-slack.js";
import { eventually, type Harness, type HarnessOptions, startHarness, USER } from "./harness.js";
import { prismaOf } from "./prisma.js";

export const FLOW_SECRET = "flow-webhook-secret";
export const FLOW_CHANNEL = "C0FLOWS";
export const FLOW_NAME = "content";

export interface FlowHarness {
  h: Harness;
  flow: SimFlowService;
  close(): Promise<void>;
}

export async function startFlowHarness(opts: HarnessOptions & { flow?: Partial<FlowConfig>; answerWindowMs?: number } = {}): Promise<FlowHarness> {
  const flowConfig: FlowConfig = { name: FLOW_NAME, secret: FLOW_SECRET, channel: FLOW_CHANNEL, ...opts.flow };
  const h = await startHarness({ ...opts, config: { flows: [flowConfig], ...opts.config } });
  const flow = await startFlowService({ secret: FLOW_SECRET, targetUrl: `${h.botUrl}/hooks/flows/${FLOW_NAME}`, answerWindowMs: opts.answerWindowMs });
  return {
    h,
    flow,
    async close() {
      await h.close();
      await flow.close();
    },
  };
}

export interface PendingFlowRequest {
  msg: FakeMessage;
  /** FlowRequest.id (the buttons' value). */
  id: string;
  buttons: { action_id: string; text: string; style?: string }[];
}

/** Waits for the open request message (optionally containing a text) whose ts the bot has stored. */
export function pendingFlowRequest(h: Harness, containing = "", channel = FLOW_CHANNEL): Promise<PendingFlowRequest> {
  return eventually(
    async () => {
      for (const msg of h.slack.messages(channel)) {
        const actions = (msg.blocks ?? []).find((b: any) => b.type === "actions" && b.block_id === FLOW_ACTIONS_BLOCK);
        if (!actions || !JSON.stringify(msg.blocks).includes(containing)) continue;
        const id = actions.elements[0].value as string;
        const stored = await h.bot.database.sql.selectFrom("FlowRequest").select("id").where("id", "=", id).where("messageTs", "=", msg.ts).executeTakeFirst();
        if (stored) return { msg, id, buttons: actions.elements.map((e: any) => ({ action_id: e.action_id, text: e.text.text, style: e.style })) };
      }
      return undefined;
    },
    { what: `a flow request message${containing ? ` containing "${containing}"` : ""}` },
  );
}

/** A signed click on one of the request's buttons (by its label), with the feedback field's value. */
export function clickFlow(h: Harness, req: PendingFlowRequest, label: string, feedback = "", user = USER, where: { channel?: string; ts?: string } = {}) {
  const button = req.buttons.find((b) => b.text === label);
  if (!button) throw new Error(`no button "${label}" (have ${req.buttons.map((b) => b.text).join(", ")})`);
  return h.requests.blockAction({
    user_id: user,
    channel_id: where.channel ?? req.msg.channel,
    message_ts: where.ts ?? req.msg.ts,
    action: { action_id: button.action_id, block_id: FLOW_ACTIONS_BLOCK, value: req.id },
    stateValues: { [FLOW_FEEDBACK_BLOCK]: { [FLOW_FEEDBACK_ACTION]: { type: "plain_text_input", value: feedback } } },
  });
}

export const flowRow = (h: Harness, id: string) => prismaOf(h.bot.database).flowRequest.findUniqueOrThrow({ where: { id } });

/** Clicks "Edit and approve…" on a flow request; resolves with the modal it opened. */
export async function openFlowEdit(h: Harness, req: PendingFlowRequest, user = USER) {
  const before = h.slack.callsTo("views.open").length;
  await clickFlow(h, req, "Edit and approve…", "", user);
  await eventually(() => h.slack.callsTo("views.open").length > before, { what: "the flow edit modal" });
  return [...h.slack.views.values()].filter((v) => v.view.callback_id === FLOW_EDIT_VIEW_CALLBACK).at(-1)!;
}

/**
 * A gateway in front of the flow service (its callback URLs through `callbackOrigin: gateway.url`): each
 * call is passed on, and while `statuses` last, the flow's answer is replaced by the next one (a 504 after
 * the flow took the answer: the delivery looks failed, yet the flow has it).
 */
export async function startFlowGateway(upstream: string, ...statuses: number[]): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const passed = await fetch(`${upstream}${req.url}`, { method: req.method, headers: { "content-type": "application/json" }, body: Buffer.concat(chunks) });
      const text = await passed.text();
      const status = statuses.shift();
      if (status) res.writeHead(status, { "content-type": "text/html" }).end("<html><body>Gateway Timeout</body></html>");
      else res.writeHead(passed.status, { "content-type": "application/json" }).end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
