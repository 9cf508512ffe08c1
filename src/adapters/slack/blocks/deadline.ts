// What a review message says about its deadline, its escalation and its reassignment, and the
// Reassign modal. Pure: times are rendered with Slack's <!date^…> token, so each reader sees their
// own local time, with a UTC fallback for clients that cannot render it.
import type { types } from "@slack/bolt";
import type { TimeoutAction } from "../../../config/config.js";
import { describeDuration, describeRemaining } from "../../../text/duration.js";
import { REASSIGN_REASON_ACTION, REASSIGN_REASON_BLOCK, REASSIGN_USER_ACTION, REASSIGN_USER_BLOCK, REASSIGN_VIEW_CALLBACK } from "./ids.js";
import { label, modal, section, textInput } from "./kit.js";
import { LIMITS } from "./limits.js";
import { escapeMrkdwn, truncatePlain, userMention } from "./text.js";

const THEN: Record<TimeoutAction, string> = {
  reject: "it will be rejected automatically",
  approve: "it will be approved automatically",
  remind: "its reviewers will be reminded",
};

/** "14:00 UTC" (plus the date when it is not today's, in UTC). */
function utcFallback(at: Date, now: Date): string {
  const iso = at.toISOString();
  const time = `${iso.slice(11, 16)} UTC`;
  return iso.slice(0, 10) === now.toISOString().slice(0, 10) ? time : `${time} on ${iso.slice(0, 10)}`;
}

/** Slack's date token: the reader's local time (and day when it is not today), UTC as the fallback text. */
export function slackTime(at: Date, now: Date): string {
  const seconds = Math.floor(at.getTime() / 1000);
  return `<!date^${seconds}^{time} {date_short_pretty}|${utcFallback(at, now)}>`;
}

/** "⏳ If nobody decides in 2 hours, at 14:00 UTC, it will be rejected automatically." */
export function deadlineText(at: Date, action: TimeoutAction, now: Date): string {
  const left = at.getTime() - now.getTime();
  if (left <= 0) return `⏳ The deadline passed at ${slackTime(at, now)}.`;
  return `⏳ If nobody decides in ${describeRemaining(left)}, at ${slackTime(at, now)}, ${THEN[action]}.`;
}

/** The thread reply posted when the deadline of a "remind" review passes. */
export function deadlineReminderText(p: { who: string; taskName: string; round: number; withinMs: number; crewName: string }): string {
  return `⏰ ${p.who}: the deadline for ${taskRef(p)} has passed (no decision within ${describeDuration(p.withinMs)}). Approve or reject the review above so *${escapeMrkdwn(truncatePlain(p.crewName, 80))}* can go on.`;
}

/** The thread reply posted when an automatic decision did not reach the crew. */
export function deadlineNotDeliveredText(p: { taskName: string; action: "reject" | "approve"; message: string }): string {
  const what = p.action === "reject" ? "rejection" : "approval";
  return `⚠️ The deadline for *${escapeMrkdwn(truncatePlain(p.taskName, 150))}* passed, but the automatic ${what} did not reach the crew: ${escapeMrkdwn(truncatePlain(p.message, 300))} The review is open again; please decide it.`;
}

/** "*Task* (round 2)": a task named in a thread reply. */
const taskRef = (p: { taskName: string; round: number }) => `*${escapeMrkdwn(truncatePlain(p.taskName, 150))}*${p.round > 1 ? ` (round ${p.round})` : ""}`;

/** A reassignment's reason, quoted on one line under it (or nothing). */
export const reasonQuote = (reason: string | undefined) => (reason?.trim() ? `\n> ${escapeMrkdwn(truncatePlain(reason, 500))}` : "");

/** "a reminder", "3 reminders". */
export const afterReminders = (n: number) => (n === 1 ? "a reminder" : `${n} reminders`);

/** Slack mentions of user and user-group ids: "<@U1>, <!subteam^S1>". */
export function mentionIds(ids: readonly string[]): string {
  return ids.map((id) => (id.startsWith("S") ? `<!subteam^${id}>` : userMention(id))).join(", ");
}

/** The thread reply posted when a review is escalated after its last reminder. */
export function escalationText(p: { ids: readonly string[]; taskName: string; round: number; reminders: number }): string {
  return `🔺 ${mentionIds(p.ids)}: ${taskRef(p)} is still waiting for a decision after ${afterReminders(p.reminders)}. You may approve or reject it too.`;
}

/** The thread reply posted when a review is reassigned. */
export function reassignmentText(p: { to: string; by: string; taskName: string; round: number; reason?: string }): string {
  return `↪️ ${userMention(p.by)} reassigned ${taskRef(p)} to ${userMention(p.to)}, who may now decide it.${reasonQuote(p.reason)}`;
}

/** Lines under a pending review: deadline, escalation, reassignment (whichever apply). */
export function pendingReviewNotes(p: { deadline?: { at: Date; action: TimeoutAction }; escalatedTo?: readonly string[]; reassignedTo?: string; now: Date }): string[] {
  const lines: string[] = [];
  if (p.reassignedTo) lines.push(`↪️ Reassigned to ${userMention(p.reassignedTo)}`);
  if (p.escalatedTo?.length) lines.push(`🔺 Escalated to ${mentionIds(p.escalatedTo)}`);
  if (p.deadline) lines.push(deadlineText(p.deadline.at, p.deadline.action, p.now));
  return lines;
}

/** The lines under a pending review's or flow request's message, from its row: its deadline (until acted on), escalation and reassignment. */
export function pendingNotesOf(
  row: { decideBy: Date | null; onTimeout: string | null; deadlineHandledAt: Date | null; escalatedAt: Date | null; escalatedTo: string | null; reassignedTo: string | null },
  now: Date,
): string[] {
  return pendingReviewNotes({
    deadline: row.decideBy && row.onTimeout && !row.deadlineHandledAt ? { at: row.decideBy, action: row.onTimeout as TimeoutAction } : undefined,
    escalatedTo: row.escalatedAt && row.escalatedTo ? row.escalatedTo.split(",").filter(Boolean) : undefined,
    reassignedTo: row.reassignedTo ?? undefined,
    now,
  });
}

/** The Reassign modal: a person and a reason; its sealed facts travel in private_metadata. A flow request's uses its own callback (`callbackId`) and says "answer". */
export function reassignModal(p: { metadata: string; taskName: string; callbackId?: string; what?: "review" | "request" }): types.ModalView {
  const verb = p.what === "request" ? "answer" : "decide";
  const blocks: types.KnownBlock[] = [
    section(`Hand *${escapeMrkdwn(truncatePlain(p.taskName, 150))}* to someone else. They are mentioned in the thread and may ${verb} it.`),
    {
      type: "input",
      block_id: REASSIGN_USER_BLOCK,
      label: label("Reassign to"),
      element: { type: "users_select", action_id: REASSIGN_USER_ACTION, placeholder: label("Choose a person") },
    },
    textInput({
      blockId: REASSIGN_REASON_BLOCK,
      actionId: REASSIGN_REASON_ACTION,
      label: "Reason",
      maxLength: Math.min(500, LIMITS.plainTextInput),
      placeholder: `Why they should ${verb} it`,
    }),
  ];
  return modal({
    callbackId: p.callbackId ?? REASSIGN_VIEW_CALLBACK,
    title: p.what === "request" ? "Reassign request" : "Reassign review",
    submit: "Reassign",
    close: "Cancel",
    metadata: p.metadata,
    blocks,
  });
}

/** The thread reply posted when a decision was interrupted before it reached the crew, and the review opened again. */
export function abandonedDecisionText(p: { by: string | null; taskName: string; round: number }): string {
  return `⚠️ ${p.by ? `<@${p.by}>'s decision` : "The decision"} on ${taskRef(p)} was interrupted before it reached the crew (Crewline stopped while sending it). The review is open again: please decide it once more.`;
}
