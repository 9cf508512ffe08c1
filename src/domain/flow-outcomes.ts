// A flow's outcomes (the words it routes on, its `emit`), and which of them approve or reject: the
// approve-like outcome is the one an edit, a required approval or an approving deadline answers with.

const APPROVE_LIKE = /^(approve|approved|accept|accepted|yes|ok|okay|lgtm|publish|ship|confirm|confirmed|continue|proceed|pass|go)\b/i;
const REJECT_LIKE = /^(reject|rejected|deny|denied|decline|declined|no|cancel|cancelled|canceled|abort|stop|fail|block|blocked|revise|redo|discard)\b/i;

/** "approve" for approve-like outcomes, "reject" for reject-like ones, undefined otherwise. */
export function outcomeLeaning(outcome: string): "approve" | "reject" | undefined {
  const word = outcome.trim().replace(/[_-]+/g, " ");
  if (APPROVE_LIKE.test(word)) return "approve";
  if (REJECT_LIKE.test(word)) return "reject";
  return undefined;
}

/** The outcomes a request's flow routes on (its `emit` column), in order. */
export function outcomesOf(request: { emit: unknown }): string[] {
  return Array.isArray(request.emit) ? request.emit.filter((o): o is string => typeof o === "string") : [];
}

/** Whether a request can be approved with an edit: the flow offers an approve-like outcome, or takes free feedback. */
export function flowEditable(emit: readonly string[]): boolean {
  return emit.length === 0 || emit.some((e) => outcomeLeaning(e) === "approve");
}
