// JSON from outside is bounded before it is parsed: nesting depth and the number of values. A body
// nested 1,200 levels deep used to reach the database (and wedge the embedded one for good) and every
// recursive walk after it; deeper ones overflowed the stack. The scan is one pass over the text, no
// recursion, so it is safe on any input.

export interface JsonLimits {
  /** Deepest nesting of arrays and objects. */
  maxDepth: number;
  /** Most arrays, objects and separated values (keys and elements) in one document. */
  maxValues: number;
}

export const DEFAULT_JSON_LIMITS: JsonLimits = { maxDepth: 64, maxValues: 100_000 };

export class JsonTooComplex extends Error {
  constructor(readonly why: "depth" | "values") {
    super(why === "depth" ? "JSON nested too deeply" : "JSON has too many values");
    this.name = "JsonTooComplex";
  }
}

/** Throws JsonTooComplex when the text (valid JSON or not) nests or counts beyond the limits. */
export function checkJsonBounds(text: string, limits: JsonLimits = DEFAULT_JSON_LIMITS): void {
  let depth = 0;
  let values = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > limits.maxDepth) throw new JsonTooComplex("depth");
      if (++values > limits.maxValues) throw new JsonTooComplex("values");
    } else if (c === 0x5d || c === 0x7d) depth--;
    else if (c === 0x2c && ++values > limits.maxValues) throw new JsonTooComplex("values");
  }
}

/** A value whose compact JSON is longer than this is shown compact (readableJson). */
export const READABLE_JSON_INDENT_MAX = 32 * 1024;

/**
 * A parsed value (an output that is not a string) as text for people: indented when that stays small,
 * compact otherwise. Indenting multiplies a deeply nested document (a 200 KB body nested 62 levels
 * became 12.6 MB of output), so only a value whose compact form is at most READABLE_JSON_INDENT_MAX is
 * indented, and the indented form is kept only when at most four times as long.
 */
export function readableJson(value: unknown): string {
  const compact = JSON.stringify(value) ?? "";
  if (compact.length > READABLE_JSON_INDENT_MAX) return compact;
  const indented = JSON.stringify(value, null, 2);
  return indented.length <= 4 * compact.length + 1024 ? indented : compact;
}

/** JSON.parse after checkJsonBounds. Throws JsonTooComplex or SyntaxError. */
export function parseBoundedJson(text: string, limits: JsonLimits = DEFAULT_JSON_LIMITS): unknown {
  checkJsonBounds(text, limits);
  return JSON.parse(text) as unknown;
}
