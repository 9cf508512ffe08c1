// Reassign, clicked on a pending review: whoever may decide it picks a person and gives a reason in a
// modal; the review is handed to that person (escalation.ts), who is mentioned in the thread, may
// decide it, and sees it on their App Home.

import type { App } from "@slack/bolt";
import { z } from "zod";
import { reviewChannel } from "../../../domain/refusals.js";
import { sanitizeText } from "../../../text/sanitize.js";
import { clickMayDecide, mayReassignReview } from "../../../usecases/access.js";
import { accessPorts } from "../access.js";
import {
  REASSIGN_ACTION,
  REASSIGN_REASON_ACTION,
  REASSIGN_REASON_BLOCK,
  REASSIGN_USER_ACTION,
  REASSIGN_USER_BLOCK,
  REASSIGN_VIEW_CALLBACK,
  reassignModal,
} from "../blocks/index.js";
import type { FeatureDeps } from "../deps.js";
import { NOT_THIS_MESSAGE } from "./actions.js";

export const reassignClick = z.object({
  user: z.object({ id: z.string() }),
  trigger_id: z.string().min(1),
  channel: z.object({ id: z.string() }).optional(),
  container: z.object({ channel_id: z.string().optional(), message_ts: z.string().optional(), thread_ts: z.string().optional() }).partial().optional(),
  message: z.object({ ts: z.string(), thread_ts: z.string().optional() }).partial().optional(),
  actions: z.array(z.object({ action_id: z.string(), value: z.string().max(100) })).min(1),
});

export const reassignSubmission = z.object({
  user: z.object({ id: z.string() }),
  view: z.object({
    private_metadata: z.string().max(100),
    state: z.object({
      values: z.record(z.string(), z.record(z.string(), z.object({ value: z.string().nullish(), selected_user: z.string().nullish() }).passthrough())),
    }),
  }),
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const USER_ID = /^[UW][A-Z0-9]{2,}$/;

export function registerReassignActions(app: App, deps: FeatureDeps): void {
  app.action(REASSIGN_ACTION, async ({ ack, body, client }) => {
    await ack();
    const click = reassignClick.safeParse(body);
    if (!click.success) return void deps.log.warn("reassign click with an unexpected payload");
    const { user, actions, trigger_id } = click.data;
    const channel = click.data.container?.channel_id ?? click.data.channel?.id;
    const messageTs = click.data.container?.message_ts ?? click.data.message?.ts;
    const threadTs = click.data.message?.thread_ts ?? click.data.container?.thread_ts;
    const tell = (text: string) =>
      channel
        ? client.chat
            .postEphemeral({ channel, user: user.id, text, ...(threadTs ? { thread_ts: threadTs } : {}) })
            .then(() => undefined)
            .catch((err) => deps.log.warn("could not send ephemeral reply", { err }))
        : Promise.resolve();
    const reviewId = actions[0]!.value;
    const found = UUID.test(reviewId) ? await deps.lifecycle.reviews.get(reviewId) : null;
    if (!found || !(await clickMayDecide(accessPorts(client, deps), found, { userId: user.id, channelId: channel, messageTs }))) return tell(NOT_THIS_MESSAGE);
    if (found.state !== "pending") return tell("This review is no longer waiting for a decision, so it cannot be reassigned.");
    const may = await mayReassignReview(accessPorts(client, deps), found, user.id);
    if (!may.ok) return tell(`Only ${may.who ?? "people who may decide this review"} may reassign it.`);
    await client.views.open({ trigger_id, view: reassignModal({ reviewId: found.id, taskName: found.taskName }) });
  });

  app.view(REASSIGN_VIEW_CALLBACK, async ({ ack, body, client }) => {
    const submission = reassignSubmission.safeParse(body);
    if (!submission.success) return void (await ack());
    const { user, view } = submission.data;
    const to = view.state.values[REASSIGN_USER_BLOCK]?.[REASSIGN_USER_ACTION]?.selected_user ?? "";
    const reason = sanitizeText(view.state.values[REASSIGN_REASON_BLOCK]?.[REASSIGN_REASON_ACTION]?.value ?? "").trim();
    if (!USER_ID.test(to)) return void (await ack({ response_action: "errors", errors: { [REASSIGN_USER_BLOCK]: "Choose the person who should decide it." } }));
    if (!reason) return void (await ack({ response_action: "errors", errors: { [REASSIGN_REASON_BLOCK]: "Say why they should decide it." } }));
    const found = UUID.test(view.private_metadata) ? await deps.lifecycle.reviews.get(view.private_metadata) : null;
    if (!found) return void (await ack({ response_action: "errors", errors: { [REASSIGN_USER_BLOCK]: "This review no longer exists." } }));
    const may = await mayReassignReview(accessPorts(client, deps), found, user.id);
    if (!may.ok) return void (await ack({ response_action: "errors", errors: { [REASSIGN_USER_BLOCK]: "You may not reassign this review." } }));
    if (found.state !== "pending") return void (await ack({ response_action: "errors", errors: { [REASSIGN_USER_BLOCK]: "This review is no longer waiting for a decision." } }));
    await ack();
    const outcome = await deps.escalations?.reassign({ reviewId: found.id, by: user.id, to, reason });
    // Published with the token of the run's workspace (installed in many, the app-level client is not it).
    if (outcome?.kind === "reassigned") await deps.publishHome?.(to, { teamId: found.execution.teamId, enterpriseId: found.execution.enterpriseId });
    if (outcome && outcome.kind !== "reassigned" && outcome.kind !== "same_person") {
      await client.chat
        .postEphemeral({
          channel: reviewChannel(found, found.execution),
          user: user.id,
          text: "The review was decided before it could be reassigned.",
          ...(found.execution.threadTs && !found.channelId ? { thread_ts: found.execution.threadTs } : {}),
        })
        .catch((err) => deps.log.warn("could not send ephemeral reply", { err }));
    }
  });
}
