// The rules of approving a review, as pure functions: how many distinct people must approve, whether
// the run's starter may approve, what the crew is told (human_feedback) once enough people approved,
// and which part of a long output a Slack text input can hold for editing. The rows behind them are
// in the store (store/approvals.ts); Reviews.decide applies them.

export interface ApprovalPolicy {
  /** Distinct people who must approve before the crew is resumed (at least 1). */
  required: number;
  /** Whether whoever started the run may approve its reviews (they may always reject). */
  selfApproval: boolean;
}

export const DEFAULT_APPROVAL_POLICY: ApprovalPolicy = { required: 1, selfApproval: true };

/** The policy of a crew (or flow) from its configuration: `approvals` and `selfApproval`, defaulted. */
export function approvalPolicy(config: { approvals?: number; selfApproval?: boolean } | undefined): ApprovalPolicy {
  const required = Math.max(1, Math.floor(config?.approvals ?? 1));
  return { required, selfApproval: config?.selfApproval ?? true };
}

/** One stored approval (a row of ReviewApproval, or its flow equivalent). */
export interface StoredApproval {
  userId: string;
  note: string | null;
  /** The whole output as this approver edited it (edit and approve), if they did. */
  editedOutput: string | null;
  /** The approve-like outcome it is for (flow requests; null on a flow without outcomes, absent on a review). */
  outcome?: string | null;
  createdAt: Date;
}

/** The run's starter may not approve when the policy says so. */
export function selfApprovalRefused(policy: ApprovalPolicy, starterId: string, userId: string): boolean {
  return !policy.selfApproval && starterId === userId;
}

export interface ApprovalTally {
  /** Distinct approvers, oldest first. */
  approvers: string[];
  required: number;
  /** Enough distinct people approved: the crew may be resumed. */
  done: boolean;
}

/**
 * The approvals that count together with one for `outcome`: a flow's approve-like outcomes are each
 * counted apart (the flow receives the one N people chose); undefined (a review's): all of them.
 */
export function approvalsFor<A extends StoredApproval>(approvals: readonly A[], outcome: string | null | undefined): A[] {
  return outcome === undefined ? [...approvals] : approvals.filter((a) => (a.outcome ?? null) === outcome);
}

export function approvalTally(approvals: readonly StoredApproval[], required: number): ApprovalTally {
  const approvers = [...new Set(byTime(approvals).map((a) => a.userId))];
  return { approvers, required, done: approvers.length >= Math.max(1, required) };
}

/** The edit that goes to the crew: the latest one, when several approvers edited. */
export function latestEdit(approvals: readonly StoredApproval[]): (StoredApproval & { editedOutput: string }) | undefined {
  return byTime(approvals)
    .filter((a): a is StoredApproval & { editedOutput: string } => a.editedOutput !== null)
    .at(-1);
}

export const EDITED_OUTPUT_START = "----- EDITED OUTPUT START -----";
export const EDITED_OUTPUT_END = "----- EDITED OUTPUT END -----";

/**
 * human_feedback for an approval. One approver without an edit: their note, or "Approved" (as
 * before). Several approvers: who approved and each one's note. An edit: says plainly that the
 * reviewer replaced the output, and carries the edited version whole between markers.
 */
export function approvalFeedback(approvals: readonly StoredApproval[], subject = "this task's output"): string {
  const ordered = byTime(approvals);
  const edit = latestEdit(ordered);
  const notes = ordered.filter((a) => a.note?.trim());
  if (ordered.length <= 1 && !edit) return ordered[0]?.note?.trim() || "Approved";
  const parts: string[] = [];
  const who = ordered.map((a) => a.userId);
  if (ordered.length > 1) parts.push(`Approved by ${who.length} reviewers: ${who.join(", ")}.`);
  if (edit) {
    const others = ordered.filter((a) => a.editedOutput !== null && a !== edit).length;
    parts.push(
      `The reviewer ${edit.userId} replaced ${subject} with an edited version and approved it. ` +
        "Treat the edited version below as the approved output, in place of the original." +
        (others ? ` (${others} earlier edit${others === 1 ? " was" : "s were"} replaced by this one.)` : ""),
    );
  }
  if (notes.length === 1 && ordered.length === 1) parts.push(`Reviewer's note: ${notes[0]!.note!.trim()}`);
  else if (notes.length) parts.push(["Reviewers' notes:", ...notes.map((a) => `- ${a.userId}: ${a.note!.trim()}`)].join("\n"));
  if (edit) parts.push(`${EDITED_OUTPUT_START}\n${edit.editedOutput}\n${EDITED_OUTPUT_END}`);
  return parts.join("\n\n");
}

/** Slack's plain_text_input holds at most this many characters (initial_value and typed text). */
export const EDITABLE_MAX = 3000;

/**
 * Room kept free in the text input when only part of an output fits: a first part that filled it to
 * Slack's limit could not take a single added word without deleting first.
 */
export const EDIT_ROOM = 500;

/**
 * The part of an output a text input can hold for editing, with EDIT_ROOM characters left for
 * additions, and the rest that is kept unchanged and appended after the edit. Cut at a line break
 * when there is one in the second half of what fits, else at a space there, never inside a surrogate
 * pair. `head + rest === output`, always.
 */
export function editableSplit(output: string, max = EDITABLE_MAX): { head: string; rest: string } {
  if (output.length <= max) return { head: output, rest: "" };
  const fits = max - Math.min(EDIT_ROOM, Math.floor(max / 4));
  // Never end on the first half of a surrogate pair.
  const high = output.charCodeAt(fits - 1);
  let head = output.slice(0, high >= 0xd800 && high <= 0xdbff ? fits - 1 : fits);
  const lineBreak = head.lastIndexOf("\n");
  const space = head.lastIndexOf(" ");
  if (lineBreak >= fits / 2) head = head.slice(0, lineBreak);
  else if (space >= fits / 2) head = head.slice(0, space);
  return { head, rest: output.slice(head.length) };
}

/** The whole edited output: the edited head, then the part that could not be edited, unchanged. */
export function joinEdit(editedHead: string, rest: string): string {
  return editedHead + rest;
}

/**
 * Whether a submitted edit leaves the text as it was. Slack's text input may hand back line breaks
 * and trailing whitespace differently from how they were sent; that alone is no edit.
 */
export function unchangedEdit(original: string, submitted: string): boolean {
  const norm = (t: string) => t.replace(/\r\n?/g, "\n").trimEnd();
  return norm(original) === norm(submitted);
}

function byTime(approvals: readonly StoredApproval[]): StoredApproval[] {
  return [...approvals].sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime());
}
