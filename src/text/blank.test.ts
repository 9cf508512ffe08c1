import { describe, expect, it } from "vitest";
import { isBlank } from "./blank.js";

describe("isBlank", () => {
  it("takes whitespace and invisible characters for nothing, and anything visible for something", () => {
    for (const blank of ["", "   ", "\n\t", "\u200B", " \u200B\u200C\u200D\uFEFF\u2060 ", "\u202E\u2066\u00AD"]) expect(isBlank(blank), JSON.stringify(blank)).toBe(true);
    for (const text of ["a", " \u200B.", "👍", "\u05D0", "\u00A0x"]) expect(isBlank(text), JSON.stringify(text)).toBe(false);
  });

  it("reads a megabyte of invisible characters quickly (one linear pass)", () => {
    const started = performance.now();
    expect(isBlank("\u200B ".repeat(512 * 1024))).toBe(true);
    expect(performance.now() - started).toBeLessThan(1000);
  });
});
