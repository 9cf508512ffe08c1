// The private question asked about a reply in a review's (or flow request's) thread that said neither
// approve nor reject, or that approved or rejected where several reviews wait: never a guess. Their
// value is the recorded reply's id (and the review a "which" button names); the reply's text stays on
// the server. Pure builder.
import type { types } from "@slack/bolt";
import { REPLY_TEXT_MAX } from "../../../domain/reply-intent.js";
import type { ReplyQuestion } from "../../../usecases/reply-decisions.js";
import { context, mrkdwn, section } from "./kit.js";
import { LIMITS } from "./limits.js";
import { escapeMrkdwn, truncatePlain } from "./text.js";

export const REPLY_REJECT_ACTION = "reply_reject";
export const REPLY_APPROVE_ACTION = "reply_approve";
export const REPLY_IGNORE_ACTION = "reply_ignore";
export const REPLY_QUESTION_BLOCK = "reply_question";
/** The buttons of the "which review" question: one per review, each its own action id (Slack wants them distinct in a block). */
export const replyPickAction = (approve: boolean, index: number) => `reply_pick_${approve ? "approve" : "reject"}_${index}`;
export const REPLY_PICK_ACTION = /^reply_pick_(approve|reject)_\d{1,2}$/;
const REPLY_PICK_BLOCK_PREFIX = "reply_pick_";
/** Characters of a review's output shown beside its button (it was cut to 200 before it got here). */
const EXCERPT_SHOWN = 120;

const NAME_MAX = 80;
const name = (text: string) => `*${escapeMrkdwn(truncatePlain(text, NAME_MAX))}*`;
const button = (actionId: string, text: string, value: string, style?: "primary" | "danger"): types.Button => ({
  type: "button",
  action_id: actionId,
  value,
  text: { type: "plain_text", text: truncatePlain(text, LIMITS.buttonText) },
  ...(style ? { style } : {}),
});

/** The question's words and buttons, for chat.postEphemeral. */
export function replyQuestionMessage(q: ReplyQuestion): { text: string; blocks: types.KnownBlock[] } {
  const buttons: types.Button[] = [];
  const which: types.KnownBlock[] = [];
  const notes: string[] = [];
  let question: string;
  if (q.kind === "review") {
    question = `Reject ${name(q.taskName)} round ${q.round} with your reply as feedback?`;
    buttons.push(button(REPLY_REJECT_ACTION, "Reject with this", q.replyId, "danger"), button(REPLY_APPROVE_ACTION, "Approve", q.replyId, "primary"));
    if (q.otherPending > 0)
      notes.push(
        `${q.otherPending} other ${q.otherPending === 1 ? "review waits" : "reviews wait"} in this thread: this question is about the newest; an \`approve\` or \`changes: …\` reply asks which one.`,
      );
    notes.push("Next time, reply `approve`, `lgtm` or 👍 to approve, or `changes: …` to reject with feedback.");
  } else if (q.kind === "which") {
    const count = q.reviews.length + q.more;
    question = q.approve ? `${count} reviews wait in this thread. Which one do you approve?` : `${count} reviews wait in this thread. Which one should get your reply as feedback?`;
    // One section per review, its button beside what tells it apart: task, round, crew, first words.
    q.reviews.forEach((r, i) => {
      const excerpt = truncatePlain(r.excerpt.replace(/\s+/g, " ").trim(), EXCERPT_SHOWN);
      which.push({
        type: "section",
        block_id: `${REPLY_PICK_BLOCK_PREFIX}${i}`,
        text: mrkdwn(`${name(r.taskName)} round ${r.round} of ${name(r.crewName)}${excerpt ? `\n${escapeMrkdwn(excerpt)}` : ""}`),
        accessory: button(replyPickAction(q.approve, i), q.approve ? "Approve" : "Reject with this", r.value, q.approve ? "primary" : "danger"),
      });
    });
    if (q.more > 0) notes.push(`${q.more} more ${q.more === 1 ? "waits" : "wait"}: use the buttons on ${q.more === 1 ? "its message" : "their messages"}.`);
  } else if (q.freeText) {
    question = `Send your reply to ${name(q.flowName)} as its feedback?`;
    buttons.push(button(REPLY_REJECT_ACTION, "Send this", q.replyId, "primary"));
  } else {
    const outcomes = q.outcomes.map((o) => `\`${escapeMrkdwn(truncatePlain(o, NAME_MAX)).replaceAll("`", "'")}\``).join(", ");
    question = q.rejectOutcome
      ? `Answer ${name(q.flowName)} with ${name(q.rejectOutcome)} and your reply as feedback?`
      : `Your reply names none of the outcomes ${name(q.flowName)} takes (${outcomes}).`;
    if (q.rejectOutcome) buttons.push(button(REPLY_REJECT_ACTION, `${q.rejectOutcome} with this`, q.replyId, "danger"));
    if (q.approveOutcome) buttons.push(button(REPLY_APPROVE_ACTION, q.approveOutcome, q.replyId, "primary"));
    notes.push(`Next time, reply with one of its outcomes (${outcomes}), optionally followed by \`: your comment\`.`);
  }
  if (q.cut) notes.push(`Your reply is long: only its first ${REPLY_TEXT_MAX.toLocaleString("en-US")} characters would be sent.`);
  buttons.push(button(REPLY_IGNORE_ACTION, "Ignore", q.replyId));
  const blocks: types.KnownBlock[] = [
    section(question),
    ...which,
    { type: "actions", block_id: REPLY_QUESTION_BLOCK, elements: buttons },
    ...(notes.length ? [context(notes.join(" "))] : []),
  ];
  return { text: question, blocks };
}

/**
 * What replaces the question once one of its buttons was used (through the click's `response_url`), so
 * the answered question does not stay on screen with live buttons: the answer's words, or, when the
 * updated review or request message says it all, a short note of what was done.
 */
export function replyQuestionAnswered(choice: "reject" | "approve", words: string | undefined): { text: string; blocks: types.KnownBlock[] } {
  const text = words ?? (choice === "reject" ? "✅ Done: your reply was sent as feedback." : "✅ Done: approved.");
  return { text, blocks: [section(text)] };
}
