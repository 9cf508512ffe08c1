// Text utilities for Block Kit: Markdown → Slack mrkdwn, escaping, and
// length-bounded excerpts. Pure functions only.
import { ELLIPSIS, safeSlice, truncatePlain } from "../../../text/truncate.js";

export { ELLIPSIS, safeSlice, truncatePlain };

export function escapeMrkdwn(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** `<@U123>` for a Slack user id; anything else is shown as escaped text. */
export function userMention(userId: string): string {
  return /^[UW][A-Z0-9]{1,40}$/.test(userId) ? `<@${userId}>` : escapeMrkdwn(truncatePlain(userId, 60));
}

/** Prefixes every line with "> " (Slack quote). */
export function quoteMrkdwn(mrkdwn: string): string {
  return mrkdwn
    .split("\n")
    .map((line) => `> ${line}`)
    .join("\n");
}

// ---------------------------------------------------------------- Markdown → mrkdwn

const FENCE_LINE = /^ {0,3}(`{3,}|~{3,})/;
const RULE_LINE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const BULLET_LINE = /^([ \t]*)[-*+][ \t]+([\s\S]*)$/;
const TASK_ITEM = /^\[([ xX])\][ \t]+/;
// Sentinels from the Private Use Area; stripped from the input first.
const TOKEN_OPEN = "\uE000";
const TOKEN_CLOSE = "\uE001";
const BOLD = "\uE002";

// Everything below reads its input once (hand-written scanners where a regular expression would
// backtrack): crew text is hostile, and an unclosed marker repeated a million times must cost no
// more than the same length of plain text.

/** Standard Markdown to Slack mrkdwn. Linear in the length of `md`. */
export function markdownToMrkdwn(md: string): string {
  const out: string[] = [];
  let fence: string | null = null;
  for (const line of md
    .replace(/\r\n?/g, "\n")
    .replace(/[\uE000-\uE002]/g, "")
    .split("\n")) {
    const marker = FENCE_LINE.exec(line)?.[1];
    if (fence !== null) {
      const closes = marker !== undefined && marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker;
      if (closes) fence = null;
      // Entities are transport encoding, not formatting: Slack shows &lt; as "<" inside code too.
      out.push(closes ? "```" : escapeMrkdwn(line));
      continue;
    }
    if (marker !== undefined) {
      fence = marker;
      out.push("```"); // the info string (language) would render as code text in mrkdwn
      continue;
    }
    out.push(convertLine(line));
  }
  if (fence !== null) out.push("```");
  return out.join("\n");
}

function convertLine(text: string): string {
  let line = text;
  let quotes = "";
  for (;;) {
    if (RULE_LINE.test(line)) return `${quotes}──────────`;
    const heading = headingTitle(line);
    if (heading !== undefined) {
      const title = heading.replace(/\*\*|__/g, "");
      return quotes + (title ? `*${convertInline(title)}*` : "");
    }
    const quoted = quoteBody(line);
    if (quoted === undefined) break;
    quotes += "> ";
    line = quoted;
  }
  const bullet = BULLET_LINE.exec(line);
  if (bullet) {
    const item = (bullet[2] ?? "").replace(TASK_ITEM, (_m, mark: string) => (mark === " " ? "☐ " : "☑ "));
    return `${quotes}${bullet[1] ?? ""}• ${convertInline(item)}`;
  }
  return quotes + convertInline(line);
}

const isBlank = (c: number) => c === 0x20 || c === 0x09;

/** Up to three spaces of indentation: the index after them. */
function indentEnd(line: string): number {
  let i = 0;
  while (i < 3 && line.charCodeAt(i) === 0x20) i++;
  return i;
}

/** An ATX heading's title (`## Title ##` → "Title"), or undefined when the line is not a heading. */
function headingTitle(line: string): string | undefined {
  let i = indentEnd(line);
  const hashes = i;
  while (line.charCodeAt(i) === 0x23 /* # */) i++;
  if (i === hashes || i - hashes > 6 || !isBlank(line.charCodeAt(i))) return undefined;
  while (isBlank(line.charCodeAt(i))) i++;
  let end = line.length;
  while (end > i && isBlank(line.charCodeAt(end - 1))) end--;
  // A closing sequence: blanks then #s at the end.
  let h = end;
  while (h > i && line.charCodeAt(h - 1) === 0x23) h--;
  if (h < end && h > i) {
    let b = h;
    while (isBlank(line.charCodeAt(b - 1))) b--;
    if (b < h) end = b;
  }
  return line.slice(i, end);
}

/** The text of a block quote line after its `>` markers, or undefined when the line is no quote. */
function quoteBody(line: string): string | undefined {
  let i = indentEnd(line);
  if (line.charCodeAt(i) !== 0x3e /* > */) return undefined;
  while (line.charCodeAt(i) === 0x3e) {
    i++;
    if (isBlank(line.charCodeAt(i))) i++;
  }
  return line.slice(i);
}

/** Formats a line, leaving inline code spans unformatted. */
function convertInline(text: string): string {
  if (!text.includes("`")) return formatText(text);
  let out = "";
  let last = 0;
  for (const span of codeSpans(text)) {
    const ticks = text.slice(span.start, span.start + span.ticks);
    out += formatText(text.slice(last, span.start)) + ticks + escapeMrkdwn(text.slice(span.start + span.ticks, span.end - span.ticks)) + ticks;
    last = span.end;
  }
  return out + formatText(text.slice(last));
}

/**
 * Code spans: a run of backticks up to the next run of the same length (CommonMark). Each run is
 * looked at once: per length, a pointer moves forward through that length's runs.
 */
function codeSpans(text: string): { start: number; end: number; ticks: number }[] {
  const runs: { start: number; ticks: number }[] = [];
  for (let i = text.indexOf("`"); i !== -1; ) {
    let j = i;
    while (text.charCodeAt(j) === 0x60) j++;
    runs.push({ start: i, ticks: j - i });
    i = text.indexOf("`", j);
  }
  if (runs.length < 2) return [];
  const byLength = new Map<number, number[]>();
  runs.forEach((run, index) => {
    const list = byLength.get(run.ticks);
    if (list) list.push(index);
    else byLength.set(run.ticks, [index]);
  });
  const next = new Map<number, number>();
  const spans: { start: number; end: number; ticks: number }[] = [];
  for (let k = 0; k < runs.length; ) {
    const { start, ticks } = runs[k]!;
    const list = byLength.get(ticks)!;
    let p = next.get(ticks) ?? 0;
    while (p < list.length && list[p]! <= k) p++;
    next.set(ticks, p);
    if (p === list.length) {
      k++;
      continue;
    }
    const close = list[p]!;
    spans.push({ start, end: runs[close]!.start + ticks, ticks });
    k = close + 1;
  }
  return spans;
}

/** Characters that may start something to convert; text without them is only escaped. */
const FORMATTING = /[\\`*_~[<]/;

function formatText(text: string): string {
  if (!FORMATTING.test(text)) return escapeMrkdwn(text);
  const kept: string[] = [];
  const keep = (mrkdwn: string) => `${TOKEN_OPEN}${kept.push(mrkdwn) - 1}${TOKEN_CLOSE}`;
  let s = text.replace(/\\([\\`*_{}[\]()#+\-.!~|<>&])/g, (_m, ch: string) => keep(escapeMrkdwn(ch)));
  s = replaceLinks(s, (label, url) => (isLinkable(url) ? keep(slackLink(url, label)) : label));
  s = replaceAutolinks(s, (url) => keep(slackLink(url, "")));
  s = escapeMrkdwn(s);
  s = replaceDelimited(s, "***", (inner) => `${BOLD}_${inner}_${BOLD}`);
  s = replaceDelimited(s, "**", (inner) => `${BOLD}${inner}${BOLD}`);
  s = replaceDelimited(s, "__", (inner) => `${BOLD}${inner}${BOLD}`, true);
  // Linear as it is: the lazy part cannot pass a "*", so each attempt ends at the next one.
  s = s.replace(/(^|[^\w*])\*(?![\s*])([^*\n]*?[^\s*])\*(?![\w*])/g, "$1_$2_");
  s = replaceDelimited(s, "~~", (inner) => `~${inner}~`).replaceAll(BOLD, "*");
  return s.replace(/\uE000(\d+)\uE001/g, (_m, i: string) => kept[Number(i)] ?? "");
}

/** `\s` of JavaScript regular expressions. */
function isSpace(c: number): boolean {
  return (
    (c >= 0x09 && c <= 0x0d) ||
    c === 0x20 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/** `\w` of JavaScript regular expressions. */
function isWord(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x5f;
}

/**
 * The first index at or after `from` where `test` holds (-1: none). Remembers its last answer, so a
 * caller asking with `from` that never decreases reads the text once in all.
 */
function finder(text: string, test: (code: number) => boolean): (from: number) => number {
  return remembered((from) => {
    for (let i = from; i < text.length; i++) if (test(text.charCodeAt(i))) return i;
    return -1;
  });
}

/**
 * `find(from)` (the first index at or after `from` where something holds, -1: none) that remembers
 * its last answer: asked again from anywhere up to that answer, it already knows.
 */
function remembered(find: (from: number) => number): (from: number) => number {
  let askedFrom = -1;
  let found = -1;
  return (from) => {
    if (askedFrom !== -1 && from >= askedFrom && (found === -1 || from <= found)) return found;
    askedFrom = from;
    found = find(from);
    return found;
  };
}

/** `f` that remembers its last answer: asked again about the same index, it already knows. */
function lastAnswer<T>(f: (index: number) => T): (index: number) => T {
  let asked: number | undefined;
  let answer: T;
  return (index) => {
    if (index !== asked) {
      asked = index;
      answer = f(index);
    }
    return answer;
  };
}

/**
 * `[label](url "title")` and `![alt](url)` in one pass; what the regular expression
 * `!?\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)` matches, without its backtracking.
 */
function replaceLinks(s: string, render: (label: string, url: string, whole: string) => string): string {
  const closingBracket = finder(s, (c) => c === 0x5d);
  const urlEnd = finder(s, (c) => c === 0x29 || c === 0x3e || isSpace(c));
  const quote = finder(s, (c) => c === 0x22);
  // Brackets before the same "]" share what follows it: worked out once.
  const target = lastAnswer((q): { url: string; end: number } | undefined => {
    if (s.charCodeAt(q + 1) !== 0x28 /* ( */) return undefined;
    let r = q + 2;
    while (isSpace(s.charCodeAt(r))) r++;
    let end = urlEnd(r);
    if (end === -1) end = s.length;
    if (end === r) return undefined;
    const start = s.charCodeAt(r) === 0x3c /* < */ && end > r + 1 ? r + 1 : r;
    const close = closingParen(end);
    return close === -1 ? undefined : { url: s.slice(start, end), end: close };
  });
  // After the URL: `>?`, an optional "title", then ")". Targets ending at the same place share it.
  const closingParen = lastAnswer((end): number => {
    let t = end;
    if (s.charCodeAt(t) === 0x3e) t++;
    let w = t;
    while (isSpace(s.charCodeAt(w))) w++;
    if (w > t && s.charCodeAt(w) === 0x22) {
      const closing = quote(w + 1);
      if (closing !== -1) {
        let z = closing + 1;
        while (isSpace(s.charCodeAt(z))) z++;
        if (s.charCodeAt(z) === 0x29) return z + 1;
      }
    }
    return s.charCodeAt(w) === 0x29 ? w + 1 : -1;
  });
  let out = "";
  let last = 0;
  for (let i = s.indexOf("["); i !== -1; ) {
    const q = closingBracket(i + 1);
    if (q === -1) break;
    const link = target(q);
    if (!link) {
      i = s.indexOf("[", i + 1);
      continue;
    }
    const start = i > last && s.charCodeAt(i - 1) === 0x21 /* ! */ ? i - 1 : i;
    out += s.slice(last, start) + render(s.slice(i + 1, q), link.url, s.slice(start, link.end));
    last = link.end;
    i = s.indexOf("[", last);
  }
  return out + s.slice(last);
}

/** `<https://…>`, `<mailto:…>`: what `<((?:https?|mailto):[^>\s]+)>` matches, in one pass. */
function replaceAutolinks(s: string, render: (url: string) => string): string {
  const urlEnd = finder(s, (c) => c === 0x3e || isSpace(c));
  let out = "";
  let last = 0;
  for (let i = s.indexOf("<"); i !== -1; ) {
    const scheme = s.startsWith("http:", i + 1) ? 5 : s.startsWith("https:", i + 1) ? 6 : s.startsWith("mailto:", i + 1) ? 7 : 0;
    const end = scheme ? urlEnd(i + 1 + scheme) : -1;
    if (end > i + 1 + scheme && s.charCodeAt(end) === 0x3e) {
      out += s.slice(last, i) + render(s.slice(i + 1, end));
      last = end + 1;
      i = s.indexOf("<", last);
    } else i = s.indexOf("<", i + 1);
  }
  return out + s.slice(last);
}

/**
 * `**text**`-style spans: an opening delimiter followed by a non-space, up to the nearest closing
 * one preceded by a non-space (the lazy `D(?=\S)([\s\S]*?\S)D`), in one pass. `flanked`: as for
 * `__`, no word character may touch the delimiters on the outside.
 */
function replaceDelimited(s: string, delimiter: string, render: (inner: string) => string, flanked = false): string {
  const d = delimiter.length;
  let out = "";
  let last = 0;
  const closerAt = (j: number) => !isSpace(s.charCodeAt(j - 1)) && !(flanked && isWord(s.charCodeAt(j + d)));
  const nextCloser = remembered((from) => {
    for (let j = s.indexOf(delimiter, from); j !== -1; j = s.indexOf(delimiter, j + 1)) if (closerAt(j)) return j;
    return -1;
  });
  for (let i = s.indexOf(delimiter); i !== -1; ) {
    const opens = i + d < s.length && !isSpace(s.charCodeAt(i + d)) && (!flanked || i === 0 || (i - 1 >= last && !isWord(s.charCodeAt(i - 1))));
    const j = opens ? nextCloser(i + d + 1) : -1;
    if (j === -1) {
      i = s.indexOf(delimiter, i + 1);
      continue;
    }
    out += s.slice(last, i) + render(s.slice(i + d, j));
    last = j + d;
    i = s.indexOf(delimiter, last);
  }
  return out + s.slice(last);
}

function isLinkable(url: string): boolean {
  return /^(?:https?:\/\/|mailto:)/i.test(url);
}

/** Where a link leads, as a reader should see it: the host (punycode for lookalike letters), or a mail address. */
function linkHost(url: string): string | undefined {
  if (/^mailto:/i.test(url)) return url.slice(7).split("?")[0] || undefined;
  try {
    return new URL(url).host || undefined;
  } catch {
    return undefined;
  }
}

/** The label already says where the link goes (it is the URL, or its host). */
function labelNamesTarget(label: string, url: string, host: string): boolean {
  const bare = (s: string) =>
    s
      .trim()
      .toLowerCase()
      .replace(/^(?:https?:\/\/|mailto:)/, "")
      .replace(/\/+$/, "");
  const shown = bare(label);
  return shown === bare(url) || shown === host.toLowerCase() || shown === `www.${host.toLowerCase()}`;
}

/**
 * A link label that is not the link itself gets the link's host: `[✅ Approve](https://phish.example)`
 * reads "✅ Approve (phish.example)", so crew text cannot pass a link off as one of the app's buttons.
 */
function shownLabel(label: string, url: string): string {
  const host = linkHost(url);
  return host && !labelNamesTarget(label, url, host) ? `${label} (${host})` : label;
}

function slackLink(url: string, label: string): string {
  const href = escapeMrkdwn(url).replace(/\|/g, "%7C");
  const text = label.replace(/\*\*|__|~~|`/g, "").trim();
  return text ? `<${href}|${escapeMrkdwn(shownLabel(text, url))}>` : `<${href}>`;
}

/**
 * The same for standard Markdown that Slack renders itself (a `markdown` block): every link whose
 * label is not its URL names its host. Code (fenced blocks, code spans) is left as it is. Linear.
 */
export function revealLinkHosts(md: string): string {
  const lines = md.split("\n");
  const out: string[] = [];
  let prose: string[] = [];
  let fence: string | null = null;
  const flush = () => {
    if (prose.length) out.push(revealInProse(prose.join("\n")));
    prose = [];
  };
  for (const line of lines) {
    const marker = FENCE_LINE.exec(line)?.[1];
    if (fence !== null) {
      if (marker !== undefined && marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) fence = null;
      out.push(line);
    } else if (marker !== undefined) {
      flush();
      fence = marker;
      out.push(line);
    } else prose.push(line);
  }
  flush();
  return out.join("\n");
}

function revealInProse(text: string): string {
  const reveal = (part: string) =>
    replaceLinks(part, (label, url, whole) => {
      if (!isLinkable(url)) return whole;
      const shown = shownLabel(label, url);
      return shown === label ? whole : `[${shown}](${url})`;
    });
  let out = "";
  let last = 0;
  for (const span of codeSpans(text)) {
    out += reveal(text.slice(last, span.start)) + text.slice(span.start, span.end);
    last = span.end;
  }
  return out + reveal(text.slice(last));
}

// ---------------------------------------------------------------- excerpts

export interface Excerpt {
  text: string;
  truncated: boolean;
}

/**
 * At most `maxChars` UTF-16 units. Cuts at a paragraph, line or word boundary near the
 * limit when there is one, never inside a surrogate pair, an HTML entity or a Slack
 * `<…>` link; appends "…" and closes a code fence left open by the cut.
 */
export function excerpt(text: string, maxChars: number): Excerpt {
  if (text.length <= maxChars) return { text, truncated: false };
  if (maxChars < 8) return { text: safeSlice(text, Math.max(0, maxChars - 1)) + (maxChars > 0 ? ELLIPSIS : ""), truncated: true };
  let cut = cutAt(text, maxChars - ELLIPSIS.length);
  let closer = openFenceCloser(cut);
  if (closer) {
    cut = cutAt(text, maxChars - ELLIPSIS.length - closer.length - 1);
    closer = openFenceCloser(cut);
  }
  return { text: cut + ELLIPSIS + (closer ? `\n${closer}` : ""), truncated: true };
}

function cutAt(text: string, budget: number): string {
  const head = safeSlice(text, budget);
  const after = text.charAt(head.length);
  let end = head.length;
  const paragraph = head.lastIndexOf("\n\n");
  const line = head.lastIndexOf("\n");
  const space = head.search(/\s\S*$/);
  if (paragraph >= budget * 0.7) end = paragraph;
  else if (line >= budget * 0.8) end = line;
  else if (/\s/.test(after)) end = head.length;
  else if (space >= budget * 0.85) end = space;
  return dropPartialTokens(head.slice(0, end).trimEnd());
}

function dropPartialTokens(text: string): string {
  let s = text.replace(/&(?:a|am|amp|l|lt|g|gt|q|qu|quo|quot)?$/, "");
  const open = s.lastIndexOf("<");
  if (open > s.lastIndexOf(">") && /^<(?:[@#!]|https?:|mailto:)/.test(s.slice(open))) s = s.slice(0, open);
  return s.replace(/\n[ \t]*`{1,2}$/, "").trimEnd();
}

/** The fence string that closes a code block still open at the end of `text`, if any. */
function openFenceCloser(text: string): string | null {
  let fence: string | null = null;
  for (const line of text.split("\n")) {
    const marker = FENCE_LINE.exec(line)?.[1];
    if (marker === undefined) continue;
    if (fence === null) fence = marker;
    else if (marker[0] === fence[0] && marker.length >= fence.length) fence = null;
  }
  return fence;
}

/**
 * Escaped user text cut to fit a mrkdwn field. Escaping only lengthens text, so a little more than
 * `maxChars` of the input is all that can show: only that much is escaped.
 */
export function fitMrkdwn(text: string, maxChars: number): Excerpt {
  return excerpt(escapeMrkdwn(safeSlice(text, Math.max(0, maxChars) + 16)), maxChars);
}

/**
 * Markdown read before converting, as a multiple of what is shown: conversion can shorten text
 * (markers, link targets), but never by this much in practice, and what is read stays bounded.
 */
const MARKDOWN_READ_FACTOR = 4;

/** User text as an escaped mrkdwn quote ("> " on every line), cut to fit; only what can show is read. */
export function fitQuote(text: string, maxChars: number): Excerpt {
  return excerpt(quoteMrkdwn(escapeMrkdwn(safeSlice(text, Math.max(0, maxChars) + 16))), maxChars);
}

/**
 * Markdown converted to mrkdwn and cut to fit. Only the start of a long text is converted. Text that
 * converts to nothing visible (only images without alt text, empty links, sentinels) is shown as
 * written, escaped: Slack refuses an empty text object.
 */
export function fitMarkdown(md: string, maxChars: number): Excerpt {
  const shown = convertedExcerpt(md, maxChars);
  const visible = shown.text.replaceAll(ELLIPSIS, "").trim();
  return visible || !md.trim() ? shown : fitMrkdwn(md, maxChars);
}

function convertedExcerpt(md: string, maxChars: number): Excerpt {
  const read = Math.max(0, maxChars) * MARKDOWN_READ_FACTOR + 64;
  if (md.length <= read) return excerpt(markdownToMrkdwn(md), maxChars);
  let head = safeSlice(md, read);
  const line = head.lastIndexOf("\n");
  if (line > read / 2) head = head.slice(0, line);
  const shown = excerpt(markdownToMrkdwn(head), maxChars);
  if (shown.truncated) return shown;
  // The converted start fits whole, but the text goes on: say so.
  return { text: excerpt(`${shown.text}\n${ELLIPSIS}`, maxChars).text, truncated: true };
}

// ---------------------------------------------------------------- small formatters

/** Input names longer than this are cut before they are made readable (a label shows far less). */
const INPUT_NAME_READ = 200;

export function humanizeInputName(name: string): string {
  const cut = safeSlice(name, INPUT_NAME_READ);
  const source = /[a-z]/.test(cut) ? cut : cut.toLowerCase(); // SCREAMING_SNAKE reads as words
  const words = source
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/([A-Z])(?=[A-Z][a-z])/g, "$1 ")
    .split(/[\s_\-.]+/)
    .filter(Boolean)
    .map((w) => (/^[A-Z0-9]{2,}$/.test(w) ? w : w.toLowerCase()));
  const text = words.join(" ");
  return text ? text.charAt(0).toUpperCase() + text.slice(1) : "Input";
}

export function formatDuration(ms: number): string {
  const total = Number.isFinite(ms) && ms > 0 ? Math.round(ms / 1000) : 0;
  const pair = (big: number, bigUnit: string, small: number, smallUnit: string) => (small ? `${big} ${bigUnit} ${small} ${smallUnit}` : `${big} ${bigUnit}`);
  if (total < 60) return `${total} s`;
  const minutes = Math.floor(total / 60);
  if (minutes < 60) return pair(minutes, "min", total % 60, "s");
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return pair(hours, "h", minutes % 60, "min");
  return pair(Math.floor(hours / 24), "d", hours % 24, "h");
}

/** "14:03:05 UTC" */
export function formatUtcTime(date: Date): string {
  return Number.isNaN(date.getTime()) ? "unknown time" : `${date.toISOString().slice(11, 19)} UTC`;
}
