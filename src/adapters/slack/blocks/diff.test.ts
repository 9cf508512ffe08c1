import { describe, expect, it } from "vitest";
import { commonLines, compactDiff, DIFF_INLINE_MAX, diffCodeBlock, diffStats, mergeChanges, unifiedDiff } from "./diff.js";

describe("compactDiff", () => {
  it("marks removed and added words with a little context, merging changes separated by whitespace", () => {
    const before = "Interest in deep sea vents has grown steadily over the last two years.";
    const after = "Interest in deep sea vents has doubled over the last two years.";
    const d = compactDiff(before, after);
    expect(d.text).toBe("Interest in deep sea vents has [-grown steadily-]{+doubled+} over the last two years.");
    expect(d).toMatchObject({ truncated: false, identical: false, added: 1, removed: 2 });
    expect(diffStats(d)).toBe("+1 / −2 words");
  });

  it("says identical texts are identical", () => {
    expect(compactDiff("same", "same")).toMatchObject({ identical: true, text: "" });
  });

  it("shortens long unchanged stretches to their ends, cut between words", () => {
    const filler = Array.from({ length: 60 }, (_, i) => `w${i}`).join(" ");
    const d = compactDiff(`start ${filler} old end`, `start ${filler} new end`);
    expect(d.text.length).toBeLessThan(120);
    expect(d.text).toMatch(/^…/);
    expect(d.text).toContain("[-old-]{+new+} end");
    expect(d.text).not.toMatch(/…\S*w5\d{2}/);
  });

  it("cuts at the limit and says so", () => {
    const before = Array.from({ length: 500 }, (_, i) => `a${i}`).join(" ");
    const after = Array.from({ length: 500 }, (_, i) => `b${i}`).join(" ");
    const d = compactDiff(before, after);
    expect(d.truncated).toBe(true);
    expect(d.text.length).toBeLessThanOrEqual(DIFF_INLINE_MAX + 1);
    expect(d.text.endsWith("…")).toBe(true);
  });
});

describe("mergeChanges", () => {
  it("keeps shared leading and trailing whitespace outside the markers", () => {
    expect(mergeChanges([{ value: "a" }, { value: " x", removed: true }, { value: " y", added: true }, { value: " " }, { value: "z", removed: true }, { value: "b" }])).toEqual([
      { value: "a" },
      { value: " " },
      { value: "x z", removed: true },
      { value: "y ", added: true },
      { value: "b" },
    ]);
  });
});

describe("diffCodeBlock", () => {
  it("escapes mrkdwn and backticks so nothing pings anyone or closes the block", () => {
    const block = diffCodeBlock(compactDiff("say <!channel> ok", "say <@U1> ```x``` ok"));
    expect(block.startsWith("```")).toBe(true);
    expect(block.endsWith("```")).toBe(true);
    expect(block.slice(3, -3)).not.toContain("```");
    expect(block).not.toMatch(/<[!@]/);
    expect(block).toContain("&lt;[-!channel-]{+@U1+}&gt;");
  });

  it("stays bounded when escaping lengthens the text", () => {
    const block = diffCodeBlock(compactDiff("a", "<".repeat(5000)));
    expect(block.length).toBeLessThan(DIFF_INLINE_MAX * 1.4);
    expect(block).not.toMatch(/&(?:l|lt|g|gt|a|am|amp)?…/);
  });
});

describe("unifiedDiff", () => {
  it("is a unified diff with the given names", () => {
    const patch = unifiedDiff("one\ntwo\n", "one\nthree", "round-1", "round-2");
    expect(patch).toContain("--- round-1");
    expect(patch).toContain("+++ round-2");
    expect(patch).toContain("-two");
    expect(patch).toContain("+three");
  });
});

describe("hostile versions", () => {
  const lines = (n: number, word: string) => Array.from({ length: n }, (_, i) => `line ${i}: ${word} ${i * 7}`).join("\n");

  it("sets aside the lines both versions share before comparing", () => {
    expect(commonLines("a\nb\nc\nd", "a\nb\nX\nd")).toEqual({ head: "a\nb\n", before: "c\n", after: "X\n", tail: "d" });
    expect(commonLines("same", "same")).toEqual({ head: "", before: "same", after: "same", tail: "" });
    expect(commonLines("ab", "abc")).toEqual({ head: "", before: "ab", after: "abc", tail: "" });
  });

  it("shows a small change in two long versions, whatever their size", () => {
    const before = `${lines(20_000, "same")}\nthe old ending`;
    const after = `${lines(20_000, "same")}\nthe new ending`;
    const d = compactDiff(before, after);
    expect(d.tooLarge).toBeUndefined();
    expect(d.text).toContain("[-old-]{+new+} ending");
    expect(d).toMatchObject({ added: 1, removed: 1, truncated: false });
  });

  it("says two rounds of 20,000 differing lines changed too much to compare, and makes no patch", () => {
    const before = lines(20_000, "alpha");
    const after = lines(20_000, "omega");
    expect(compactDiff(before, after)).toMatchObject({ tooLarge: true, truncated: true, identical: false });
    expect(unifiedDiff(`${"x\n".repeat(1_000_000)}`, `${"y\n".repeat(1_000_000)}`, "round-1", "round-2")).toBeUndefined();
  });

  it("gives up within its edit bound on versions that share nothing", () => {
    const before = Array.from({ length: 6_000 }, (_, i) => `a${i}`).join("\n");
    const after = Array.from({ length: 6_000 }, (_, i) => `b${i}`).join("\n");
    expect(unifiedDiff(before, after, "round-1", "round-2")).toBeUndefined();
  });

  it("keeps whitespace runs out of the markers in one pass", () => {
    const gap = " ".repeat(100_000);
    expect(
      mergeChanges([
        { value: `x${gap}y${gap}`, removed: true },
        { value: `z${gap}`, added: true },
      ]),
    ).toEqual([{ value: `x${gap}y`, removed: true }, { value: "z", added: true }, { value: gap }]);
  });
});
