// Deciding by replying in a review's (or flow request's) thread: message events (message.channels,
// message.groups, and im for a run moved to a direct message) and the buttons of the private question
// asked about a reply that said neither approve nor reject, or that could mean several reviews. Thin:
// the text is cut first, the event parsed, and the use case (usecases/reply-decisions.ts) decides.
import type { AllMiddlewareArgs, App, RespondArguments, RespondFn, SlackActionMiddlewareArgs, types } from "@slack/bolt";
import { z } from "zod";
import { cutReply } from "../../../domain/reply-intent.js";
import { isBlank } from "../../../text/blank.js";
import { sanitizeText } from "../../../text/sanitize.js";
import { type ReplyChoice, type ReplyDecisions, type ReplyOutcome, toldWhenUnrecorded } from "../../../usecases/reply-decisions.js";
import { accessPorts } from "../access.js";
import { REPLY_APPROVE_ACTION, REPLY_IGNORE_ACTION, REPLY_PICK_ACTION, REPLY_REJECT_ACTION, replyQuestionAnswered, replyQuestionMessage } from "../blocks/index.js";
import { flowReplyFor, otherOrganisation, replyFor } from "../decisions/replies.js";
import type { FeatureDeps } from "../deps.js";
import { payloadIssues, tellPrivately } from "../private-reply.js";

const REPLY_NOT_RECORDED =
  "⚠️ Your reply was not taken as a decision: Crewline could not reach its database. Nothing was sent and the review is still open; please try again in a moment.";

/**
 * The subtypes of a person's reply: sent to the channel too ("Also send to #channel"), or with files
 * attached (its text is the message; a file alone says nothing to decide on).
 */
const REPLY_SUBTYPES = ["thread_broadcast", "file_share"] as const;
const isReplySubtype = (subtype: unknown) => subtype === undefined || (REPLY_SUBTYPES as readonly unknown[]).includes(subtype);
const id = z.string().min(1).max(255);
const ts = z.string().min(1).max(64);
/**
 * A person's reply in a thread: no subtype (edits, deletions, bot and system messages have one) but
 * REPLY_SUBTYPES, no bot, a thread that is not the message itself.
 */
const threadReply = z.object({
  type: z.literal("message"),
  subtype: z.enum(REPLY_SUBTYPES).optional(),
  bot_id: z.undefined(),
  user: id,
  channel: id,
  ts,
  thread_ts: ts,
  /** Who wrote the thread's parent: a review's or flow request's thread has the bot's (or, for a run started on a message, that message's author). */
  parent_user_id: id.optional().catch(undefined),
  /** Cut before it gets here. */
  text: z.string(),
});

/** A deleted reply in a thread (another deletion anywhere is left without a database write). */
const deletedMessage = z.object({ channel: id, deleted_ts: ts, previous_message: z.object({ thread_ts: ts }) });
/** The edited message of a message_changed event; its text is read apart (any size, cut first). */
const changedMessage = z.object({ channel: id, message: z.object({ ts, thread_ts: ts, user: id, bot_id: z.undefined().optional() }) });

const questionClick = z.object({
  user: z.object({ id }),
  channel: z.object({ id }).optional(),
  container: z
    .object({ channel_id: z.string().max(255), thread_ts: z.string().max(64) })
    .partial()
    .optional(),
  actions: z.array(z.object({ action_id: z.string().max(255), value: z.string().max(2000) })).min(1),
});

const CHOICES: Record<string, ReplyChoice> = { [REPLY_REJECT_ACTION]: "reject", [REPLY_APPROVE_ACTION]: "approve", [REPLY_IGNORE_ACTION]: "ignore" };

export function registerReplyDecisions(app: App, deps: FeatureDeps, replies: ReplyDecisions): void {
  app.event("message", async ({ event, body, client, context }) => {
    const raw = event as unknown as Record<string, unknown>;
    // A reply deleted after its private question was asked: the question must not send it.
    if (raw.subtype === "message_deleted") {
      const deleted = deletedMessage.safeParse(raw);
      if (deleted.success && deleted.data.previous_message.thread_ts !== deleted.data.deleted_ts)
        await replies.onDeleted(deleted.data.channel, deleted.data.deleted_ts).catch((err) => deps.log.warn("a deleted reply could not be forgotten", { err }));
      return;
    }
    // A reply edited after its private question was asked: the question sends it as it reads now.
    if (raw.subtype === "message_changed") {
      const changed = changedMessage.safeParse(raw);
      const text = (raw.message as { text?: unknown } | undefined)?.text;
      if (changed.success && typeof text === "string" && changed.data.message.thread_ts !== changed.data.message.ts) {
        const { channel, message } = changed.data;
        await replies.onEdited(channel, message.ts, message.user, sanitizeText(cutReply(text).text)).catch((err) => deps.log.warn("an edited reply could not be taken", { err }));
      }
      return;
    }
    // Most messages are not replies in a thread: left before anything else is read.
    if (typeof raw.thread_ts !== "string" || typeof raw.text !== "string" || !isReplySubtype(raw.subtype) || raw.bot_id !== undefined) return;
    if (raw.subtype === "file_share" && isBlank(raw.text)) return;
    // Any size: cut first, then made storable (NUL, lone surrogates), then parsed.
    const cut = cutReply(raw.text);
    const parsed = threadReply.safeParse({ ...pick(raw), text: sanitizeText(cut.text) });
    if (!parsed.success || parsed.data.thread_ts === parsed.data.ts) return;
    const reply = { channelId: parsed.data.channel, threadTs: parsed.data.thread_ts, ts: parsed.data.ts, userId: parsed.data.user, text: parsed.data.text, cut: cut.cut };
    const tell = (text: string, blocks?: types.KnownBlock[]) =>
      tellPrivately(client, deps.log, { channel: reply.channelId, user: reply.userId, threadTs: reply.threadTs }, text, blocks);
    let outcome: ReplyOutcome;
    try {
      outcome = await replies.onReply(reply, accessPorts(client, deps, context, body));
    } catch (err) {
      deps.log.error("reply in a thread could not be handled", { err });
      // Someone who meant to decide, in a thread that may hold a review, hears it was not taken; other talk stays unanswered.
      if (toldWhenUnrecorded({ text: reply.text, parentUserId: parsed.data.parent_user_id }, context.botUserId)) await tell(REPLY_NOT_RECORDED);
      return;
    }
    if (outcome.kind === "question") {
      const message = replyQuestionMessage(outcome.question);
      return void (await tell(message.text, message.blocks));
    }
    const text = wordsFor(outcome, reply.userId);
    if (text) await tell(text);
  });

  /** A click on one of a question's buttons: answered by `answer`, the question replaced by what happened. */
  const onQuestionClick =
    (answer: (value: string, actionId: string, userId: string, ports: ReturnType<typeof accessPorts>) => Promise<{ choice: ReplyChoice; outcome: ReplyOutcome }>) =>
    async ({ ack, body, client, respond, context }: SlackActionMiddlewareArgs & AllMiddlewareArgs) => {
      await ack();
      const click = questionClick.safeParse(body);
      if (!click.success) return void deps.log.warn("reply question click with an unexpected payload", { issues: payloadIssues(click.error) });
      const { user, actions, container } = click.data;
      const channel = container?.channel_id ?? click.data.channel?.id;
      const tell = (text: string) =>
        channel ? tellPrivately(client, deps.log, { channel, user: user.id, ...(container?.thread_ts ? { threadTs: container.thread_ts } : {}) }, text) : Promise.resolve();
      let answered: { choice: ReplyChoice; outcome: ReplyOutcome };
      try {
        answered = await answer(actions[0]!.value, actions[0]!.action_id, user.id, accessPorts(client, deps, context, body));
      } catch (err) {
        // Nothing was taken: the question stays, with its buttons, for another try.
        deps.log.error("reply question answer could not be recorded", { err });
        return void (await tell(REPLY_NOT_RECORDED));
      }
      const { choice, outcome } = answered;
      const text = wordsFor(outcome, user.id);
      // The question is answered: it is replaced by what happened (Ignore removes it), so no live
      // buttons stay on screen. Without a response_url that works, the words come as a new message.
      const replacement = choice === "ignore" ? { delete_original: true } : { replace_original: true, ...replyQuestionAnswered(choice, text) };
      const replaced = await replaceQuestion(respond, replacement, deps);
      if (!replaced && text) await tell(text);
    };

  for (const [actionId, choice] of Object.entries(CHOICES))
    app.action(
      actionId,
      onQuestionClick(async (value, _action, userId, ports) => ({ choice, outcome: await replies.onQuestionAnswer(value, choice, userId, ports) })),
    );
  // "Which review?": each button names one, and says approve or reject as the reply did.
  app.action(
    REPLY_PICK_ACTION,
    onQuestionClick(async (value, action, userId, ports) => {
      const choice = action.includes("_approve_") ? "approve" : "reject";
      return { choice, outcome: await replies.onPick(value, choice, userId, ports) };
    }),
  );
}

/** Answers the clicked question through the click's response_url; false when there is none or Slack refused it. */
async function replaceQuestion(respond: RespondFn | undefined, message: RespondArguments, deps: FeatureDeps): Promise<boolean> {
  if (!respond) return false;
  try {
    await respond(message);
    return true;
  } catch (err) {
    deps.log.warn("could not replace the answered reply question", { err });
    return false;
  }
}

/** The fields of a message event the parser reads (the text apart: it is cut first), each present: zod 4 refuses a missing key even for z.undefined(). */
function pick(raw: Record<string, unknown>) {
  return {
    type: raw.type,
    subtype: raw.subtype,
    bot_id: raw.bot_id,
    user: raw.user,
    channel: raw.channel,
    ts: raw.ts,
    thread_ts: raw.thread_ts,
    parent_user_id: raw.parent_user_id,
  };
}

/** What the replier (`asker`) is told privately; undefined when the updated message says it all (or nothing is said). */
function wordsFor(outcome: ReplyOutcome, asker?: string): string | undefined {
  switch (outcome.kind) {
    case "ignored":
    case "question":
      return undefined;
    case "review":
      return outcome.outcome.kind === "feedback_required"
        ? "Please write what should change after the colon (`changes: shorter intro`): the crew re-runs the task with it. Nothing was sent to the crew."
        : replyFor(outcome.outcome, asker);
    case "flow":
      return outcome.outcome.kind === "feedback_required" ? "Please write your feedback after the colon: it is what the flow receives." : flowReplyFor(outcome.outcome, asker);
    case "unknown_question":
      return "I can't match this button to a reply of yours, so nothing was sent.";
    case "answered_already":
      return "You already answered this question.";
    case "no_longer_allowed":
      return "You can no longer decide this from here, so nothing was sent.";
    case "other_organisation":
      return otherOrganisation(outcome.of);
    case "both_waiting":
      return "A flow request and a crew review both wait for an answer in this thread, so your reply was not taken as either: please use the buttons on the message you mean.";
  }
}
