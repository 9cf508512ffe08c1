// What whoever decides a review round or answers a flow request is told privately: one reply table for
// both kinds of decision request, worded by the kind (its noun, who receives the answer, its verbs).
import type { FlowDecisionOutcome } from "../../../usecases/flows.js";
import type { DecisionOutcome } from "../../../usecases/lifecycle.js";
import { escapeMrkdwn, userMention } from "../blocks/index.js";

export type DecisionKind = "review" | "flow";

/** The words of each kind ("review" … "crew", "request" … "flow"). */
export const WORDS = {
  review: { noun: "review", receiver: "crew", verb: "decide", waiting: "waiting for a decision", done: "decided", goesOn: "The crew goes on", told: "the crew is being told" },
  flow: {
    noun: "request",
    receiver: "flow",
    verb: "answer",
    waiting: "waiting for an answer",
    done: "answered",
    goesOn: "The flow gets the answer",
    told: "the flow is being answered",
  },
} as const;

export const NOT_THIS_MESSAGE = "This button does not belong to the review it names, so nothing was sent to the crew.";
export const NOT_THIS_REQUEST = "I can't match this button to a feedback request, so nothing was sent to the flow.";
/** Asked from another organisation than the run's or request's (someone of a Slack Connect channel shared with it). */
export function otherOrganisation(kind: DecisionKind): string {
  const w = WORDS[kind];
  return `This ${w.noun} belongs to another organisation's workspace: only its own people may ${w.verb} it, so nothing was sent to the ${w.receiver}.`;
}
export const SELF_APPROVAL_REFUSED =
  "You started this run, and this crew needs its reviews approved by someone else, so your approval was not counted and nothing was sent to the crew. You may still reject with feedback.";
export const NOT_RECORDED =
  "⚠️ Your decision was not recorded: Crewline could not reach its database. Nothing was sent to the crew and the review is still open; please try again in a moment.";
export const FLOW_NOT_RECORDED = "⚠️ Your answer was not recorded: Crewline could not reach its database. Nothing was sent to the flow; please try again in a moment.";

/** What the clicker (`asker`, when known) is told privately about a review's decision; undefined when the updated message says it all. */
export function replyFor(outcome: DecisionOutcome, asker?: string): string | undefined {
  return decisionReply("review", outcome, asker);
}

/** What the clicker (`asker`, when known) is told privately about a flow request's answer; undefined when the updated message says it all. */
export function flowReplyFor(outcome: FlowDecisionOutcome, asker?: string): string | undefined {
  return decisionReply("flow", outcome, asker);
}

export function decisionReply(kind: DecisionKind, outcome: DecisionOutcome | FlowDecisionOutcome, asker?: string): string | undefined {
  const w = WORDS[kind];
  switch (outcome.kind) {
    case "decided":
    case "answered":
      return undefined;
    case "unknown_review":
      return "I can't find this review any more, so nothing was sent to the crew.";
    case "unknown_request":
    case "wrong_message":
      return NOT_THIS_REQUEST;
    case "unknown_outcome":
      return "That choice is not one the flow offers, so nothing was sent to the flow.";
    case "feedback_required":
      return kind === "review"
        ? "Please write what should change in the feedback field before rejecting: the crew re-runs the task with it."
        : "Please write your feedback in the field first: it is what the flow receives.";
    case "not_allowed":
      return `Only ${outcome.who} may ${w.verb} this ${w.noun}, so nothing was sent to the ${w.receiver}.`;
    case "self_approval_refused":
      return SELF_APPROVAL_REFUSED;
    case "approval_recorded": {
      const more = outcome.required - outcome.approvals;
      return `Your approval is recorded: ${outcome.approvals} of ${outcome.required} approvals. ${w.goesOn} once ${more} more ${more === 1 ? "person approves" : "people approve"}.`;
    }
    case "approval_counted":
      return `Your approval is recorded and counted: with it the ${w.noun} had the approvals it needs, and ${w.told}.`;
    case "already_approved": {
      const count = `${outcome.approvals} of ${outcome.required} approvals`;
      if (outcome.updated) return `You had approved this ${w.noun} already (${count}): what you sent now replaces your earlier note or edit.`;
      return `You already approved this ${w.noun} (${count}): it needs approvals from ${outcome.required} different people.`;
    }
    case "already_decided": {
      const subject = "review" in outcome ? outcome.review : outcome.request;
      if (subject.state === "closed")
        return kind === "review" ? "This review is closed: the run no longer needs a decision on it." : "This request is closed: the flow no longer takes an answer to it.";
      const done = "review" in outcome ? (outcome.review.decision === "reject" ? "rejected" : "approved") : w.done;
      if (!subject.decidedBy) return `This ${w.noun} was already ${w.done}.`;
      // The one who decided it clicked again (a double click): said to them, not about them.
      const yours = subject.decidedBy === asker;
      if (subject.state === "deciding")
        return yours
          ? `Your ${kind === "review" ? "decision" : "answer"} is already on its way to the ${w.receiver}.`
          : `${userMention(subject.decidedBy)} is already ${kind === "review" ? "deciding" : "answering"} this ${w.noun}.`;
      return `${yours ? "You" : userMention(subject.decidedBy)} already ${done} this ${w.noun}.`;
    }
    // The crew's or the flow's own words (an error message, an answer's body) are outside text: escaped.
    case "not_waiting":
      return `The crew wasn't waiting for this decision, so nothing changed. ${escapeMrkdwn(outcome.message)}`;
    case "resume_failed":
      return `Your decision did not reach the crew, so the review is open again. ${escapeMrkdwn(outcome.message)}`;
    case "taken_over":
      return `Your ${kind === "review" ? "decision" : "answer"} reached the ${w.receiver} late: Crewline had stopped waiting for it and opened the ${w.noun} again, so the ${w.noun} shows what happened since. Please check the thread before you ${w.verb} it again.`;
    case "unrecorded":
      return `The ${w.receiver} took your ${kind === "review" ? "decision" : "answer"}, but Crewline could not record it just now (its database did not answer), so the ${w.noun} may look undecided here for a few minutes. Please don't ${w.verb} it again.`;
    case "closed":
      return `The flow did not take the answer: ${escapeMrkdwn(outcome.reason)}. The request is closed.`;
    case "failed":
      return `Your answer did not reach the flow (${escapeMrkdwn(outcome.message)}), so the request is open again. Try again in a moment.`;
    case "not_taken":
      return `The flow did not take your answer: ${escapeMrkdwn(outcome.reason)}. The request is open again, so it can be answered differently.`;
    case "maybe_taken":
      return `Your answer may have reached the flow (${escapeMrkdwn(outcome.message)}): Crewline cannot tell whether the flow took it. The request is open again in case it did not; should the flow say it already has an answer when the request is answered again, it is recorded as answered by yours.`;
    case "taken_earlier": {
      const whose = outcome.by === asker ? "your earlier answer" : outcome.by === null ? "the deadline's earlier answer" : `${userMention(outcome.by)}'s earlier answer`;
      const chose = outcome.outcome ? ` (*${escapeMrkdwn(outcome.outcome)}*)` : "";
      return `The flow says it already has an answer, so it did not take this one. Most likely that is ${whose}${chose}, whose delivery Crewline could not confirm: the request is recorded as answered by it.`;
    }
  }
}
