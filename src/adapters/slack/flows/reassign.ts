// Reassign, clicked on a pending flow feedback request: whoever may answer it picks a person and gives
// a reason in the same modal as a crew review's; the request is handed to that person (service.ts
// reassign), who is mentioned under it, may answer it, and sees it on their App Home at once.
import type { App } from "@slack/bolt";
import { sanitizeText } from "../../../text/sanitize.js";
import { clickFromFlowMessage, mayAnswerFlowRequest } from "../../../usecases/access.js";
import { accessPorts } from "../access.js";
import {
  FLOW_REASSIGN_ACTION,
  FLOW_REASSIGN_VIEW_CALLBACK,
  REASSIGN_REASON_ACTION,
  REASSIGN_REASON_BLOCK,
  REASSIGN_USER_ACTION,
  REASSIGN_USER_BLOCK,
  reassignModal,
} from "../blocks/index.js";
import type { FeatureDeps } from "../deps.js";
import { reassignClick, reassignSubmission, USER_ID } from "../review/reassign.js";

export function registerFlowReassign(app: App, deps: FeatureDeps): void {
  const flows = deps.flows;
  if (!flows) return;

  app.action(FLOW_REASSIGN_ACTION, async ({ ack, body, client }) => {
    await ack();
    const click = reassignClick.safeParse(body);
    if (!click.success) return void deps.log.warn("flow reassign click with an unexpected payload");
    const { user, actions, trigger_id } = click.data;
    const channel = click.data.container?.channel_id ?? click.data.channel?.id;
    const messageTs = click.data.container?.message_ts ?? click.data.message?.ts;
    const tell = (text: string) =>
      channel
        ? client.chat
            .postEphemeral({ channel, user: user.id, text })
            .then(() => undefined)
            .catch((err) => deps.log.warn("could not send ephemeral reply", { err }))
        : Promise.resolve();
    const request = await flows.get(actions[0]!.value);
    // Only from the request's own message.
    if (!request || !clickFromFlowMessage(request, { channelId: channel, messageTs })) return tell("I can't match this button to a feedback request, so nothing was reassigned.");
    if (request.state !== "pending") return tell("This request is no longer waiting for an answer, so it cannot be reassigned.");
    if (!(await mayAnswerFlowRequest(accessPorts(client, deps), request, user.id)))
      return tell(`Only ${flows.who(request) ?? "people who may answer this request"} may reassign it.`);
    await client.views.open({
      trigger_id,
      view: reassignModal({
        reviewId: request.id,
        taskName: `${request.flowName}${request.methodName ? ` · ${request.methodName}` : ""}`,
        callbackId: FLOW_REASSIGN_VIEW_CALLBACK,
        what: "request",
      }),
    });
  });

  app.view(FLOW_REASSIGN_VIEW_CALLBACK, async ({ ack, body, client }) => {
    const submission = reassignSubmission.safeParse(body);
    if (!submission.success) return void (await ack());
    const { user, view } = submission.data;
    const to = view.state.values[REASSIGN_USER_BLOCK]?.[REASSIGN_USER_ACTION]?.selected_user ?? "";
    const reason = sanitizeText(view.state.values[REASSIGN_REASON_BLOCK]?.[REASSIGN_REASON_ACTION]?.value ?? "").trim();
    if (!USER_ID.test(to)) return void (await ack({ response_action: "errors", errors: { [REASSIGN_USER_BLOCK]: "Choose the person who should answer it." } }));
    if (!reason) return void (await ack({ response_action: "errors", errors: { [REASSIGN_REASON_BLOCK]: "Say why they should answer it." } }));
    const request = await flows.get(view.private_metadata);
    if (!request) return void (await ack({ response_action: "errors", errors: { [REASSIGN_USER_BLOCK]: "This request no longer exists." } }));
    if (!(await mayAnswerFlowRequest(accessPorts(client, deps), request, user.id)))
      return void (await ack({ response_action: "errors", errors: { [REASSIGN_USER_BLOCK]: "You may not reassign this request." } }));
    if (request.state !== "pending") return void (await ack({ response_action: "errors", errors: { [REASSIGN_USER_BLOCK]: "This request is no longer waiting for an answer." } }));
    await ack();
    const outcome = await flows.reassign({ requestId: request.id, by: user.id, to, reason });
    // Published with the token of the request's workspace (installed in many, the app-level client is not it).
    if (outcome.kind === "reassigned") await deps.publishHome?.(to, request.teamId ? { teamId: request.teamId } : undefined);
    else if (outcome.kind !== "same_person")
      await client.chat
        .postEphemeral({ channel: request.channelId, user: user.id, text: "The request was answered before it could be reassigned." })
        .catch((err) => deps.log.warn("could not send ephemeral reply", { err }));
  });
}
