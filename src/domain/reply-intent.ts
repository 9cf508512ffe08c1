// What a reply in a review's thread asks for, read from its text (pure, linear, no regex over the
// text): a few words alone approve, a few prefixes reject with the rest as feedback, and anything else
// is not guessed at (the replier is asked). Flow requests: an outcome the flow routes on, named alone
// or as a prefix, or the same approve and reject words mapped to its approve- and reject-like outcomes.
import { outcomeLeaning } from "./flow-outcomes.js";

/** Replies are cut to this many characters before anything reads them (Slack allows 40,000). */
export const REPLY_TEXT_MAX = 4000;

export type ReplyIntent = { kind: "approve" } | { kind: "reject"; feedback: string } | { kind: "other" };

/** A flow request's answer named by a reply: the outcome's index in its `emit`, and the comment after it. */
export type FlowReplyIntent = { kind: "outcome"; index: number; comment: string } | { kind: "other" };

const APPROVE_WORDS = new Set(["approve", "approved", "lgtm", "ship it"]);
const THUMBS_UP = ["👍", ":+1:", ":thumbsup:"];
/** Skin tones after a thumbs up: the emoji's modifiers (U+1F3FB–U+1F3FF), or Slack's `:skin-tone-N:` after a shortcode. */
const SKIN_TONES = ["\u{1F3FB}", "\u{1F3FC}", "\u{1F3FD}", "\u{1F3FE}", "\u{1F3FF}", ":skin-tone-2:", ":skin-tone-3:", ":skin-tone-4:", ":skin-tone-5:", ":skin-tone-6:"];
const REJECT_PREFIXES = ["reject", "changes", "redo"] as const;
/**
 * Characters around a reply that do not change what it says ("LGTM!", "*approved*", "(ship it)"); not
 * ":", which emoji codes use, and not "?" or "¿": "lgtm?" asks, it does not decide.
 */
const SURROUNDING = new Set(" \t\r\n\u00a0.,;!¡…-–—\"'`*_~()[]{}<>“”‘’«»");

/** The text cut to REPLY_TEXT_MAX characters (never inside a surrogate pair), and whether it was cut. */
export function cutReply(text: string, max = REPLY_TEXT_MAX): { text: string; cut: boolean } {
  if (text.length <= max) return { text, cut: false };
  let end = max;
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end--;
  return { text: text.slice(0, end), cut: true };
}

/** The text without the whitespace and punctuation around it (a scan from each end). */
function stripSurrounding(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && SURROUNDING.has(text[start]!)) start++;
  while (end > start && SURROUNDING.has(text[end - 1]!)) end--;
  return text.slice(start, end);
}

/** Runs of whitespace as one space, lower case: how words are compared. */
function normalise(text: string): string {
  let out = "";
  let space = false;
  for (const ch of text) {
    if (ch === " " || ch === "\t" || ch === "\n" || ch === "\r" || ch === "\u00a0") {
      space = true;
      continue;
    }
    if (space && out) out += " ";
    space = false;
    out += ch;
  }
  return out.toLowerCase();
}

/** Whether the (stripped, normalised) reply is one approve word alone, or a thumbs up (with or without a skin tone). */
function isApproval(word: string): boolean {
  if (APPROVE_WORDS.has(word)) return true;
  for (const thumb of THUMBS_UP) {
    if (!word.startsWith(thumb)) continue;
    const rest = word.slice(thumb.length);
    if (rest === "" || SKIN_TONES.includes(rest)) return true;
  }
  return false;
}

/**
 * The text after `word` and a colon at the start of the reply (`Changes: shorter intro`, `redo :x`),
 * case-insensitive, or undefined when the reply does not start that way.
 */
function afterPrefix(text: string, word: string): string | undefined {
  let i = 0;
  while (i < text.length && SURROUNDING.has(text[i]!)) i++;
  if (text.slice(i, i + word.length).toLowerCase() !== word) return undefined;
  i += word.length;
  while (i < text.length && (text[i] === " " || text[i] === "\t" || text[i] === "*" || text[i] === "_")) i++;
  if (text[i] !== ":") return undefined;
  return text.slice(i + 1).trim();
}

/** What a reply to a crew review asks for. The text should be cut (cutReply) first. */
export function replyIntent(text: string): ReplyIntent {
  const trimmed = text.trim();
  if (!trimmed) return { kind: "other" };
  for (const prefix of REJECT_PREFIXES) {
    const feedback = afterPrefix(trimmed, prefix);
    if (feedback !== undefined) return { kind: "reject", feedback };
  }
  // Short replies only: an approve word is a few characters.
  if (trimmed.length <= 64 && isApproval(normalise(stripSurrounding(trimmed)))) return { kind: "approve" };
  return { kind: "other" };
}

/** An outcome as a reply names it: `needs_revision` and `Needs revision` alike. */
function outcomeWords(outcome: string): string {
  return normalise(outcome.replaceAll("_", " ").replaceAll("-", " "));
}

/**
 * What a reply to a flow request asks for, given the outcomes it routes on (`emit`): an outcome named
 * alone or as a prefix (`needs_revision: cite sources`), or an approve or reject reply (replyIntent)
 * when the flow has an approve- or reject-like outcome. A flow without outcomes takes free feedback,
 * which a reply gives only after the question.
 */
export function flowReplyIntent(text: string, emit: readonly string[]): FlowReplyIntent {
  const trimmed = text.trim();
  if (!trimmed || emit.length === 0) return { kind: "other" };
  const word = trimmed.length <= 200 ? outcomeWords(stripSurrounding(trimmed)) : undefined;
  // Outcomes are compared with "_" and "-" read as spaces; the comment keeps them (same length).
  const spaced = trimmed.replaceAll("_", " ").replaceAll("-", " ");
  for (let index = 0; index < emit.length; index++) {
    const named = outcomeWords(emit[index]!);
    if (!named) continue;
    if (word === named) return { kind: "outcome", index, comment: "" };
    const comment = afterPrefix(spaced, named);
    if (comment !== undefined) return { kind: "outcome", index, comment: comment ? trimmed.slice(trimmed.length - comment.length) : "" };
  }
  const intent = replyIntent(trimmed);
  if (intent.kind === "other") return intent;
  const choices = flowReplyChoices(emit);
  if (intent.kind === "approve" && choices.approve !== undefined) return { kind: "outcome", index: choices.approve, comment: "" };
  if (intent.kind === "reject" && choices.reject !== undefined && intent.feedback) return { kind: "outcome", index: choices.reject, comment: intent.feedback };
  return { kind: "other" };
}

/** The outcomes the private question offers for a flow request: its first approve-like and first reject-like one. */
export function flowReplyChoices(emit: readonly string[]): { approve?: number; reject?: number } {
  const approve = emit.findIndex((o) => outcomeLeaning(o) === "approve");
  const reject = emit.findIndex((o) => outcomeLeaning(o) === "reject");
  return { ...(approve >= 0 ? { approve } : {}), ...(reject >= 0 ? { reject } : {}) };
}
