// A flow's human feedback request in Slack: who/what is asking, the output to review, and one
// button per outcome the flow routes on (or Send feedback), plus a feedback field. Pure.
import type { types } from "@slack/bolt";
import { flowEditable, outcomeLeaning } from "../../../domain/flow-outcomes.js";
import { FLOW_ACTIONS_BLOCK, FLOW_EDIT_ACTION, FLOW_FEEDBACK_ACTION, FLOW_FEEDBACK_BLOCK, FLOW_OUTCOME_ACTION_PREFIX, FLOW_REASSIGN_ACTION, FLOW_SEND_ACTION } from "./ids.js";
import { feedbackInput, mrkdwn, plain, section } from "./kit.js";
import { LIMITS } from "./limits.js";
import { type ApprovalsShown, approvalsLine, approvedBlocks, pendingApprovalsBlocks, type ShownDiffs, shownDiffs } from "./review-extras.js";
import {
  type DecisionMessageParams,
  decisionMessage,
  LONGEST_USER,
  outputShownWhole,
  PENDING_NOTES_MAX,
  pendingNotesBlocks,
  roomBeside,
  roomBesideExtras,
  type SlackMessage,
} from "./run.js";
import { escapeMrkdwn, excerpt, fitMarkdown, fitMrkdwn, fitQuote, truncatePlain, userMention } from "./text.js";

export type FlowRequestState = "pending" | "deciding" | "answered" | "closed";

/** `note`: the platform's answer, or why the request was closed. */
export interface FlowMessageParams extends DecisionMessageParams {
  requestId: string;
  flowName: string;
  deploymentName?: string;
  methodName?: string;
  message?: string;
  emit: string[];
  /** Slack user the request is assigned to (found by e-mail). */
  assigneeUserId?: string;
  /** The e-mail it was assigned to, shown when no Slack user was found. */
  assignedEmail?: string;
  state: FlowRequestState;
  outcome?: string;
  /** Block text the caller adds to the message (a refused channel's header, refused.ts). */
  besides?: number;
}

/** primary for approve-like outcomes, danger for reject-like ones, none otherwise. */
export function outcomeStyle(outcome: string): "primary" | "danger" | undefined {
  const leaning = outcomeLeaning(outcome);
  return leaning === "approve" ? "primary" : leaning === "reject" ? "danger" : undefined;
}

const context = (text: string): types.ContextBlock => ({ type: "context", elements: [mrkdwn(excerpt(text, LIMITS.contextText).text)] });
/** Escaped, then cut again: escaping makes hostile text up to 5× longer, and the output gets what is left. */
const name = (text: string, max = 150) => excerpt(escapeMrkdwn(truncatePlain(text, max)), max).text;
/** The flow's own words above the output, converted from Markdown. */
const MESSAGE_MAX = 2_000;

function assigneeLine(p: Pick<FlowMessageParams, "assigneeUserId" | "assignedEmail">): string | undefined {
  if (p.assigneeUserId) return `Assigned to ${userMention(p.assigneeUserId)}`;
  if (p.assignedEmail) return `For ${name(p.assignedEmail, 320)} (no Slack user with this e-mail was found)`;
  return undefined;
}

export function flowRequestMessage(p: FlowMessageParams): SlackMessage {
  if (p.requestId.length > LIMITS.buttonValue) throw new Error("requestId is too long for a button value");
  const diffs = shownDiffs(p);
  return decisionMessage(p, flowHead(p), flowTail(p, diffs), flowOutputRoom(p, diffs), p.besides);
}

const FEEDBACK_MAX = 800;
const NOTE_MAX = 500;

/**
 * The block text a request's message leaves for its output, in whichever state it is shown (who answers,
 * the answer, its comment, the flow's reply and the pending notes at their longest), so the output is
 * shown the same way before and after the answer, an escalation or a reassignment, and whether it needs
 * a file is known when it is posted. Its message, names, outcome buttons, assignee and approvals are
 * measured as built.
 */
function flowOutputRoom(p: FlowMessageParams, diffs = shownDiffs(p)): number {
  const outcome = [...p.emit, ...(p.outcome ? [p.outcome] : [])].reduce((a, b) => (name(b, 100).length > name(a, 100).length ? b : a), "");
  const longest = {
    ...p,
    decidedBy: LONGEST_USER,
    byDeadline: false,
    feedback: "x".repeat(FEEDBACK_MAX),
    note: "x".repeat(NOTE_MAX),
    editFileAttached: true,
    outcome: outcome || undefined,
    pendingNotes: ["x".repeat(PENDING_NOTES_MAX)],
  };
  const tails = (["pending", "answered", "closed"] as const).map((state) => flowTail({ ...longest, state }, diffs).blocks);
  return roomBesideExtras(p, roomBeside(flowHead(p), tails, p.besides));
}

/** Whether the request's output is shown as an excerpt, its whole text in a file. */
export function flowOutputNeedsFile(p: FlowMessageParams): boolean {
  return !outputShownWhole(p.output, flowOutputRoom(p));
}

/** Who asks, and the flow's message: above the output. */
function flowHead(p: FlowMessageParams): types.KnownBlock[] {
  const who = p.deploymentName && p.deploymentName !== p.flowName ? `*${name(p.flowName)}* · ${name(p.deploymentName)}` : `*${name(p.flowName)}*`;
  const step = p.methodName ? ` · step \`${name(p.methodName, 100).replace(/`/g, "'")}\`` : "";
  const blocks: types.KnownBlock[] = [section(`🙋 Feedback requested by flow ${who}${step}`)];
  // Slack refuses an empty text: a message with nothing left once converted is left out (fitMarkdown).
  const message = p.message?.trim() ? fitMarkdown(p.message, MESSAGE_MAX).text : "";
  if (message.trim()) blocks.push(section(message));
  return blocks;
}

/** The state's part under the output (controls, answer, notes) and the notification text. */
function flowTail(p: FlowMessageParams, diffs: ShownDiffs): { text: string; blocks: types.KnownBlock[] } {
  const blocks: types.KnownBlock[] = [];
  const assignee = assigneeLine(p);
  // The notification text is mrkdwn too: every outside part of it is escaped.
  const title = `Flow ${name(p.flowName)}${p.methodName ? ` (${name(p.methodName, 100)})` : ""}`;
  // The flow's answer (or a 4xx body) is outside text: shown escaped, never as mrkdwn.
  const answerText = (max: number) => (p.note?.trim() ? fitMrkdwn(p.note.trim(), max).text : "");

  if (p.state === "pending" || p.state === "deciding") {
    const placeholder = p.emit.length === 0 ? "Required: your feedback goes back to the flow" : "Optional comment sent with your choice";
    blocks.push(feedbackInput(FLOW_FEEDBACK_BLOCK, FLOW_FEEDBACK_ACTION, placeholder), actions(p.requestId, p.emit));
    if (p.approvals) blocks.push(...pendingFlowApprovals(p, p.approvals, diffs));
    const notes = [assignee, answerText(300)].filter(Boolean).join(" · ");
    if (notes) blocks.push(context(notes));
    blocks.push(...pendingNotesBlocks(p.pendingNotes));
    return { text: `🙋 Feedback requested: ${title}`, blocks };
  }
  const by = p.byDeadline ? " by deadline (Crewline)" : p.decidedBy ? ` by ${userMention(p.decidedBy)}` : "";
  const outcome = p.outcome ? ` — *${name(p.outcome, 100)}*` : "";
  const comment = p.feedback?.trim() ? `\n${fitQuote(p.feedback.trim(), FEEDBACK_MAX).text}` : "";
  const note = answerText(NOTE_MAX);
  if (p.state === "answered") {
    const { decidedBy, approvals, edit } = p;
    const approved = !!(edit || approvals);
    if (approved) blocks.push(...approvedBlocks({ decidedBy, approvals, edit, editDiff: diffs.edit, editFileAttached: !!p.editFileAttached, receiver: "flow" }));
    else blocks.push(section(`✅ Answered${by}${outcome}${comment}`));
    // Approvals name no outcome: which one the flow received is said here.
    const received = approved && p.outcome && severalApproving(p.emit) ? `The flow received *${name(p.outcome, 100)}*` : "";
    blocks.push(context([received, assignee, note ? `Flow: ${note}` : "Flow: answer accepted"].filter(Boolean).join(" · ")));
    return { text: `Answered${edit ? " with edits" : ""}${p.outcome ? ` (${name(p.outcome, 100)})` : ""}: ${title}`, blocks };
  }
  const answeredBy = p.byDeadline ? "the deadline" : p.decidedBy ? userMention(p.decidedBy) : "";
  blocks.push(section(`🚫 Closed${answeredBy ? ` after ${answeredBy}'s answer${outcome}` : ""} — the flow did not take it: ${note || "no reason given"}${comment}`));
  if (assignee) blocks.push(context(assignee));
  return { text: `Closed: ${title}`, blocks };
}

/** Several approve-like outcomes: each one's approvals are counted apart, so the message names them. */
const severalApproving = (emit: readonly string[]) => emit.filter((o) => outcomeLeaning(o) === "approve").length > 1;

/**
 * Who approved so far; with several approve-like outcomes, each one's approvals on a line of their own
 * ("1 of 2 approvals for *approved*: @a"), as each is counted apart, the edit's diff after them.
 */
function pendingFlowApprovals(p: FlowMessageParams, approvals: ApprovalsShown, diffs: ShownDiffs): types.KnownBlock[] {
  const blocks = pendingApprovalsBlocks(approvals, p.edit, diffs.edit);
  const outcomes = [...new Set(approvals.by.map((a) => a.outcome))];
  if (!severalApproving(p.emit) || !outcomes.some(Boolean)) return blocks;
  const lines = outcomes.map((o) => approvalsLine({ required: approvals.required, by: approvals.by.filter((a) => a.outcome === o) }, o ? `*${name(o, 100)}*` : undefined));
  // pendingApprovalsBlocks' first block is its approvals line, replaced by these.
  return [context(`☑️ ${lines.join("\n")}`), ...blocks.slice(1)];
}

function actions(requestId: string, emit: string[]): types.ActionsBlock {
  const elements: types.Button[] = emit.length
    ? emit.slice(0, LIMITS.actionsElements).map((outcome, i) => {
        const style = outcomeStyle(outcome);
        return { type: "button", action_id: `${FLOW_OUTCOME_ACTION_PREFIX}${i}`, value: requestId, text: plain(outcome, LIMITS.buttonText), ...(style ? { style } : {}) };
      })
    : [{ type: "button", action_id: FLOW_SEND_ACTION, style: "primary", value: requestId, text: plain("Send feedback", LIMITS.buttonText) }];
  if (flowEditable(emit) && elements.length < LIMITS.actionsElements)
    elements.push({ type: "button", action_id: FLOW_EDIT_ACTION, value: requestId, text: plain("Edit and approve…", LIMITS.buttonText) });
  if (elements.length < LIMITS.actionsElements) elements.push({ type: "button", action_id: FLOW_REASSIGN_ACTION, value: requestId, text: plain("Reassign", LIMITS.buttonText) });
  return { type: "actions", block_id: FLOW_ACTIONS_BLOCK, elements };
}
