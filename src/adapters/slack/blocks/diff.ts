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
/** jsdiff gives up after this long (huge, very different outputs); the line diff is tried next. */
const DIFF_TIMEOUT_MS = 100;
/** A message is built several times (post, updates, file checks): recent diffs are kept, not recomputed. */
const RECENT_MAX = 16;
const recent = new Map<string, CompactDiff>();

export interface CompactDiff {
  /** `[-removed-]{+added+}` with a little unchanged context around each change (plain text). */
  text: string;
  /** The compact diff did not fit in `max`: the message shows the start, the file has the rest. */
  truncated: boolean;
  added: number;
  removed: number;
  identical: boolean;
}

interface Part {
  value: string;
  added?: boolean;
  removed?: boolean;
}

function parts(before: string, after: string): Part[] | undefined {
  const list = diffWordsWithSpace(before, after, { timeout: DIFF_TIMEOUT_MS }) ?? diffLines(before, after, { timeout: DIFF_TIMEOUT_MS });
  return list && mergeChanges(list);
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
    const rTrail = /\s*$/.exec(r)![0];
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

export function compactDiff(before: string, after: string, max = DIFF_INLINE_MAX): CompactDiff {
  if (before === after) return { text: "", truncated: false, added: 0, removed: 0, identical: true };
  const key = createHash("sha256").update(before).update("\u0000").update(after).update(`\u0000${max}`).digest("base64");
  const known = recent.get(key);
  if (known) return known;
  const diff = computeDiff(before, after, max);
  if (recent.size >= RECENT_MAX) recent.delete(recent.keys().next().value!);
  recent.set(key, diff);
  return diff;
}

function computeDiff(before: string, after: string, max: number): CompactDiff {
  const list = parts(before, after);
  if (!list) return { text: "(too many changes to show here)", truncated: true, added: 0, removed: 0, identical: false };
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
    if (text.length + piece.length > max) {
      text += `${safeSlice(piece, Math.max(0, max - text.length))}…`;
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

/** The whole change as a unified diff, for a file. */
export function unifiedDiff(before: string, after: string, beforeName: string, afterName: string): string {
  return createTwoFilesPatch(beforeName, afterName, before.endsWith("\n") ? before : `${before}\n`, after.endsWith("\n") ? after : `${after}\n`, undefined, undefined, {
    context: 3,
  });
}

/** "+12 / −3 words" */
export function diffStats(diff: CompactDiff): string {
  return `+${diff.added} / −${diff.removed} word${diff.added + diff.removed === 1 ? "" : "s"}`;
}
