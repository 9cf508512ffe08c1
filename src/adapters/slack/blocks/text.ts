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
const HEADING_LINE = /^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/;
const QUOTE_LINE = /^ {0,3}(?:>[ \t]?)+(.*)$/;
const BULLET_LINE = /^([ \t]*)[-*+][ \t]+(.*)$/;
const TASK_ITEM = /^\[([ xX])\][ \t]+/;
// Sentinels from the Private Use Area; stripped from the input first.
const TOKEN_OPEN = "\uE000";
const TOKEN_CLOSE = "\uE001";
const BOLD = "\uE002";

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

function convertLine(line: string): string {
  if (RULE_LINE.test(line)) return "──────────";
  const heading = HEADING_LINE.exec(line);
  if (heading) {
    const title = (heading[1] ?? "").replace(/\*\*|__/g, "");
    return title ? `*${convertInline(title)}*` : "";
  }
  const quote = QUOTE_LINE.exec(line);
  if (quote) return `> ${convertLine(quote[1] ?? "")}`;
  const bullet = BULLET_LINE.exec(line);
  if (bullet) {
    const item = (bullet[2] ?? "").replace(TASK_ITEM, (_m, mark: string) => (mark === " " ? "☐ " : "☑ "));
    return `${bullet[1] ?? ""}• ${convertInline(item)}`;
  }
  return convertInline(line);
}

/** Formats a line, leaving inline code spans unformatted. */
function convertInline(text: string): string {
  const codeSpan = /(`+)(.+?)\1(?!`)/g;
  let out = "";
  let last = 0;
  for (const m of text.matchAll(codeSpan)) {
    out += formatText(text.slice(last, m.index)) + m[1] + escapeMrkdwn(m[2] ?? "") + m[1];
    last = m.index + m[0].length;
  }
  return out + formatText(text.slice(last));
}

function formatText(text: string): string {
  const kept: string[] = [];
  const keep = (mrkdwn: string) => `${TOKEN_OPEN}${kept.push(mrkdwn) - 1}${TOKEN_CLOSE}`;
  let s = text
    .replace(/\\([\\`*_{}[\]()#+\-.!~|<>&])/g, (_m, ch: string) => keep(escapeMrkdwn(ch)))
    .replace(/!?\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g, (_m, label: string, url: string) => (isLinkable(url) ? keep(slackLink(url, label)) : label))
    .replace(/<((?:https?|mailto):[^>\s]+)>/g, (_m, url: string) => keep(slackLink(url, "")));
  s = escapeMrkdwn(s)
    .replace(/\*\*\*(?=\S)([\s\S]*?\S)\*\*\*/g, `${BOLD}_$1_${BOLD}`)
    .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, `${BOLD}$1${BOLD}`)
    .replace(/(^|\W)__(?=\S)([\s\S]*?\S)__(?!\w)/g, `$1${BOLD}$2${BOLD}`)
    .replace(/(^|[^\w*])\*(?![\s*])([^*\n]*?[^\s*])\*(?![\w*])/g, "$1_$2_")
    .replace(/~~(?=\S)([\s\S]*?\S)~~/g, "~$1~")
    .replaceAll(BOLD, "*");
  return s.replace(/\uE000(\d+)\uE001/g, (_m, i: string) => kept[Number(i)] ?? "");
}

function isLinkable(url: string): boolean {
  return /^(?:https?:\/\/|mailto:)/i.test(url);
}

function slackLink(url: string, label: string): string {
  const href = escapeMrkdwn(url).replace(/\|/g, "%7C");
  const text = label.replace(/\*\*|__|~~|`/g, "").trim();
  return text ? `<${href}|${escapeMrkdwn(text)}>` : `<${href}>`;
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

/** Escaped user text cut to fit a mrkdwn field. */
export function fitMrkdwn(text: string, maxChars: number): Excerpt {
  return excerpt(escapeMrkdwn(text), maxChars);
}

/** Markdown converted to mrkdwn and cut to fit. */
export function fitMarkdown(md: string, maxChars: number): Excerpt {
  return excerpt(markdownToMrkdwn(md), maxChars);
}

// ---------------------------------------------------------------- small formatters

export function humanizeInputName(name: string): string {
  const source = /[a-z]/.test(name) ? name : name.toLowerCase(); // SCREAMING_SNAKE reads as words
  const words = source
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2")
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
