// A flow's outcomes (the words it routes on, its `emit`), and which of them approve or reject: the
// approve-like outcome is the one an edit, a required approval or an approving deadline answers with.
//
// An outcome leans one way only when its words clearly say so; anything mixed or unknown leans neither
// way (then a deadline reminds instead of choosing, and no Approve is offered on App Home). The first
// word alone is not enough: `go_back`, `continue_editing` and `pass_to_legal` do not approve,
// `confirm_rejection` rejects, `no_issues_found` does not reject.

/** Approve by themselves, whatever follows (`approve_with_changes`, `publish_now`). */
const APPROVE = new Set(["approve", "approved", "accept", "accepted", "lgtm", "publish", "ship"]);
/**
 * Say yes to something: they approve alone or with approve and filler words only (`yes`, `go_ahead`,
 * `ok_to_publish`), reject with reject words (`confirm_rejection`, `ok_to_reject`), and otherwise say
 * nothing (`go_back`, `continue_editing`, `pass_to_legal`).
 */
const AFFIRM = new Set(["yes", "ok", "okay", "confirm", "confirmed", "continue", "proceed", "pass", "go"]);
const REJECT = new Set([
  "reject",
  "rejected",
  "rejection",
  "deny",
  "denied",
  "decline",
  "declined",
  "cancel",
  "cancelled",
  "canceled",
  "abort",
  "stop",
  "fail",
  "block",
  "blocked",
  "revise",
  "redo",
  "discard",
]);
/** Turn what follows around: with one, nothing approves or rejects, except one before an approve word alone (`not_approved`, `no_go`). */
const NEGATION = new Set(["no", "not", "dont", "never", "cannot", "cant", "wont"]);
/** Send the work back: an outcome with one does not approve (`publish_back` is no approval). */
const BACK = new Set(["back", "undo", "revert"]);
/** Change nothing about which way an outcome leans. */
const FILLER = new Set(["a", "an", "the", "it", "to", "and", "as", "is", "do", "for", "with", "now", "please", "ahead", "all", "good", "yet", "live"]);

const LETTER_OR_DIGIT = /[\p{L}\p{N}]/u;

/**
 * The outcome's words, lower case: split at anything that is not a letter or digit and where a lower
 * case letter meets an upper case one (`goBack`); apostrophes join (`don't` is `dont`). One pass.
 */
function wordsOf(outcome: string): string[] {
  const words: string[] = [];
  let word = "";
  let afterLower = false;
  for (const ch of outcome) {
    if (ch === "'" || ch === "\u2019") continue;
    if (!LETTER_OR_DIGIT.test(ch)) {
      if (word) words.push(word);
      word = "";
      afterLower = false;
      continue;
    }
    const lower = ch.toLowerCase();
    if (lower !== ch && afterLower) {
      words.push(word);
      word = "";
    }
    word += lower;
    afterLower = ch !== ch.toUpperCase();
  }
  if (word) words.push(word);
  return words;
}

/**
 * "approve" for approve-like outcomes, "reject" for reject-like ones, undefined otherwise. Filler words
 * aside, an outcome approves when it starts with an approve word, or holds only approve and affirming
 * words, and has no reject, negation or send-back word; it rejects when it starts with a reject word, or
 * holds only reject and affirming words; a negation rejects only directly before an approve or affirming
 * word that is all there is (`not_approved`), and otherwise leaves it leaning neither way. Linear: one
 * pass over the name, set lookups.
 */
export function outcomeLeaning(outcome: string): "approve" | "reject" | undefined {
  const words = wordsOf(outcome).filter((w) => !FILLER.has(w));
  if (words.length === 0) return undefined;
  if (words.length === 1 && words[0] === "no") return "reject";
  let approve = 0;
  let affirm = 0;
  let reject = 0;
  let negation = 0;
  let back = 0;
  for (const w of words) {
    if (APPROVE.has(w)) approve++;
    else if (AFFIRM.has(w)) affirm++;
    else if (REJECT.has(w)) reject++;
    else if (NEGATION.has(w)) negation++;
    else if (BACK.has(w)) back++;
  }
  const first = words[0]!;
  // `approve_or_reject` names a choice, not an answer.
  if (words.includes("or")) return undefined;
  if (negation > 0) {
    // `not_approved`, `no_go`, `dont_publish`: a refusal. Anything longer is not guessed at.
    const refusal = words.length === 2 && NEGATION.has(first) && (APPROVE.has(words[1]!) || AFFIRM.has(words[1]!));
    return refusal ? "reject" : undefined;
  }
  if (reject === 0 && back === 0 && (APPROVE.has(first) || approve + affirm === words.length)) return "approve";
  // A reject word first rejects whatever it names (`cancel_publish`); later, only among words that say yes.
  if (REJECT.has(first) || (reject > 0 && reject + affirm === words.length)) return "reject";
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
