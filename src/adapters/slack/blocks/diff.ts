// What changed between two versions of a task output (an edit against the original, round 2 against
// round 1), with the `diff` package (jsdiff): a compact word diff for the message, and the whole
// change as a unified diff for a file when the compact one does not fit. Pure functions only.
import { createHash } from "node:crypto";
import { createTwoFilesPatch, diffLines, diffWordsWithSpace } from "diff";
import { escapeMrkdwn, safeSlice } from "./text.js";

/** Characters of compact diff shown in a message; a longer one is cut and the whole diff attached as a file. */
export const DIFF_INLINE_MAX = 1_000;
/** Unchanged text kept on each side of a change. */
const CONTEXT = 40;
/**
 * Bounds on the work a diff may do, on the event loop: past them the versions "changed too much to
 * compare" and the new version is attached instead. Differing text (what is left once the lines both
 * versions start and end with are set aside) longer than DIFF_READ_MAX is not compared at all; jsdiff
 * gives up past the times or edit counts below (the line diff is tried after the word diff).
 */
const DIFF_READ_MAX = 30_000;
const WORD_TIMEOUT_MS = 30;
const WORD_EDITS_MAX = 2_000;
const LINE_TIMEOUT_MS = 15;
const LINE_EDITS_MAX = 1_000;
/** The unified diff (a file): more room, the same kind of bounds. */
const PATCH_READ_MAX = 256 * 1024;
const PATCH_TIMEOUT_MS = 40;
const PATCH_EDITS_MAX = 5_000;
/** A message is built several times (post, updates, file checks): recent diffs are kept, not recomputed. */
const RECENT_MAX = 16;
const recent = new Map<string, CompactDiff>();

export interface CompactDiff {
  /** `[-removed-]{+added+}` with a little unchanged context around each change (plain text). */
  text: string;
  /** The compact diff did not fit in DIFF_INLINE_MAX: the message shows the start, the file has the rest. */
  truncated: boolean;
  /** The versions differ too much to compare within the bounds above: nothing else is known (truncated too). */
  tooLarge?: boolean;
  added: number;
  removed: number;
  identical: boolean;
}

interface Part {
  value: string;
  added?: boolean;
  removed?: boolean;
}

/**
 * The lines both versions start and end with, set aside before diffing: jsdiff need not walk them,
 * and how much really differs is known before any diff is tried.
 */
export function commonLines(before: string, after: string): { head: string; before: string; after: string; tail: string } {
  const n = Math.min(before.length, after.length);
  let p = 0;
  while (p < n && before.charCodeAt(p) === after.charCodeAt(p)) p++;
  const head = p === 0 ? 0 : before.lastIndexOf("\n", p - 1) + 1;
  let s = 0;
  while (s < n - head && before.charCodeAt(before.length - 1 - s) === after.charCodeAt(after.length - 1 - s)) s++;
  // The common end, from the first line break inside it: both versions have the same lines after it.
  const nl = s > 0 ? after.indexOf("\n", after.length - s) : -1;
  const tail = nl === -1 ? 0 : after.length - nl - 1;
  return { head: after.slice(0, head), before: before.slice(head, before.length - tail), after: after.slice(head, after.length - tail), tail: after.slice(after.length - tail) };
}

function parts(before: string, after: string): Part[] | undefined {
  const common = commonLines(before, after);
  if (common.before.length + common.after.length > DIFF_READ_MAX) return undefined;
  const list =
    diffWordsWithSpace(common.before, common.after, { timeout: WORD_TIMEOUT_MS, maxEditLength: WORD_EDITS_MAX }) ??
    diffLines(common.before, common.after, { timeout: LINE_TIMEOUT_MS, maxEditLength: LINE_EDITS_MAX });
  if (!list) return undefined;
  const whole: Part[] = [];
  for (const part of [{ value: common.head }, ...list, { value: common.tail }] as Part[]) {
    if (!part.value) continue;
    const prev = whole.at(-1);
    if (prev && !prev.added && !prev.removed && !part.added && !part.removed) prev.value += part.value;
    else whole.push({ value: part.value, ...(part.added ? { added: true } : {}), ...(part.removed ? { removed: true } : {}) });
  }
  return mergeChanges(whole);
}

/** The whitespace a string ends with (a scan from the end: `/\s*$/` would be quadratic on long runs). */
function trailingSpace(text: string): string {
  let i = text.length;
  while (i > 0 && /\s/.test(text.charAt(i - 1))) i--;
  return text.slice(i);
}

/**
 * Changes separated only by whitespace read as one change ("[-grown steadily-]{+doubled+}" rather
 * than "[-grown-]{+doubled+} [-steadily -]"); whitespace both sides share stays outside the markers.
 */
export function mergeChanges(list: readonly Part[]): Part[] {
  const out: Part[] = [];
  let removed: string | undefined;
  let added: string | undefined;
  let gap = "";
  const flush = () => {
    if (removed === undefined && added === undefined) return;
    let r = removed ?? "";
    let a = added ?? "";
    const lead = r && a ? (/^\s*/.exec(r)![0] === /^\s*/.exec(a)![0] ? /^\s*/.exec(r)![0] : "") : "";
    r = r.slice(lead.length);
    a = a.slice(lead.length);
    const rTrail = trailingSpace(r);
    const trail = r && a && rTrail && a.endsWith(rTrail) ? rTrail : "";
    if (trail) {
      r = r.slice(0, -trail.length);
      a = a.slice(0, -trail.length);
    }
    if (lead) out.push({ value: lead });
    if (r) out.push({ value: r, removed: true });
    if (a) out.push({ value: a, added: true });
    if (trail) out.push({ value: trail });
    removed = added = undefined;
  };
  for (const part of list) {
    if (part.added || part.removed) {
      if (gap) {
        // Whitespace between two changes belongs to both sides of the merged change.
        removed = (removed ?? "") + gap;
        added = (added ?? "") + gap;
        gap = "";
      }
      if (part.removed) removed = (removed ?? "") + part.value;
      else added = (added ?? "") + part.value;
    } else if (!/\S/.test(part.value) && (removed !== undefined || added !== undefined)) {
      gap += part.value;
    } else {
      flush();
      if (gap) out.push({ value: gap });
      gap = "";
      out.push({ value: part.value });
    }
  }
  flush();
  if (gap) out.push({ value: gap });
  return out;
}

/** Unchanged text between changes, shortened to its ends ("…" in the middle), cut between words. */
function context(value: string, first: boolean, last: boolean): string {
  if (first && last) return "";
  let head = first ? "" : value.slice(0, CONTEXT);
  let tail = last ? "" : value.slice(-CONTEXT);
  const headBreak = head.search(/\s\S*$/);
  if (headBreak > CONTEXT / 2) head = head.slice(0, headBreak);
  const tailBreak = tail.search(/\s/);
  if (tailBreak >= 0 && tailBreak < CONTEXT / 2) tail = tail.slice(tailBreak + 1);
  if (value.length <= (first || last ? CONTEXT : 2 * CONTEXT) + 3) return value;
  if (first) return `…${tail}`;
  if (last) return `${head}…`;
  return `${head} … ${tail}`;
}

export function compactDiff(before: string, after: string): CompactDiff {
  if (before === after) return { text: "", truncated: false, added: 0, removed: 0, identical: true };
  const key = createHash("sha256").update(before).update("\u0000").update(after).digest("base64");
  const known = recent.get(key);
  if (known) return known;
  const diff = computeDiff(before, after);
  if (recent.size >= RECENT_MAX) recent.delete(recent.keys().next().value!);
  recent.set(key, diff);
  return diff;
}

function computeDiff(before: string, after: string): CompactDiff {
  const list = parts(before, after);
  if (!list) return { text: "", truncated: true, tooLarge: true, added: 0, removed: 0, identical: false };
  let text = "";
  let truncated = false;
  let added = 0;
  let removed = 0;
  list.forEach((part, i) => {
    const words = part.value.trim() ? part.value.trim().split(/\s+/).length : 0;
    if (part.added) added += words;
    if (part.removed) removed += words;
    if (truncated) return;
    const piece = part.added ? `{+${part.value}+}` : part.removed ? `[-${part.value}-]` : context(part.value, i === 0, i === list.length - 1);
    if (text.length + piece.length > DIFF_INLINE_MAX) {
      text += `${safeSlice(piece, Math.max(0, DIFF_INLINE_MAX - text.length))}…`;
      truncated = true;
      return;
    }
    text += piece;
  });
  return { text, truncated, added, removed, identical: false };
}

/** The compact diff as a mrkdwn code block (markers stay literal; nothing in it can ping anyone). */
export function diffCodeBlock(diff: CompactDiff): string {
  let body = escapeMrkdwn(diff.text).replace(/`/g, "ˋ");
  // Escaping can lengthen the text (& < >): keep the block bounded, never ending inside an entity.
  const bound = Math.ceil(DIFF_INLINE_MAX * 1.3);
  if (body.length > bound) body = `${safeSlice(body, bound).replace(/&(?:a|am|amp|l|lt|g|gt)?$/, "")}…`;
  return `\`\`\`${body || " "}\`\`\``;
}

/** The whole change as a unified diff, for a file; undefined when the versions changed too much to compare. */
export function unifiedDiff(before: string, after: string, beforeName: string, afterName: string): string | undefined {
  const common = commonLines(before, after);
  if (common.before.length + common.after.length > PATCH_READ_MAX) return undefined;
  return createTwoFilesPatch(beforeName, afterName, before.endsWith("\n") ? before : `${before}\n`, after.endsWith("\n") ? after : `${after}\n`, undefined, undefined, {
    context: 3,
    timeout: PATCH_TIMEOUT_MS,
    maxEditLength: PATCH_EDITS_MAX,
  });
}

/** "+12 / −3 words" */
export function diffStats(diff: CompactDiff): string {
  return `+${diff.added} / −${diff.removed} word${diff.added + diff.removed === 1 ? "" : "s"}`;
}
