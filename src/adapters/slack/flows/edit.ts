// "Edit and approve…" on a flow feedback request: like a crew review's (adapters/slack/review/edit.ts), the modal is
// sealed to the clicker and the request message, and the submission goes through FlowRequests.decide
// (the same reviewer rules and exactly-once claim as a click). The flow gets its first approve-like
// outcome (or, for free-feedback flows, no outcome) with a comment that carries the edited version.
import type { App } from "@slack/bolt";
import { z } from "zod";
import { editableSplit, joinEdit, unchangedEdit } from "../../../domain/approvals.js";
import { flowEditable, outcomeLeaning, outcomesOf } from "../../../domain/flow-outcomes.js";
import type { Logger } from "../../../log/log.js";
import { sanitizeText } from "../../../text/sanitize.js";
import { clickFromFlowMessage } from "../../../usecases/access.js";
import type { FlowDecisionOutcome, FlowRequests } from "../../../usecases/flows.js";
import { EDIT_INPUT_ACTION, EDIT_NOTE_BLOCK, EDIT_TEXT_BLOCK, editModal, FLOW_EDIT_ACTION, FLOW_EDIT_VIEW_CALLBACK } from "../blocks/index.js";
import { openEdit, sealEdit } from "../review/edit-binding.js";
import { flowReplyFor } from "./handlers.js";

const editClick = z.object({
  user: z.object({ id: z.string() }),
  trigger_id: z.string().max(255),
  container: z.object({ channel_id: z.string().optional(), message_ts: z.string().optional() }).partial().optional(),
  channel: z.object({ id: z.string() }).optional(),
  message: z.object({ ts: z.string() }).partial().optional(),
  actions: z.array(z.object({ action_id: z.string().max(255), value: z.string().max(2000) })).min(1),
});
const editValues = z.record(z.string(), z.record(z.string(), z.object({ value: z.string().nullish() }).passthrough()));

const NOT_THIS_REQUEST = "I can't match this button to a feedback request that is still waiting, so nothing was sent to the flow.";

export function registerFlowEdit(app: App, flows: FlowRequests, log: Logger, formKey: string | undefined): void {
  app.action(FLOW_EDIT_ACTION, async ({ ack, body, client }) => {
    await ack();
    const click = editClick.safeParse(body);
    if (!click.success) return void log.warn("flow edit click with an unexpected payload", { issues: click.error.issues.slice(0, 3).map((i) => i.path.join(".")) });
    const { user, trigger_id, actions } = click.data;
    const channel = click.data.container?.channel_id ?? click.data.channel?.id;
    const messageTs = click.data.container?.message_ts ?? click.data.message?.ts;
    const tell = (text: string) =>
      channel ? client.chat.postEphemeral({ channel, user: user.id, text }).catch((err) => log.warn("could not send ephemeral reply", { err: (err as Error).message })) : undefined;
    try {
      const request = await flows.get(actions[0]!.value);
      const emit = request ? outcomesOf(request) : [];
      if (request?.state !== "pending" || !channel || !messageTs || !clickFromFlowMessage(request, { channelId: channel, messageTs }) || !flowEditable(emit)) {
        return void (await tell(NOT_THIS_REQUEST));
      }
      const { head, rest } = editableSplit(request.output);
      const metadata = sealEdit(formKey, { r: request.id, u: user.id, c: channel, m: messageTs, h: head.length });
      await client.views.open({
        trigger_id,
        view: editModal({ taskName: request.methodName ?? request.flowName, head, restLength: rest.length, metadata, callbackId: FLOW_EDIT_VIEW_CALLBACK, receiver: "flow" }),
      });
    } catch (err) {
      log.warn("could not open the flow edit form", { err: (err as Error).message });
      await tell("I could not open the edit form. Please try again in a moment.");
    }
  });

  app.view(FLOW_EDIT_VIEW_CALLBACK, async ({ ack, body, view, client }) => {
    const userId = body.user.id;
    const facts = openEdit(formKey, view.private_metadata, userId);
    const values = editValues.safeParse(view.state.values);
    if (!facts || !values.success) {
      await ack({ response_action: "errors", errors: { [EDIT_TEXT_BLOCK]: "This form was opened by someone else or has expired: nothing was sent to the flow." } });
      return;
    }
    const edited = sanitizeText(values.data[EDIT_TEXT_BLOCK]?.[EDIT_INPUT_ACTION]?.value ?? "");
    const note = sanitizeText(values.data[EDIT_NOTE_BLOCK]?.[EDIT_INPUT_ACTION]?.value ?? "");
    if (!edited.trim()) {
      await ack({ response_action: "errors", errors: { [EDIT_TEXT_BLOCK]: "The edited output is empty. To refuse it, close this and answer with the request's buttons." } });
      return;
    }
    await ack();
    const tell = (text: string) =>
      client.chat.postEphemeral({ channel: facts.c, user: userId, text }).catch((err) => log.warn("could not send ephemeral reply", { err: (err as Error).message }));
    let outcome: FlowDecisionOutcome;
    try {
      const request = await flows.get(facts.r);
      if (!request || facts.h > request.output.length) return void (await tell(NOT_THIS_REQUEST));
      const emit = outcomesOf(request);
      const approveIndex = emit.findIndex((e) => outcomeLeaning(e) === "approve");
      const editedOutput = joinEdit(edited, request.output.slice(facts.h));
      outcome = await flows.decide({
        requestId: request.id,
        userId,
        ...(approveIndex >= 0 ? { outcomeIndex: approveIndex } : {}),
        feedback: note,
        channelId: facts.c,
        messageTs: facts.m,
        ...(unchangedEdit(request.output.slice(0, facts.h), edited) ? {} : { editedOutput }),
      });
    } catch (err) {
      log.error("flow edit and approve could not be recorded", { err: (err as Error).message });
      return void (await tell("⚠️ Your answer was not recorded: Crewline could not reach its database. Nothing was sent to the flow; please try again in a moment."));
    }
    const reply = flowReplyFor(outcome);
    if (reply) await tell(reply);
  });
}
