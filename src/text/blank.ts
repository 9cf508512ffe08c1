// Whether text says anything: whitespace and the characters that show nothing (zero-width spaces and
// joiners, direction marks, the word joiner, soft hyphens, the byte-order mark) count as blank, which
// String.trim() does not know. Feedback made only of them would reach the crew as an empty request.

/** One character that shows something; the test stops at the first. */
const VISIBLE = /[^\s\u00AD\u061C\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/;

export function isBlank(text: string): boolean {
  return !VISIBLE.test(text);
}
