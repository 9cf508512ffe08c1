// "Edit and approve…" on a review or a flow request: the button opens a modal with the output
// pre-filled; submitting it approves with the edited text. The submission is sealed to the message and
// the person who clicked (form-seal.ts), and goes through the same access rules and the same
// exactly-once claim as an Approve click (the kind's use case, kinds.ts).
import type { App } from "@slack/bolt";
import { z } from "zod";
import { editableSplit, joinEdit, unchangedEdit } from "../../../domain/approvals.js";
import { sanitizeText } from "../../../text/sanitize.js";
import { accessPorts } from "../access.js";
import { EDIT_INPUT_ACTION, EDIT_NOTE_BLOCK, EDIT_TEXT_BLOCK, editModal } from "../blocks/index.js";
import type { FeatureDeps } from "../deps.js";
import { clickedMessage, clickFacts, payloadIssues, tellPrivately } from "../private-reply.js";
import { spendOnView } from "../views.js";
import { openDecisionForm, sealDecisionForm } from "./form-seal.js";
import { forEachKind, type KindPort, type Subject } from "./kinds.js";

export const decisionActions = z.array(z.object({ action_id: z.string().max(255), value: z.string().max(2000) })).min(1);
export const decisionClick = z.object({ ...clickedMessage, trigger_id: z.string().min(1).max(255), actions: decisionActions });

/** A view's (or a message's) input values, by block and action. */
export const inputValues = z.record(z.string(), z.record(z.string(), z.object({ value: z.string().nullish() }).passthrough()));

export function registerDecisionEdit(app: App, deps: FeatureDeps): void {
  forEachKind(deps, (kind) => registerEdit(app, deps, kind));
}

function registerEdit<S extends Subject>(app: App, deps: FeatureDeps, kind: KindPort<S>): void {
  const w = kind.words;
  app.action(kind.ids.edit, async ({ ack, body, client, context }) => {
    await ack();
    const click = decisionClick.safeParse(body);
    if (!click.success) return void deps.log.warn("edit click with an unexpected payload", { kind: kind.kind, issues: payloadIssues(click.error) });
    const { user, actions, trigger_id } = click.data;
    const { channel, messageTs, tell } = clickFacts(deps.log, client, click.data);
    try {
      // Only one quick read before views.open: the trigger_id lives 3 s. Every rule is checked again on submission.
      const found = await kind.find(actions[0]!.value);
      if (!found || !channel || !messageTs || !kind.fromMessage(found, { userId: user.id, channelId: channel, messageTs })) return void (await tell(w.notThisMessage));
      if (found.state !== "pending") return void (await tell(w.editNotPending));
      const refused = await kind.editRefused(found, user.id, accessPorts(client, deps, context, body));
      if (refused) return void (await tell(refused));
      const { head, rest } = editableSplit(found.output);
      const metadata = sealDecisionForm(deps.formKey, { r: found.id, u: user.id, c: channel, m: messageTs, h: head.length });
      const flow = kind.kind === "flow" ? ({ callbackId: kind.ids.editView, receiver: "flow" } as const) : {};
      await spendOnView(deps, kind.team(found)?.teamId, "views.open");
      await client.views.open({ trigger_id, view: editModal({ taskName: found.title, round: found.round, head, restLength: rest.length, metadata, ...flow }) });
    } catch (err) {
      deps.log.warn("could not open the edit form", { kind: kind.kind, err });
      await tell("I could not open the edit form. Please try again in a moment.");
    }
  });

  app.view(kind.ids.editView, async ({ ack, body, view, client, context }) => {
    const userId = body.user.id;
    const facts = openDecisionForm(deps.formKey, view.private_metadata, userId);
    const values = inputValues.safeParse(view.state.values);
    if (!facts || !values.success) {
      deps.log.warn("edit form submitted that was not opened by this user; refused", { userId });
      const errors = { [EDIT_TEXT_BLOCK]: `This form was opened by someone else or has expired: nothing was sent to the ${w.receiver}.` };
      return void (await ack({ response_action: "errors", errors }));
    }
    const edited = sanitizeText(values.data[EDIT_TEXT_BLOCK]?.[EDIT_INPUT_ACTION]?.value ?? "");
    const note = sanitizeText(values.data[EDIT_NOTE_BLOCK]?.[EDIT_INPUT_ACTION]?.value ?? "");
    if (!edited.trim()) return void (await ack({ response_action: "errors", errors: { [EDIT_TEXT_BLOCK]: w.editEmpty } }));
    // Answer Slack now (the answer's delivery can take longer than 3 s); the message shows the outcome.
    await ack();
    let threadTs: string | undefined;
    const tell = (text: string) => tellPrivately(client, deps.log, { channel: facts.c, user: userId, ...(threadTs ? { threadTs } : {}) }, text);
    let reply: string | undefined;
    try {
      const found = await kind.find(facts.r);
      threadTs = found ? kind.replyPlace(found, facts.c).threadTs : undefined;
      const place = { userId, channelId: facts.c, messageTs: facts.m };
      if (!found || facts.h > found.output.length || !(await kind.mayAct(found, place, accessPorts(client, deps, context, body)))) {
        deps.log.warn("edit submission for another message refused", { userId });
        return void (await tell(w.editExpired));
      }
      // Nothing changed: an approval with a note, not an edit.
      const changed = !unchangedEdit(found.output.slice(0, facts.h), edited);
      reply = await kind.approveEdited(found, place, note, changed ? joinEdit(edited, found.output.slice(facts.h)) : undefined);
    } catch (err) {
      deps.log.error("edit and approve could not be recorded", { kind: kind.kind, err });
      return void (await tell(w.notRecorded));
    }
    if (reply) await tell(reply);
  });
}
