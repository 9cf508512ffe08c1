// Crew and Slack text is data: it may hold any character. PostgreSQL cannot store two kinds of them
// (text and jsonb reject U+0000, and UTF-8 has no encoding for a lone UTF-16 surrogate), so they are
// replaced, visibly, where text enters: NUL becomes "␀" (U+2400), a lone surrogate U+FFFD.

const NEEDS_WORK = /[\u0000\uD800-\uDFFF]/;

/** One pass over the UTF-16 units (a flood of NULs or lone surrogates costs what plain text costs). */
export function sanitizeText(text: string): string {
  if (!NEEDS_WORK.test(text)) return text;
  const units = new Uint16Array(text.length);
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0) units[i] = 0x2400;
    else if (c >= 0xd800 && c <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        units[i] = c;
        units[++i] = next;
      } else units[i] = 0xfffd;
    } else units[i] = c >= 0xdc00 && c <= 0xdfff ? 0xfffd : c;
  }
  return Buffer.from(units.buffer, units.byteOffset, units.byteLength).toString("utf16le");
}

/**
 * The same for every string and key of a parsed JSON value. Recursive: only for values whose depth
 * was bounded first (text/bounded-json.ts).
 */
export function sanitizeJson(value: unknown): unknown {
  if (typeof value === "string") return sanitizeText(value);
  if (Array.isArray(value)) return value.map(sanitizeJson);
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      // defineProperty: a "__proto__" key stays a plain own key.
      Object.defineProperty(out, sanitizeText(k), { value: sanitizeJson(v), enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  return value;
}
