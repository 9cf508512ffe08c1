// Approve / Reject clicked on a review message in a run's thread.
import type { App } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import { z } from "zod";
import { sanitizeText } from "../../../text/sanitize.js";
import { clickMayDecide } from "../../../usecases/access.js";
import type { DecisionOutcome } from "../../../usecases/lifecycle.js";
import { accessPorts } from "../access.js";
import { APPROVE_ACTION, FEEDBACK_ACTION, FEEDBACK_BLOCK, REJECT_ACTION } from "../blocks/index.js";
import { NOT_RECORDED, NOT_THIS_MESSAGE, replyFor } from "../decisions/replies.js";
import type { FeatureDeps } from "../deps.js";

export const STILL_POSTING = "This review is still being posted, so nothing was sent to the crew yet. Please click again in a moment.";

const reviewClick = z.object({
  user: z.object({ id: z.string() }),
  channel: z.object({ id: z.string() }).optional(),
  container: z.object({ channel_id: z.string().optional(), thread_ts: z.string().optional(), message_ts: z.string().optional() }).partial().optional(),
  message: z.object({ ts: z.string(), thread_ts: z.string().optional() }).partial().optional(),
  actions: z.array(z.object({ action_id: z.string(), value: z.string().max(2000) })).min(1),
  state: z.object({ values: z.record(z.string(), z.record(z.string(), z.object({ value: z.string().nullish() }).passthrough())) }).optional(),
});

export function registerReviewActions(app: App, deps: FeatureDeps): void {
  for (const actionId of [APPROVE_ACTION, REJECT_ACTION]) {
    app.action(actionId, async ({ ack, body, client }) => {
      await ack();
      const click = reviewClick.safeParse(body);
      if (!click.success) {
        deps.log.warn("review click with an unexpected payload", { issues: click.error.issues.slice(0, 3).map((i) => i.path.join(".")) });
        return;
      }
      const { user, actions, state } = click.data;
      const feedback = sanitizeText(state?.values[FEEDBACK_BLOCK]?.[FEEDBACK_ACTION]?.value ?? "");
      const channel = click.data.container?.channel_id ?? click.data.channel?.id;
      const messageTs = click.data.container?.message_ts ?? click.data.message?.ts;
      const threadTs = click.data.message?.thread_ts ?? click.data.container?.thread_ts;
      const tell = async (reply: string) => {
        if (channel) await tellUser(client, channel, user.id, threadTs, reply).catch((err) => deps.log.warn("could not send ephemeral reply", { err }));
      };
      const reviewId = actions[0]!.value;
      let outcome: DecisionOutcome;
      try {
        // The review must be the one this message shows, in a run the clicker may see.
        const found = isUuidLike(reviewId) ? await postedReview(deps, reviewId) : null;
        if (found && !found.messageTs) {
          // Slack shows the message; its ts is not recorded yet (a slow or retaken post): nothing to match it against.
          deps.log.warn("review click before its message was recorded", { userId: user.id });
          return void (await tell(STILL_POSTING));
        }
        if (found && !(await clickMayDecide(accessPorts(client, deps), found, { userId: user.id, channelId: channel, messageTs }))) {
          deps.log.warn("review click from another message refused", { userId: user.id });
          return void (await tell(NOT_THIS_MESSAGE));
        }
        outcome = await deps.lifecycle.reviews.decide({ reviewId, userId: user.id, approve: actions[0]!.action_id === APPROVE_ACTION, feedback });
      } catch (err) {
        // Nothing was claimed (or the claim could not be stored): the review stays decidable.
        deps.log.error("review click could not be recorded", { err });
        return void (await tell(NOT_RECORDED));
      }
      const reply = replyFor(outcome);
      if (reply) await tell(reply);
    });
  }
}

function isUuidLike(id: string): boolean {
  return /^[0-9a-f-]{36}$/i.test(id);
}

async function tellUser(client: WebClient, channel: string, user: string, threadTs: string | undefined, text: string) {
  await client.chat.postEphemeral({ channel, user, text, ...(threadTs ? { thread_ts: threadTs } : {}) });
}

/**
 * The review, once the ts of its message is recorded: Slack shows a message a moment before the
 * outbox records its ts, and a click in that moment would otherwise be refused as coming from
 * another message. Waits up to about 2 s (the click was acknowledged already).
 */
async function postedReview(deps: FeatureDeps, reviewId: string) {
  let found = await deps.lifecycle.reviews.get(reviewId);
  for (let i = 0; found && !found.messageTs && i < 10; i++) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    found = await deps.lifecycle.reviews.get(reviewId);
  }
  return found;
}
