// A decision button clicked on a review's or a flow request's message (Approve, Reject, one of a
// flow's outcomes, Send feedback): parsed, decided through the kind's use case (kinds.ts), and the
// clicker told privately what the updated message does not say.
import type { App } from "@slack/bolt";
import { z } from "zod";
import { sanitizeText } from "../../../text/sanitize.js";
import { accessPorts } from "../access.js";
import type { FeatureDeps } from "../deps.js";
import { clickedMessage, clickFacts, payloadIssues } from "../private-reply.js";
import { decisionActions, inputValues } from "./edit.js";
import { forEachKind, type KindPort, type Subject } from "./kinds.js";

const decideClick = z.object({ ...clickedMessage, actions: decisionActions, state: z.object({ values: inputValues }).optional() });

export function registerDecisionClicks(app: App, deps: FeatureDeps): void {
  forEachKind(deps, (kind) => registerClicks(app, deps, kind));
}

function registerClicks<S extends Subject>(app: App, deps: FeatureDeps, kind: KindPort<S>): void {
  const [block, input] = kind.ids.feedback;
  for (const actionId of kind.ids.decide) {
    app.action(actionId, async ({ ack, body, client, context }) => {
      await ack();
      const click = decideClick.safeParse(body);
      if (!click.success) return void deps.log.warn("decision click with an unexpected payload", { kind: kind.kind, issues: payloadIssues(click.error) });
      const { user, actions, state } = click.data;
      const { channel, messageTs, tell } = clickFacts(deps.log, client, click.data);
      const feedback = sanitizeText(state?.values[block]?.[input]?.value ?? "");
      let reply: string | undefined;
      try {
        const action = actions[0]!;
        reply = await kind.click(
          { actionId: action.action_id, value: action.value, feedback, userId: user.id, channelId: channel, messageTs },
          accessPorts(client, deps, context, body),
        );
      } catch (err) {
        // Nothing was claimed (or the claim could not be stored): it stays decidable.
        deps.log.error("decision click could not be recorded", { kind: kind.kind, err });
        reply = kind.words.notRecorded;
      }
      if (reply) await tell(reply);
    });
  }
}
