// Crew and Slack text is data: it may hold any character. PostgreSQL cannot store two kinds of them
// (text and jsonb reject U+0000, and UTF-8 has no encoding for a lone UTF-16 surrogate), so they are
// replaced, visibly, where text enters: NUL becomes "␀" (U+2400), a lone surrogate U+FFFD.

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const NEEDS_WORK = /[\u0000\uD800-\uDFFF]/;

export function sanitizeText(text: string): string {
  if (!NEEDS_WORK.test(text)) return text;
  return text.replace(/\u0000/g, "\u2400").replace(LONE_SURROGATE, "\uFFFD");
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
