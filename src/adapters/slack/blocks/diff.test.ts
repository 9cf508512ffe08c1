import { describe, expect, it } from "vitest";
import { compactDiff, DIFF_INLINE_MAX, diffCodeBlock, diffStats, mergeChanges, unifiedDiff } from "./diff.js";

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
