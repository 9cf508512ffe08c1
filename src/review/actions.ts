// Approve / Reject clicked on a review message in a run's thread.
import type { App } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import { z } from "zod";
import type { DecisionOutcome } from "../lifecycle/index.js";
import type { FeatureDeps } from "../slack/deps.js";
import { APPROVE_ACTION, FEEDBACK_ACTION, FEEDBACK_BLOCK, REJECT_ACTION } from "../slack/blocks/index.js";

const reviewClick = z.object({
  user: z.object({ id: z.string() }),
  channel: z.object({ id: z.string() }).optional(),
  container: z.object({ channel_id: z.string().optional(), thread_ts: z.string().optional(), message_ts: z.string().optional() }).partial().optional(),
  message: z.object({ ts: z.string(), thread_ts: z.string().optional() }).partial().optional(),
  actions: z.array(z.object({ action_id: z.string(), value: z.string().max(2000) })).min(1),
  state: z
    .object({ values: z.record(z.string(), z.record(z.string(), z.object({ value: z.string().nullish() }).passthrough())) })
    .optional(),
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
      const feedback = state?.values[FEEDBACK_BLOCK]?.[FEEDBACK_ACTION]?.value ?? "";
      const outcome = await deps.lifecycle.reviews.decide({
        reviewId: actions[0]!.value,
        userId: user.id,
        approve: actions[0]!.action_id === APPROVE_ACTION,
        feedback,
      });
      const reply = replyFor(outcome);
      if (!reply) return;
      const channel = click.data.channel?.id ?? click.data.container?.channel_id;
      const threadTs = click.data.message?.thread_ts ?? click.data.container?.thread_ts;
      if (channel) await tellUser(client, channel, user.id, threadTs, reply).catch((err) => deps.log.warn("could not send ephemeral reply", { err }));
    });
  }
}

/** What the clicker is told privately; undefined when the updated message says it all. */
export function replyFor(outcome: DecisionOutcome): string | undefined {
  switch (outcome.kind) {
    case "decided":
      return undefined;
    case "unknown_review":
      return "I can't find this review any more, so nothing was sent to the crew.";
    case "feedback_required":
      return "Please write what should change in the feedback field before rejecting: the crew re-runs the task with it.";
    case "not_allowed":
      return `Only ${outcome.who} may decide this review, so nothing was sent to the crew.`;
    case "already_decided": {
      const { review } = outcome;
      if (review.state === "closed") return "This review is closed: the run no longer needs a decision on it.";
      const verb = review.decision === "reject" ? "rejected" : "approved";
      return review.decidedBy ? `<@${review.decidedBy}> already ${review.state === "deciding" ? "is deciding" : verb} this review.` : "This review was already decided.";
    }
    case "not_waiting":
      return `The crew wasn't waiting for this decision, so nothing changed. ${outcome.message}`;
    case "resume_failed":
      return `Your decision did not reach the crew, so the review is open again. ${outcome.message}`;
  }
}

async function tellUser(client: WebClient, channel: string, user: string, threadTs: string | undefined, text: string) {
  await client.chat.postEphemeral({ channel, user, text, ...(threadTs ? { thread_ts: threadTs } : {}) });
}
