// Approve / Reject clicked on a review message in a run's thread.
import type { App } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import { z } from "zod";
import { sanitizeText } from "../../../text/sanitize.js";
import { clickMayDecide } from "../../../usecases/access.js";
import type { DecisionOutcome } from "../../../usecases/lifecycle.js";
import { accessPorts } from "../access.js";
import { APPROVE_ACTION, escapeMrkdwn, FEEDBACK_ACTION, FEEDBACK_BLOCK, REJECT_ACTION, userMention } from "../blocks/index.js";
import type { FeatureDeps } from "../deps.js";

export const NOT_THIS_MESSAGE = "This button does not belong to the review it names, so nothing was sent to the crew.";
export const STILL_POSTING = "This review is still being posted, so nothing was sent to the crew yet. Please click again in a moment.";
export const SELF_APPROVAL_REFUSED =
  "You started this run, and this crew needs its reviews approved by someone else, so your approval was not counted and nothing was sent to the crew. You may still reject with feedback.";
export const NOT_RECORDED =
  "⚠️ Your decision was not recorded: Crewline could not reach its database. Nothing was sent to the crew and the review is still open; please try again in a moment.";

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
    case "self_approval_refused":
      return SELF_APPROVAL_REFUSED;
    case "approval_recorded":
      return `Your approval is recorded: ${outcome.approvals} of ${outcome.required} approvals. The crew goes on once ${outcome.required - outcome.approvals} more ${outcome.required - outcome.approvals === 1 ? "person approves" : "people approve"}.`;
    case "approval_counted":
      return "Your approval is recorded and counted: with it the review had the approvals it needs, and the crew is being told.";
    case "already_approved":
      return `You already approved this review (${outcome.approvals} of ${outcome.required} approvals): it needs approvals from ${outcome.required} different people.`;
    case "already_decided": {
      const { review } = outcome;
      if (review.state === "closed") return "This review is closed: the run no longer needs a decision on it.";
      const verb = review.decision === "reject" ? "rejected" : "approved";
      return review.decidedBy ? `${userMention(review.decidedBy)} already ${review.state === "deciding" ? "is deciding" : verb} this review.` : "This review was already decided.";
    }
    case "not_waiting":
      // The crew's own words (its error message, its name) are outside text: escaped.
      return `The crew wasn't waiting for this decision, so nothing changed. ${escapeMrkdwn(outcome.message)}`;
    case "resume_failed":
      return `Your decision did not reach the crew, so the review is open again. ${escapeMrkdwn(outcome.message)}`;
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
