// A decision button clicked on a review's or a flow request's message (Approve, Reject, one of a
// flow's outcomes, Send feedback): parsed, decided through the kind's use case (kinds.ts), and the
// clicker told privately what the updated message does not say.
import type { App } from "@slack/bolt";
import { z } from "zod";
import { sanitizeText } from "../../../text/sanitize.js";
import { accessPorts } from "../access.js";
import type { FeatureDeps } from "../deps.js";
import { clickFacts } from "./edit.js";
import { forEachKind, type KindPort, type Subject } from "./kinds.js";

const decideClick = z.object({
  user: z.object({ id: z.string() }),
  channel: z.object({ id: z.string() }).optional(),
  container: z.object({ channel_id: z.string().optional(), thread_ts: z.string().optional(), message_ts: z.string().optional() }).partial().optional(),
  message: z.object({ ts: z.string(), thread_ts: z.string().optional() }).partial().optional(),
  actions: z.array(z.object({ action_id: z.string().max(255), value: z.string().max(2000) })).min(1),
  state: z.object({ values: z.record(z.string(), z.record(z.string(), z.object({ value: z.string().nullish() }).passthrough())) }).optional(),
});

export function registerDecisionClicks(app: App, deps: FeatureDeps): void {
  forEachKind(deps, (kind) => registerClicks(app, deps, kind));
}

function registerClicks<S extends Subject>(app: App, deps: FeatureDeps, kind: KindPort<S>): void {
  const [block, input] = kind.ids.feedback;
  for (const actionId of kind.ids.decide) {
    app.action(actionId, async ({ ack, body, client, context }) => {
      await ack();
      const click = decideClick.safeParse(body);
      if (!click.success)
        return void deps.log.warn("decision click with an unexpected payload", { kind: kind.kind, issues: click.error.issues.slice(0, 3).map((i) => i.path.join(".")) });
      const { user, actions, state } = click.data;
      const { channel, messageTs, tell } = clickFacts(deps, client, click.data);
      const feedback = sanitizeText(state?.values[block]?.[input]?.value ?? "");
      let reply: string | undefined;
      try {
        const action = actions[0]!;
        reply = await kind.click({ actionId: action.action_id, value: action.value, feedback, userId: user.id, channelId: channel, messageTs }, accessPorts(client, deps, context));
      } catch (err) {
        // Nothing was claimed (or the claim could not be stored): it stays decidable.
        deps.log.error("decision click could not be recorded", { kind: kind.kind, err });
        reply = kind.words.notRecorded;
      }
      if (reply) await tell(reply);
    });
  }
}
