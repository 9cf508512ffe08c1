// Cutting text to a length without splitting a character: for Slack's plain-text fields, and for
// anything from outside that is kept or logged in short.

export const ELLIPSIS = "…";

/** Slices to at most `end` UTF-16 units without splitting a surrogate pair. */
export function safeSlice(text: string, end: number): string {
  if (end >= text.length) return text;
  if (end <= 0) return "";
  const last = text.charCodeAt(end - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? end - 1 : end);
}

/** Single-line text (Slack labels, titles, button text; a reason kept in short): whitespace collapsed, "…" when cut. */
export function truncatePlain(text: string, max: number): string {
  // Reads only as much as can show: a growing start of the text, until it holds more than `max`
  // characters once whitespace is collapsed (a name of a million characters costs no more than one of 200).
  for (let read = Math.max(64, 2 * max + 2); ; read *= 4) {
    if (read >= text.length) {
      const flat = text.replace(/\s+/g, " ").trim();
      return flat.length <= max ? flat : safeSlice(flat, max - 1).trimEnd() + ELLIPSIS;
    }
    const flat = text.slice(0, read).replace(/\s+/g, " ").trimStart();
    if (flat.length > max + 1) return safeSlice(flat, max - 1).trimEnd() + ELLIPSIS;
  }
}
