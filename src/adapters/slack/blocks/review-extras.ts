// The parts of a review message beyond the output and its buttons: what changed since the previous
// round (and the feedback that asked for it), the approvals so far when a crew needs several, and an
// edit's diff against the original. Pure builders; reviewMessage (run.ts) places them.
import type { types } from "@slack/bolt";
import type { ReviewContext } from "../../../usecases/ports.js";
import { type CompactDiff, compactDiff, diffCodeBlock, diffStats } from "./diff.js";
import { context, section } from "./kit.js";
import { escapeMrkdwn, excerpt, fitQuote, truncatePlain, userMention } from "./text.js";

export type ApprovalsShown = NonNullable<ReviewContext["approvals"]>;
export type EditShown = NonNullable<ReviewContext["edit"]>;
export type PreviousRound = NonNullable<ReviewContext["previous"]>;

/**
 * Beside these parts an output is shown whole only when it is at least this much shorter than
 * OUTPUT_MARKDOWN_MAX (a long one reads better as a file there), or more when the rest of the
 * message takes more (the room of a review's or flow request's output, run.ts and flow.ts, measures it).
 */
export const EXTRAS_RESERVE = 2_600;
const QUOTE_MAX = 300;
const NOTE_MAX = 150;
const APPROVALS_MAX = 800;

/** The diff of a round against the previous one, or undefined when there is nothing to compare. */
function roundDiff(previous: PreviousRound | undefined, output: string): CompactDiff | undefined {
  return previous ? compactDiff(previous.output, output) : undefined;
}

/** The diffs a review's (or flow request's) message shows: against the previous round, and of an edit. */
export interface ShownDiffs {
  round?: CompactDiff;
  edit?: CompactDiff;
}

/**
 * Computed once per message build and passed to the builders below: the message is measured in every
 * state it may take, each showing the same diffs (compactDiff's cache still hashes both versions).
 */
export function shownDiffs(p: { output: string; previous?: PreviousRound; edit?: EditShown }): ShownDiffs {
  return { round: roundDiff(p.previous, p.output), edit: p.edit && compactDiff(p.output, p.edit.text) };
}

/** Whether the round's whole diff goes in a file (the compact one was cut, but the versions could be compared). */
export function roundDiffNeedsFile(previous: PreviousRound | undefined, output: string): boolean {
  const diff = roundDiff(previous, output);
  return !!diff?.truncated && !diff.tooLarge;
}

/** The round changed too much to compare: the new version is attached as a file instead of a diff. */
export function roundDiffTooLarge(previous: PreviousRound | undefined, output: string): boolean {
  return roundDiff(previous, output)?.tooLarge ?? false;
}

/** Whether an edit's whole text goes in a file: its diff was cut, or the edited version is long. */
export function editNeedsFile(original: string, edited: string, longOutput: (text: string) => boolean): boolean {
  return compactDiff(original, edited).truncated || longOutput(edited);
}

/** `versionAttached`: what a reader finds instead when the versions changed too much to compare. */
function diffBlocks(title: string, diff: CompactDiff, fileNote: string | undefined, versionAttached?: string): types.KnownBlock[] {
  if (diff.identical) return [context(`${title}: no change.`)];
  if (diff.tooLarge) return [section(`*${title}*: changed too much to compare${versionAttached ? `; ${versionAttached}` : "."}`)];
  const blocks: types.KnownBlock[] = [section(`*${title}* (${diffStats(diff)})\n${diffCodeBlock(diff)}`)];
  if (diff.truncated) blocks.push(context(fileNote ?? "Diff shortened to fit in Slack."));
  return blocks;
}

/** Round 2 and later: the feedback that asked for the round, then what changed (`diff`: shownDiffs' round). */
export function previousRoundBlocks(previous: PreviousRound, diff: CompactDiff, diffFileAttached: boolean, outputFileAttached: boolean): types.KnownBlock[] {
  const blocks: types.KnownBlock[] = [];
  if (previous.feedback?.trim()) {
    const by = previous.decidedBy ? ` by ${userMention(previous.decidedBy)}` : "";
    const quote = fitQuote(previous.feedback.trim(), QUOTE_MAX).text;
    blocks.push(section(`↩️ Round ${previous.round} was rejected${by} with this feedback:\n${quote}`));
  }
  const instead = outputFileAttached ? "the new version is attached below as a file." : "the new version is below.";
  blocks.push(...diffBlocks(`Changes since round ${previous.round}`, diff, diffFileAttached ? "The whole diff is attached below as a file." : undefined, instead));
  return blocks;
}

/** "1 of 2 approvals: @a (with edits)"; each approver's note under it. */
/** Who approved and how many of how many; `forOutcome` (mrkdwn, escaped): the flow outcome these approvals are counted toward. */
export function approvalsLine(approvals: ApprovalsShown, forOutcome?: string): string {
  const names = approvals.by.map((a) => `${userMention(a.userId)}${a.edited ? " (with edits)" : ""}`).join(", ");
  const count = `${Math.min(approvals.by.length, approvals.required)} of ${approvals.required} approval${approvals.required === 1 ? "" : "s"}${forOutcome ? ` for ${forOutcome}` : ""}`;
  const notes = approvals.by
    .filter((a) => a.note?.trim())
    .map((a) => `${userMention(a.userId)}: ${escapeMrkdwn(truncatePlain(a.note!, NOTE_MAX))}`)
    .join("\n");
  const text = `${count}${names ? `: ${names}` : ""}${notes ? `\n${notes}` : ""}`;
  return excerpt(text, APPROVALS_MAX).text;
}

/** While waiting for more approvals: who approved so far (`editDiff`: shownDiffs' edit, there with an edit). */
export function pendingApprovalsBlocks(approvals: ApprovalsShown, edit: EditShown | undefined, editDiff: CompactDiff | undefined): types.KnownBlock[] {
  if (approvals.required <= 1 && !approvals.by.length) return [];
  const blocks: types.KnownBlock[] = [context(`☑️ ${approvalsLine(approvals)}`)];
  if (edit && editDiff) blocks.push(...diffBlocks(`Proposed edit by ${userMention(edit.by)}`, editDiff, undefined));
  return blocks;
}

/** The approval, with its edit (as a diff against the original) and who approved. */
export function approvedBlocks(p: {
  decidedBy?: string;
  approvals?: ApprovalsShown;
  edit?: EditShown;
  /** shownDiffs' edit, there with an edit. */
  editDiff?: CompactDiff;
  editFileAttached: boolean;
  /** Who received the edit (default the crew). */
  receiver?: "crew" | "flow";
}): types.KnownBlock[] {
  const by = p.edit ? p.edit.by : p.decidedBy;
  const head = `✅ Approved${p.edit ? " with edits" : ""}${by ? ` by ${userMention(by)}` : ""}`;
  const blocks: types.KnownBlock[] = [];
  const several = p.approvals && (p.approvals.required > 1 || p.approvals.by.length > 1);
  blocks.push(section(several ? `${head}\n${approvalsLine(p.approvals!)}` : head));
  if (p.edit && p.editDiff) {
    const attached = p.editFileAttached ? "The edited version is attached below as a file." : undefined;
    blocks.push(...diffBlocks("The edit", p.editDiff, attached, attached && "the edited version is attached below as a file."));
    if (p.editFileAttached && !p.editDiff.truncated) blocks.push(context("The edited version is attached below as a file."));
    blocks.push(context(p.receiver === "flow" ? "The flow received the edited version with the answer." : "The crew received the edited version as the task's output."));
  }
  return blocks;
}
