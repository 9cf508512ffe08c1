import { describe, expect, it } from "vitest";
import { sanitizeJson, sanitizeText } from "./sanitize.js";

describe("sanitizeText", () => {
  it("replaces NUL and lone surrogates visibly, keeps pairs and everything else", () => {
    expect(sanitizeText("a\u0000b")).toBe("a\u2400b");
    expect(sanitizeText("x\ud83dy\ude00z😀")).toBe("x\ufffdy\ufffdz😀");
    expect(sanitizeText("\ud83d")).toBe("\ufffd");
    expect(sanitizeText("\ude00\ud83d")).toBe("\ufffd\ufffd");
    expect(sanitizeText("plain ✓")).toBe("plain ✓");
  });

  it("handles 2 MiB floods of what it replaces", () => {
    const M = 2 ** 21;
    expect(sanitizeText("\u0000".repeat(M))).toBe("\u2400".repeat(M));
    expect(sanitizeText("\ud83d".repeat(M))).toBe("\ufffd".repeat(M));
    expect(sanitizeText("😀".repeat(M / 2))).toBe("😀".repeat(M / 2));
    expect(sanitizeText("a\u0000\udc00".repeat(M / 4))).toBe("a\u2400\ufffd".repeat(M / 4));
  });

  it("sanitizes keys and strings of JSON, keeping __proto__ a plain key", () => {
    const out = sanitizeJson(JSON.parse('{"__proto__": "\\u0000", "k\\u0000": ["\\ud800"]}')) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(out).toEqual(
      Object.fromEntries([
        ["__proto__", "\u2400"],
        ["k\u2400", ["\ufffd"]],
      ]),
    );
  });
});
