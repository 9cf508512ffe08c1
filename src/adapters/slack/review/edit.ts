// "Edit and approve…" on a review: the button opens a modal with the output pre-filled; submitting it
// approves with the edited text. The submission is sealed to the review message and the person who
// clicked (edit-binding.ts), and goes through the same access rule (access.ts) and the same
// exactly-once claim (Reviews.decide) as an Approve click.
import type { App } from "@slack/bolt";
import { z } from "zod";
import { approvalPolicy, editableSplit, joinEdit, selfApprovalRefused, unchangedEdit } from "../../../domain/approvals.js";
import { sanitizeText } from "../../../text/sanitize.js";
import { clickFromReviewMessage, clickMayDecide, reviewerGate } from "../../../usecases/access.js";
import type { DecisionOutcome } from "../../../usecases/lifecycle.js";
import { accessPorts } from "../access.js";
import { EDIT_ACTION, EDIT_INPUT_ACTION, EDIT_NOTE_BLOCK, EDIT_TEXT_BLOCK, EDIT_VIEW_CALLBACK, editModal } from "../blocks/index.js";
import type { FeatureDeps } from "../deps.js";
import { NOT_RECORDED, NOT_THIS_MESSAGE, replyFor, SELF_APPROVAL_REFUSED } from "./actions.js";
import { openEdit, sealEdit } from "./edit-binding.js";

const editClick = z.object({
  user: z.object({ id: z.string() }),
  trigger_id: z.string().max(255),
  channel: z.object({ id: z.string() }).optional(),
  container: z.object({ channel_id: z.string().optional(), thread_ts: z.string().optional(), message_ts: z.string().optional() }).partial().optional(),
  message: z.object({ ts: z.string(), thread_ts: z.string().optional() }).partial().optional(),
  actions: z.array(z.object({ action_id: z.string(), value: z.string().max(2000) })).min(1),
});

const editValues = z.record(z.string(), z.record(z.string(), z.object({ value: z.string().nullish() }).passthrough()));

/** How long opening the edit form waits for the reviewer rules before opening it anyway (trigger_id lives 3 s). */
const GATE_WAIT_MS = 1_000;

export const EDIT_NOT_PENDING = "This review is not waiting for a decision any more, so there is nothing to edit.";
export const EDIT_EXPIRED = "This edit form does not belong to you or to a review message, so nothing was sent to the crew. Click *Edit and approve…* on the review again.";

export function registerReviewEdit(app: App, deps: FeatureDeps): void {
  app.action(EDIT_ACTION, async ({ ack, body, client }) => {
    await ack();
    const click = editClick.safeParse(body);
    if (!click.success) {
      deps.log.warn("edit click with an unexpected payload", { issues: click.error.issues.slice(0, 3).map((i) => i.path.join(".")) });
      return;
    }
    const { user, actions, trigger_id } = click.data;
    const channel = click.data.container?.channel_id ?? click.data.channel?.id;
    const messageTs = click.data.container?.message_ts ?? click.data.message?.ts;
    const threadTs = click.data.message?.thread_ts ?? click.data.container?.thread_ts;
    const tell = async (text: string) => {
      if (!channel) return;
      await client.chat
        .postEphemeral({ channel, user: user.id, text, ...(threadTs ? { thread_ts: threadTs } : {}) })
        .catch((err) => deps.log.warn("could not send ephemeral reply", { err }));
    };
    const reviewId = actions[0]!.value;
    try {
      // Only one quick read before views.open: the trigger_id lives 3 s. Every rule is checked again on submission.
      const found = /^[0-9a-f-]{36}$/i.test(reviewId) ? await deps.lifecycle.reviews.get(reviewId) : null;
      if (!found || !channel || !messageTs || !clickFromReviewMessage(found, { channelId: channel, messageTs })) return void (await tell(NOT_THIS_MESSAGE));
      if (found.state !== "pending") return void (await tell(EDIT_NOT_PENDING));
      if (selfApprovalRefused(approvalPolicy(deps.crews.config(found.execution.crewName)), found.execution.userId, user.id)) {
        return void (await tell(SELF_APPROVAL_REFUSED));
      }
      // Who may decide, when it is known at once (group members are cached): no form for someone refused.
      // A slow answer does not hold the trigger: the submission is checked again either way.
      const gate = reviewerGate(accessPorts(client, deps), found, user.id).catch(() => undefined);
      const early = await Promise.race([gate, new Promise<undefined>((r) => setTimeout(() => r(undefined), GATE_WAIT_MS).unref())]);
      if (early && !early.allowed) return void (await tell(replyFor({ kind: "not_allowed", who: early.who })!));
      const { head, rest } = editableSplit(found.output);
      const metadata = sealEdit(deps.formKey, { r: found.id, u: user.id, c: channel, m: messageTs, h: head.length });
      await client.views.open({ trigger_id, view: editModal({ taskName: found.taskName, round: found.round, head, restLength: rest.length, metadata }) });
    } catch (err) {
      deps.log.warn("could not open the edit form", { err });
      await tell("I could not open the edit form. Please try again in a moment.");
    }
  });

  app.view(EDIT_VIEW_CALLBACK, async ({ ack, body, view, client }) => {
    const userId = body.user.id;
    const facts = openEdit(deps.formKey, view.private_metadata, userId);
    const values = editValues.safeParse(view.state.values);
    if (!facts || !values.success) {
      deps.log.warn("edit form submitted that was not opened by this user; refused", { userId });
      await ack({ response_action: "errors", errors: { [EDIT_TEXT_BLOCK]: "This form was opened by someone else or has expired: nothing was sent to the crew." } });
      return;
    }
    const edited = sanitizeText(values.data[EDIT_TEXT_BLOCK]?.[EDIT_INPUT_ACTION]?.value ?? "");
    const note = sanitizeText(values.data[EDIT_NOTE_BLOCK]?.[EDIT_INPUT_ACTION]?.value ?? "");
    if (!edited.trim()) {
      await ack({ response_action: "errors", errors: { [EDIT_TEXT_BLOCK]: "The edited output is empty. To reject the task, close this and use Reject with feedback." } });
      return;
    }
    // Answer Slack now (the crew call can take longer than 3 s); the thread shows the outcome.
    await ack();
    const tell = async (text: string, threadTs?: string | null) =>
      client.chat
        .postEphemeral({ channel: facts.c, user: userId, text, ...(threadTs ? { thread_ts: threadTs } : {}) })
        .catch((err) => deps.log.warn("could not send ephemeral reply", { err }));
    let outcome: DecisionOutcome;
    let threadTs: string | null | undefined;
    try {
      const found = await deps.lifecycle.reviews.get(facts.r);
      // In the direct message the run moved to, replies are not threaded.
      threadTs = found?.channelId ? undefined : found?.execution.threadTs;
      if (!found || facts.h > found.output.length || !(await clickMayDecide(accessPorts(client, deps), found, { userId, channelId: facts.c, messageTs: facts.m }))) {
        deps.log.warn("edit submission for another message refused", { userId });
        return void (await tell(EDIT_EXPIRED, threadTs));
      }
      const editedOutput = joinEdit(edited, found.output.slice(facts.h));
      // Nothing changed: an approval with a note, not an edit.
      const changed = !unchangedEdit(found.output.slice(0, facts.h), edited);
      outcome = await deps.lifecycle.reviews.decide({ reviewId: found.id, userId, approve: true, feedback: note, ...(changed ? { editedOutput } : {}) });
    } catch (err) {
      deps.log.error("edit and approve could not be recorded", { err });
      return void (await tell(NOT_RECORDED, threadTs));
    }
    const reply = replyFor(outcome);
    if (reply) await tell(reply, threadTs);
  });
}
