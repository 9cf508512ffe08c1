// Messages about a run: the channel announcement (thread parent), progress, task
// reviews and errors in the thread, and the completion notice in the channel.
import type { types } from "@slack/bolt";
import type { ExecutionState } from "../../../domain/states.js";
import { readableError } from "../../../text/readable-error.js";
import {
  APPROVE_ACTION,
  EDIT_ACTION,
  FEEDBACK_ACTION,
  FEEDBACK_BLOCK,
  REASSIGN_ACTION,
  REJECT_ACTION,
  REVIEW_ACTIONS_BLOCK,
  RUN_ACTIONS_BLOCK,
  STOP_ACTION,
  STOP_FOLLOWING_ACTION,
} from "./ids.js";
import { context, feedbackInput, mrkdwn, plain, section } from "./kit.js";
import { blockTextLength, LIMITS } from "./limits.js";
import {
  type ApprovalsShown,
  approvedBlocks,
  type EditShown,
  EXTRAS_RESERVE,
  type PreviousRound,
  pendingApprovalsBlocks,
  previousRoundBlocks,
  type ShownDiffs,
  shownDiffs,
} from "./review-extras.js";
import { escapeMrkdwn, excerpt, fitMarkdown, fitMrkdwn, fitQuote, formatDuration, formatUtcTime, humanizeInputName, revealLinkHosts, truncatePlain, userMention } from "./text.js";

export interface SlackMessage {
  /** Notification / accessibility fallback. */
  text: string;
  blocks: types.KnownBlock[];
}

/**
 * Outputs up to this length go out whole, as a `markdown` block (standard Markdown,
 * which is what crews produce), when the rest of the message leaves room for them
 * (reviewOutputRoom, flowOutputRoom in flow.ts; a completion's rest is short). Longer ones
 * become a mrkdwn excerpt plus a file.
 */
export const OUTPUT_MARKDOWN_MAX = 10_000;
/** A short preview once the whole output is in a file: the thread stays readable. */
export const OUTPUT_EXCERPT_MAX = 2_900;

const NAME_MAX = 150;
const AGENT_MAX = 100;
const FEEDBACK_MAX = 800;
const NOTE_MAX = 300;
const ERROR_MAX = 700;
const PERMALINK_MAX = 500;
const INPUT_FIELDS_BUDGET = 6_000;

const bold = (name: string, fallback: string) => `*${escapeMrkdwn(truncatePlain(name, NAME_MAX)) || fallback}*`;
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

/**
 * Whether the output is shown as an excerpt (with the whole in a file); `reserve`: how much shorter
 * than OUTPUT_MARKDOWN_MAX the rest of its message needs it to be (reviewReserve).
 */
export function outputNeedsFile(output: string, reserve = 0): boolean {
  const max = OUTPUT_MARKDOWN_MAX - reserve;
  // What is shown is never shorter than the output: a long one needs no further look.
  return output.length > max || markdownShown(output).length > max;
}

/** The line under an output: whether it was shortened, and where its file is (empty: no line). */
function outputNote(shortened: boolean, fileAttached: boolean, fileWhere: string): string {
  if (shortened) return fileAttached ? `Output shortened — the full text is attached ${fileWhere} as a file.` : "Output shortened to fit in Slack.";
  return fileAttached ? `The full output is also attached ${fileWhere} as a file.` : "";
}

/**
 * Whether the output is shown whole when the rest of its message leaves `room` chars of block text
 * (its note included: counted as if a file were attached, which may come later).
 */
export function outputShownWhole(output: string, room: number, fileWhere = "below"): boolean {
  return !outputNeedsFile(output, roomReserve(room, fileWhere));
}

/** The reserve (outputNeedsFile) that leaves an output shown whole `room` chars of block text, its note included. */
function roomReserve(room: number, fileWhere = "below"): number {
  return Math.max(0, OUTPUT_MARKDOWN_MAX - (room - outputNote(false, true, fileWhere).length));
}

/** The room an output beside diffs, approvals or an edit has at most (EXTRAS_RESERVE): `room` otherwise. */
export function roomBesideExtras(p: Pick<DecisionMessageParams, "approvals" | "edit"> & { previous?: unknown }, room: number): number {
  return p.approvals || p.edit || p.previous ? Math.min(room, OUTPUT_MARKDOWN_MAX - EXTRAS_RESERVE + outputNote(false, true, "below").length) : room;
}

/** Below this an excerpt tells nothing: only the note is shown. */
const EXCERPT_MIN = 200;

/**
 * The output as its message shows it: whole (a `markdown` block) or a mrkdwn excerpt, and a note.
 * `room`: the chars of block text the rest of the message leaves (by default, as if it had nothing else).
 */
export function outputBlocks(output: string, fileAttached = false, room = Number.POSITIVE_INFINITY, fileWhere = "below"): types.KnownBlock[] {
  if (!output.trim()) return [section("_No output._")];
  const whole = outputShownWhole(output, room, fileWhere);
  const note = outputNote(!whole, fileAttached, fileWhere);
  if (whole) return [{ type: "markdown", text: markdownShown(output) }, ...(note ? [context(note)] : [])];
  const max = Math.min(OUTPUT_EXCERPT_MAX, room - note.length);
  return max < EXCERPT_MIN ? [context(note)] : [section(fitMarkdown(output, max).text), context(note)];
}

/** Crew Markdown as Slack renders it: no mentions, and every link says where it leads. */
function markdownShown(markdown: string): string {
  return revealLinkHosts(defuseSlackTokens(markdown));
}

/**
 * Crew output must not ping anyone: a zero-width space after "<" keeps `<!channel>`,
 * `<@U…>` and `<#C…>` looking the same but stops Slack from parsing them.
 */
function defuseSlackTokens(markdown: string): string {
  return markdown.replace(/<([!@#])/g, "<\u200B$1");
}

// ---------------------------------------------------------------- announcement

/** How a run's state reads, wherever it is shown (announcement, App Home): the one label map. */
export const RUN_STATE_LABELS: Record<ExecutionState, { emoji: string; label: string }> = {
  starting: { emoji: "⏳", label: "Starting…" },
  running: { emoji: "🏃", label: "Running" },
  waiting: { emoji: "✋", label: "Waiting for a review" },
  completed: { emoji: "✅", label: "Completed" },
  failed: { emoji: "❌", label: "Failed" },
  kickoff_failed: { emoji: "❌", label: "Did not start" },
  lost: { emoji: "⚠️", label: "Lost track of the run" },
  uninstalled: { emoji: "⚠️", label: "Lost track of the run: the app was removed from this workspace" },
  stopped: { emoji: "⏹️", label: "Stopped" },
  abandoned: { emoji: "⏹️", label: "No longer followed" },
};

/** The label of a stored state (an unknown one reads as itself). */
export function runStateLabel(state: string): { emoji: string; label: string } {
  return RUN_STATE_LABELS[state as ExecutionState] ?? { emoji: "•", label: state };
}

export interface AnnouncementParams {
  crewName: string;
  userId: string;
  inputs: Record<string, string>;
  kickoffId?: string;
  state: ExecutionState;
  startedAt: Date;
  finishedAt?: Date;
  /** e.g. the failure reason */
  summary?: string;
  /** Who stopped the run (stopped) or stopped following it (abandoned). */
  stoppedBy?: string;
  /** A live run that can be stopped from here: its execution id, the Stop button's value. */
  stoppable?: string;
}

export function announcementMessage(p: AnnouncementParams): SlackMessage {
  const { emoji, label } = runStateLabel(p.state);
  const took = p.finishedAt ? ` · took ${formatDuration(p.finishedAt.getTime() - p.startedAt.getTime())}` : "";
  const summary = p.summary?.trim() ? `\n${fitMrkdwn(readableError(p.summary), ERROR_MAX).text}` : "";
  const by = p.stoppedBy && (p.state === "stopped" || p.state === "abandoned") ? ` by ${userMention(p.stoppedBy)}` : "";
  const blocks: types.KnownBlock[] = [section(`${emoji} ${userMention(p.userId)} started crew ${bold(p.crewName, "Unnamed crew")} — ${label}${by}${took}${summary}`)];
  const entries = Object.entries(p.inputs);
  const shown = entries.slice(0, LIMITS.fields);
  if (shown.length) {
    const perField = Math.min(LIMITS.fieldText, Math.floor(INPUT_FIELDS_BUDGET / shown.length));
    blocks.push({ type: "section", fields: shown.map(([name, value]) => mrkdwn(inputField(name, value, perField))) });
  }
  const more = entries.length - shown.length;
  if (more > 0) blocks.push(context(`+${plural(more, "more input")}`));
  const kickoff = p.kickoffId ? `Kickoff \`${escapeMrkdwn(truncatePlain(p.kickoffId, 100))}\`` : "";
  blocks.push(context([kickoff, startedAt(p.startedAt), "Activity in the thread 🧵"].filter(Boolean).join(" · ")));
  if (p.stoppable && p.stoppable.length <= LIMITS.buttonValue) blocks.push(stopButton(p.stoppable, p.crewName));
  return { text: `${emoji} Crew ${escapeMrkdwn(truncatePlain(p.crewName, NAME_MAX))}: ${label}${by}`, blocks };
}

/** Stop, with a confirm dialog: a stop cannot be taken back. */
function stopButton(executionId: string, crewName: string): types.ActionsBlock {
  return {
    type: "actions",
    block_id: RUN_ACTIONS_BLOCK,
    elements: [
      {
        type: "button",
        action_id: STOP_ACTION,
        style: "danger",
        value: executionId,
        text: plain("Stop", LIMITS.buttonText),
        confirm: {
          title: plain("Stop this run?", 100),
          text: plain(`The crew ${truncatePlain(crewName, NAME_MAX)} is asked to stop now. Its open reviews close, and nothing more is posted about it.`, 300),
          confirm: plain("Stop the run", 30),
          deny: plain("Keep it running", 30),
          style: "danger",
        },
      },
    ],
  };
}

/** Private: the crew has no way to be stopped from Slack (its deployment answered 404 or 405 to POST /stop). */
export function cannotStopMessage(executionId: string, crewName: string): SlackMessage {
  const text = `The crew ${bold(crewName, "Unnamed crew")} cannot be stopped from Slack: its deployment does not offer a stop. It goes on running. You can stop following it: Crewline then ends the run here (no more updates, its open reviews close), while the crew itself may still finish.`;
  const blocks: types.KnownBlock[] = [section(`⚠️ ${text}`)];
  if (executionId.length <= LIMITS.buttonValue)
    blocks.push({
      type: "actions",
      block_id: RUN_ACTIONS_BLOCK,
      elements: [{ type: "button", action_id: STOP_FOLLOWING_ACTION, value: executionId, text: plain("Stop following", LIMITS.buttonText) }],
    });
  return { text: `⚠️ ${text}`, blocks };
}

function inputField(name: string, value: string, max: number): string {
  const head = `*${escapeMrkdwn(truncatePlain(humanizeInputName(name), 100))}*\n`;
  return head + (value.trim() ? fitMrkdwn(value.trim(), max - head.length).text : "_empty_");
}

function startedAt(date: Date): string {
  const ms = date.getTime();
  if (Number.isNaN(ms)) return "";
  return `Started <!date^${Math.floor(ms / 1000)}^{date_short_pretty} at {time}|${date.toISOString()}>`;
}

// ---------------------------------------------------------------- progress

export interface ProgressParams {
  steps: number;
  latest: string;
  updatedAt: Date;
  done?: boolean;
  /** Once done, the run's state: how it ended (stopped, failed…); absent or completed reads as finished. */
  state?: string;
}

/** How the progress message names a run's end: its state's label (one "lost" for both ways of losing track). */
function progressEnd(state: string | undefined): { emoji: string; label: string } {
  if (!state || state === "completed") return { emoji: "✅", label: "Finished" };
  return runStateLabel(state === "uninstalled" ? "lost" : state);
}

export function progressMessage(p: ProgressParams): SlackMessage {
  const latest = p.latest.trim() ? fitMarkdown(p.latest.trim(), 1_000).text : "_Working…_";
  const steps = p.done ? `${plural(p.steps, "step")} in total` : `${plural(p.steps, "step")} so far`;
  const { emoji, label } = p.done ? progressEnd(p.state) : { emoji: "⚙️", label: "Working" };
  return {
    text: `${label}: ${plural(p.steps, "step")}`,
    blocks: [section(`${emoji} ${latest}`), context(`${steps} · last update ${formatUtcTime(p.updatedAt)}`)],
  };
}

// ---------------------------------------------------------------- review

/** "posted": a finished task's output the crew is not waiting on (no decision controls). */
export type ReviewState = "posted" | "pending" | "approved" | "rejected" | "closed";

/** What a review message and a flow request's message (flow.ts) both show. */
export interface DecisionMessageParams {
  output: string;
  decidedBy?: string;
  feedback?: string;
  /** e.g. the crew's (or flow's) answer, or "The run finished without needing this decision." */
  note?: string;
  /** A file with the whole output was attached. */
  outputTruncated?: boolean;
  /** Approvals needed and given so far (several required, or an edit). */
  approvals?: ApprovalsShown;
  /** Edit and approve: the edited version, shown as a diff against `output`. */
  edit?: EditShown;
  /** A file with the edited version was attached. */
  editFileAttached?: boolean;
  /** Lines under a pending one: its deadline, escalation, reassignment (deadline.ts pendingReviewNotes). */
  pendingNotes?: string[];
  /** The decision was taken by its deadline, not by a person. */
  byDeadline?: boolean;
}

export interface ReviewParams extends DecisionMessageParams {
  reviewId: string;
  taskName: string;
  agent?: string;
  round: number;
  state: ReviewState;
  /** Round 2 and later: the previous round, for its diff and the feedback that asked for this one. */
  previous?: PreviousRound;
  /** A file with the whole diff against the previous round was attached. */
  diffFileAttached?: boolean;
  /** A pending review gets a Reassign button. */
  reassignable?: boolean;
  /** A closed review of a run someone stopped (or stopped following) from Slack: who. */
  runStopped?: { how: "stopped" | "abandoned"; by?: string };
}

/**
 * What decides how much room a review's output has: all but what only a decision (or its close) brings.
 * Its pending notes are accepted but not used: they are counted at their longest whatever they are now
 * (a later escalation or reassignment adds to them), and the clock no longer plays a part.
 */
type ReviewRoomParams = Pick<ReviewParams, "taskName" | "agent" | "round" | "output" | "previous" | "approvals" | "edit" | "reassignable">;

/** A user id as long as a mention may be (userMention): who decides is not known beforehand. */
export const LONGEST_USER = `U${"0".repeat(40)}`;

/** The deadline, escalation and reassignment lines under a pending review or flow request, at most: a long escalation list is cut. */
export const PENDING_NOTES_MAX = 1_500;

/** Those lines (deadline.ts pendingNotesOf), one under the other. */
export function pendingNotesBlocks(lines: readonly string[] = []): types.KnownBlock[] {
  // Already mrkdwn (deadline.ts builds them with escaped names and Slack tokens): cut, never escaped.
  const text = lines.filter((l) => l.trim()).join("\n");
  return text ? [context(excerpt(text, PENDING_NOTES_MAX).text)] : [];
}

/** The block text an output has beside `head` and the longest of `tails`, and `besides` (what the caller adds to the message). */
export function roomBeside(head: types.KnownBlock[], tails: types.KnownBlock[][], besides = 0): number {
  return LIMITS.messageBlockText - besides - blockTextLength(head) - Math.max(...tails.map((tail) => blockTextLength(tail)));
}

/**
 * A review's or flow request's message: `head`, the output, then `tail` (and its notification text). The
 * output gets `room` (what the message leaves it in any state it may take), or less if these parts take
 * more than that supposed.
 */
export function decisionMessage(
  p: Pick<DecisionMessageParams, "output" | "outputTruncated">,
  head: types.KnownBlock[],
  tail: { text: string; blocks: types.KnownBlock[] },
  room: number,
  besides = 0,
): SlackMessage {
  const fits = Math.min(room, roomBeside(head, [tail.blocks], besides));
  return { text: tail.text, blocks: [...head, ...outputBlocks(p.output, p.outputTruncated, fits), ...tail.blocks] };
}

/**
 * The block text a review message leaves for its output, in whichever state it is shown (its feedback,
 * note, decider and pending notes at their longest), so the output is shown the same way before and after
 * a decision, an escalation or a reassignment, and whether it needs a file is known when it is posted.
 * Escaped names, diffs and approvals are measured as built.
 */
function reviewOutputRoom(p: ReviewRoomParams, diffs = shownDiffs(p)): number {
  // Only these: the file decision (notifier.ts) knows no more, and must come to the same answer.
  const { taskName, agent, round, output, previous, approvals, edit, reassignable } = p;
  const longest = {
    ...{ taskName, agent, round, output, previous, approvals, edit, reassignable },
    reviewId: "",
    feedback: "x".repeat(FEEDBACK_MAX),
    note: "x".repeat(NOTE_MAX),
    decidedBy: LONGEST_USER,
    editFileAttached: true,
    pendingNotes: ["x".repeat(PENDING_NOTES_MAX)],
  };
  // The longer wording of each note about files: one may be attached later.
  const head = reviewHead({ ...longest, state: "pending", diffFileAttached: true, outputTruncated: true }, diffs);
  const tails = (["pending", "approved", "rejected", "closed"] as const).map((state) => reviewTail({ ...longest, state }, diffs).blocks);
  return roomBesideExtras(p, roomBeside(head, tails));
}

/** The reserve (outputNeedsFile) of a review's output: what reviewOutputRoom leaves it. */
export function reviewReserve(p: ReviewRoomParams): number {
  return roomReserve(reviewOutputRoom(p));
}

export function reviewMessage(p: ReviewParams): SlackMessage {
  if (p.reviewId.length > LIMITS.buttonValue) throw new Error("reviewId is too long for a button value");
  const diffs = shownDiffs(p);
  return decisionMessage(p, reviewHead(p, diffs), reviewTail(p, diffs), reviewOutputRoom(p, diffs));
}

/** The task (and round), and what changed since the previous round: above the output. */
function reviewHead(p: ReviewParams, diffs: ShownDiffs): types.KnownBlock[] {
  const task = bold(p.taskName, "Task");
  const agent = p.agent?.trim() ? ` · ${escapeMrkdwn(truncatePlain(p.agent, AGENT_MAX))}` : "";
  const previous = p.previous && diffs.round ? previousRoundBlocks(p.previous, diffs.round, !!p.diffFileAttached, !!p.outputTruncated) : [];
  // A task message (posted) is compact: the crew goes on by itself, so there is nothing to decide.
  const title = p.state === "posted" ? `✔️ ${task}${agent}${p.round > 1 ? ` · round ${p.round}` : ""}` : `📝 ${task}${agent} · round ${p.round}`;
  return [section(title), ...previous];
}

/** The state's part under the output (controls, decision, notes) and the notification text. */
function reviewTail(p: ReviewParams, diffs: ShownDiffs): { text: string; blocks: types.KnownBlock[] } {
  const note = p.note?.trim() ? fitMrkdwn(p.note.trim(), NOTE_MAX).text : "";
  // The notification text is mrkdwn too (<!here> in a task name would ping): escaped like the blocks.
  const name = escapeMrkdwn(truncatePlain(p.taskName, NAME_MAX));
  const blocks: types.KnownBlock[] = [];
  if (p.state === "posted") return { text: `✔️ Task finished: ${name}`, blocks };
  if (p.state === "pending") {
    blocks.push(feedbackInput(FEEDBACK_BLOCK, FEEDBACK_ACTION, "Required to reject; optional to approve"), reviewButtons(p.reviewId, p.reassignable));
    if (p.approvals) blocks.push(...pendingApprovalsBlocks(p.approvals, p.edit, diffs.edit));
    blocks.push(...pendingNotesBlocks(p.pendingNotes));
    if (note) blocks.push(context(note));
    return { text: `📝 Review needed: ${name} (round ${p.round})`, blocks };
  }
  if (p.state === "closed") {
    const stopped =
      p.runStopped &&
      `⏹️ ${p.runStopped.how === "stopped" ? "The run was stopped" : "Crewline stopped following the run"}${p.runStopped.by ? ` by ${userMention(p.runStopped.by)}` : ""}.`;
    blocks.push(section(`No decision needed — ${stopped || note || "the run moved on."}`));
    return { text: `No decision needed: ${name}`, blocks };
  }
  const by = p.byDeadline ? " by deadline (Crewline)" : p.decidedBy ? ` by ${userMention(p.decidedBy)}` : "";
  if (p.state === "approved" && (p.edit || p.approvals)) {
    blocks.push(...approvedBlocks({ decidedBy: p.decidedBy, approvals: p.approvals, edit: p.edit, editDiff: diffs.edit, editFileAttached: !!p.editFileAttached }));
    if (note) blocks.push(context(note));
    return { text: `${p.edit ? "Approved with edits" : "Approved"}: ${name}`, blocks };
  }
  const decision = p.state === "approved" ? `✅ Approved${by}` : `↩️ Rejected${by} — retrying`;
  const feedback = p.feedback?.trim() ? `\n${fitQuote(p.feedback.trim(), FEEDBACK_MAX).text}` : "";
  blocks.push(section(decision + feedback));
  if (note) blocks.push(context(note));
  return { text: `${p.state === "approved" ? "Approved" : "Rejected"}: ${name}`, blocks };
}

function reviewButtons(reviewId: string, reassignable = false): types.ActionsBlock {
  return {
    type: "actions",
    block_id: REVIEW_ACTIONS_BLOCK,
    elements: [
      { type: "button", action_id: APPROVE_ACTION, style: "primary", value: reviewId, text: plain("Approve", LIMITS.buttonText) },
      { type: "button", action_id: EDIT_ACTION, value: reviewId, text: plain("Edit and approve…", LIMITS.buttonText) },
      { type: "button", action_id: REJECT_ACTION, style: "danger", value: reviewId, text: plain("Reject", LIMITS.buttonText) },
      ...(reassignable ? [{ type: "button" as const, action_id: REASSIGN_ACTION, value: reviewId, text: plain("Reassign", LIMITS.buttonText) }] : []),
    ],
  };
}

// ---------------------------------------------------------------- completion and errors

export type RunOutcome = "succeeded" | "failed" | "lost";

export interface CompletionParams {
  crewName: string;
  userId: string;
  outcome: RunOutcome;
  durationMs: number;
  output?: string;
  error?: string;
  threadPermalink?: string;
  /** A file with the whole output was attached. */
  outputTruncated?: boolean;
}

const OUTCOMES: Record<RunOutcome, (crew: string) => string> = {
  succeeded: (crew) => `✅ Crew ${crew} finished`,
  failed: (crew) => `❌ Crew ${crew} failed`,
  lost: (crew) => `⚠️ Lost track of crew ${crew}`,
};

/** Posted in the channel (not the thread) when a run ends. */
export function completionMessage(p: CompletionParams): SlackMessage {
  const duration = formatDuration(p.durationMs);
  const blocks: types.KnownBlock[] = [section(`${OUTCOMES[p.outcome](bold(p.crewName, "Unnamed crew"))}\nStarted by ${userMention(p.userId)} · took ${duration}`)];
  const reason = p.error?.trim() ? readableError(p.error) : p.outcome === "lost" ? "Crewline stopped hearing from the run." : "";
  if (p.outcome !== "succeeded" && reason) blocks.push(section(`*Reason:* ${fitMrkdwn(reason, ERROR_MAX).text}`));
  // Posted in the channel: the file is in the run's thread.
  if (p.output !== undefined) blocks.push(...outputBlocks(p.output, p.outputTruncated, undefined, "in the run's thread"));
  const link = p.threadPermalink?.trim() ?? "";
  if (/^https?:\/\/\S+$/.test(link) && link.length <= PERMALINK_MAX) {
    blocks.push(context(`<${escapeMrkdwn(link).replace(/\|/g, "%7C")}|View the run's thread>`));
  }
  return { text: `${OUTCOMES[p.outcome](escapeMrkdwn(truncatePlain(p.crewName, NAME_MAX)))} (${duration})`, blocks };
}

/** A crew error, posted in the run's thread. */
export function errorNotice(text: string): SlackMessage {
  const message = readableError(text) || "Unknown error.";
  return {
    text: `⚠️ The crew reported an error: ${escapeMrkdwn(truncatePlain(message, 200))}`,
    blocks: [section(`⚠️ *The crew reported an error*\n${fitQuote(message, 2_500).text}`)],
  };
}
