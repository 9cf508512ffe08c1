// The replies the outbox posts in a run's thread or under a flow request, worded from the facts the
// use cases enqueued (usecases/ports.ts: RunNotice, FlowNotice). Pure.
import { describeDuration } from "../../../text/duration.js";
import type { Execution, FlowNotice, FlowRequest, Review, RunNotice } from "../../../usecases/ports.js";
import { abandonedDecisionText, afterReminders, escalationText, mentionIds, reasonQuote, reassignmentText } from "./deadline.js";
import { escapeMrkdwn, formatDuration, truncatePlain, userMention } from "./text.js";

/** A reminder under a review nobody has decided; `link` points at the review when Slack gave its permalink. */
export function reminderText(execution: Pick<Execution, "crewName">, review: Pick<Review, "taskName" | "round">, who: string, waitedMs: number, link?: string): string {
  const task = `*${escapeMrkdwn(review.taskName)}*${review.round > 1 ? ` (round ${review.round})` : ""}`;
  const where = link ? `<${link}|the review>` : "the review above";
  return `⏰ ${who}: ${task} has been waiting for a decision for ${formatDuration(waitedMs)}. Approve or reject ${where} so *${escapeMrkdwn(execution.crewName)}* can go on.`;
}

/** A reply in a run's thread. */
export function runNoticeText(notice: RunNotice): string {
  switch (notice.kind) {
    case "escalation":
      return escalationText(notice);
    case "reassignment":
      return reassignmentText(notice);
    case "decision_interrupted":
      return abandonedDecisionText(notice);
    case "run_stopped":
      return runStoppedText(notice.by, notice.how);
    case "text":
      return notice.text;
  }
}

/** The thread's last word on a run someone ended from Slack. */
function runStoppedText(by: string, how: "stopped" | "abandoned"): string {
  return how === "stopped"
    ? `⏹️ ${userMention(by)} stopped this run. The crew was told to stop, its open reviews are closed, and nothing more is posted about it.`
    : `⏹️ ${userMention(by)} stopped following this run: its crew cannot be stopped from Slack and may still be working, but its open reviews are closed and nothing more is posted about it.`;
}

/** A reply under a flow request's message. */
export function flowNoticeText(request: Pick<FlowRequest, "flowName" | "methodName">, notice: FlowNotice): string {
  const flow = `flow *${escapeMrkdwn(request.flowName)}*`;
  const step = request.methodName ? ` on \`${escapeMrkdwn(truncatePlain(request.methodName, 80))}\`` : "";
  switch (notice.kind) {
    case "reminder":
      return `⏰ ${notice.who}: ${flow} has been waiting for feedback${step} for ${formatDuration(notice.waitedMs)}. Answer the request above so the flow can go on.`;
    case "escalation":
      return `🔺 ${mentionIds(notice.ids)}: ${flow}'s request${step} is still waiting for an answer after ${afterReminders(notice.reminders)}. You may answer it too.`;
    case "reassignment":
      return `↪️ ${userMention(notice.by)} reassigned ${flow}'s request${step} to ${userMention(notice.to)}, who may now answer it.${reasonQuote(notice.reason)}`;
    case "deadline_passed": {
      const lacking = notice.lacking ? ` (it offers no ${notice.lacking} outcome, so nothing was chosen for it)` : "";
      return `⏰ ${notice.who}: the deadline for ${flow}'s request has passed (no answer within ${describeDuration(notice.withinMs)})${lacking}. Answer the request above so the flow can go on.`;
    }
    case "deadline_not_delivered":
      return `⚠️ The deadline passed, but the automatic answer did not reach the flow: ${escapeMrkdwn(truncatePlain(notice.message, 300))}. The request is open again; please answer it.`;
    case "text":
      return notice.text;
  }
}
