import { describe, expect, it } from "vitest";
import { escapeMrkdwn, excerpt, formatDuration, formatUtcTime, humanizeInputName, markdownToMrkdwn, quoteMrkdwn, safeSlice, truncatePlain, userMention } from "./text.js";

describe("markdownToMrkdwn", () => {
  const cases: [string, string][] = [
    ["**bold** and __also__", "*bold* and *also*"],
    ["*italic* and _italic_", "_italic_ and _italic_"],
    ["***both***", "*_both_*"],
    ["**a *b* c**", "*a _b_ c*"],
    ["~~gone~~", "~gone~"],
    ["[the docs](https://ex.com/a?b=1&c=2)", "<https://ex.com/a?b=1&amp;c=2|the docs>"],
    ["[**bold** label](https://ex.com)", "<https://ex.com|bold label>"],
    ["[a|b](https://ex.com/x|y)", "<https://ex.com/x%7Cy|a|b>"],
    ["<https://auto.link/x>", "<https://auto.link/x>"],
    ["[relative](./docs.md)", "relative"],
    ["![chart](https://ex.com/c.png)", "<https://ex.com/c.png|chart>"],
    ["# Title", "*Title*"],
    ["### Sub **title** ###", "*Sub title*"],
    ["#hashtag", "#hashtag"],
    ["- one\n* two\n+ three\n  - nested", "• one\n• two\n• three\n  • nested"],
    ["- [ ] todo\n- [x] done", "• ☐ todo\n• ☑ done"],
    ["1. first\n2. second", "1. first\n2. second"],
    ["> quoted **bold**", "> quoted *bold*"],
    ["---", "──────────"],
    ["a & b < c > d", "a &amp; b &lt; c &gt; d"],
    ["snake_case_name and 5 * 3 * 2", "snake_case_name and 5 * 3 * 2"],
    ["line one\r\nline two", "line one\nline two"],
  ];
  it.each(cases)("%j", (md, expected) => expect(markdownToMrkdwn(md)).toBe(expected));

  it("leaves inline code unformatted", () => {
    expect(markdownToMrkdwn("run `**not bold** [x](https://y)` now **yes**")).toBe("run `**not bold** [x](https://y)` now *yes*");
  });

  it("keeps fenced code verbatim apart from entity escaping, and drops the info string", () => {
    const md = "before **b**\n```ts\nconst a = **b** && [x](https://y);\n# not a heading\n- not a bullet\n```\nafter _i_";
    expect(markdownToMrkdwn(md)).toBe("before *b*\n```\nconst a = **b** &amp;&amp; [x](https://y);\n# not a heading\n- not a bullet\n```\nafter _i_");
  });

  it("closes a fence the Markdown left open, and supports ~~~ fences", () => {
    expect(markdownToMrkdwn("```\ncode **x**")).toBe("```\ncode **x**\n```");
    expect(markdownToMrkdwn("~~~\n```\n~~~\n**b**")).toBe("```\n```\n```\n*b*");
  });

  it("never lets crew text forge Slack mentions or links", () => {
    const out = markdownToMrkdwn("hey <!channel> and <@U123> see <javascript:alert(1)>");
    expect(out).not.toMatch(/<[!@]/);
    expect(out).toContain("&lt;!channel&gt;");
    expect(markdownToMrkdwn("[x](javascript:alert(1))")).not.toContain("<javascript");
  });

  it("turns backslash escapes into the literal character", () => {
    expect(markdownToMrkdwn("\\# not heading \\<b\\>")).toBe("# not heading &lt;b&gt;");
  });

  it("ignores private-use sentinel characters in the input", () => {
    expect(markdownToMrkdwn("\uE0000\uE001 **b**")).toBe("0 *b*");
  });
});

describe("escapeMrkdwn", () => {
  it("escapes &, <, > (and & first, so nothing is double-decoded)", () => {
    expect(escapeMrkdwn("<@U1> & &amp; >")).toBe("&lt;@U1&gt; &amp; &amp;amp; &gt;");
  });
});

describe("excerpt", () => {
  it("returns short text unchanged", () => {
    expect(excerpt("hello", 5)).toEqual({ text: "hello", truncated: false });
  });

  it("cuts at a paragraph boundary near the limit", () => {
    const text = `${"a".repeat(80)}\n\n${"b".repeat(50)}`;
    expect(excerpt(text, 100)).toEqual({ text: `${"a".repeat(80)}…`, truncated: true });
  });

  it("cuts at a line, then at a word boundary", () => {
    expect(excerpt(`${"a".repeat(90)}\n${"b".repeat(50)}`, 100).text).toBe(`${"a".repeat(90)}…`);
    expect(excerpt(`${"word ".repeat(30)}`, 52).text).toBe(`${"word ".repeat(10).trim()}…`);
  });

  it("cuts hard when there is no boundary, never inside a surrogate pair", () => {
    const text = "😀".repeat(100);
    for (const max of [10, 11, 50, 51]) {
      const { text: out } = excerpt(text, max);
      expect(out.length).toBeLessThanOrEqual(max);
      expect(out.endsWith("…")).toBe(true);
      expect(out.slice(0, -1)).toBe("😀".repeat((out.length - 1) / 2));
    }
  });

  it("never cuts inside an entity or a Slack link", () => {
    expect(excerpt(`${"x".repeat(95)}&amp;&amp;`, 100).text).toBe(`${"x".repeat(95)}…`);
    const link = `see <https://example.com/${"p".repeat(50)}|label> end`;
    expect(excerpt(`${"x".repeat(60)} ${link}`, 100).text).toBe(`${"x".repeat(60)} see…`);
  });

  it("closes a code fence opened before the cut", () => {
    const text = `intro\n\`\`\`\n${"code line\n".repeat(50)}\`\`\`\nafter`;
    const { text: out, truncated } = excerpt(text, 120);
    expect(truncated).toBe(true);
    expect(out.length).toBeLessThanOrEqual(120);
    expect(out.endsWith("…\n```")).toBe(true);
    expect(out.match(/^```/gm)).toHaveLength(2);
  });

  it("does not add a fence when the cut is after a closed block", () => {
    const text = `\`\`\`\ncode\n\`\`\`\n${"text ".repeat(100)}`;
    const out = excerpt(text, 100).text;
    expect(out.match(/^```/gm)).toHaveLength(2);
    expect(out.endsWith("…")).toBe(true);
  });

  it("always respects the limit", () => {
    const samples = ["```\n" + "x".repeat(5000), "a\n".repeat(3000), "&<>".repeat(2000), "😀 ".repeat(3000)];
    for (const s of samples) for (const max of [1, 5, 8, 9, 100, 2900]) expect(excerpt(s, max).text.length).toBeLessThanOrEqual(max);
  });
});

describe("plain text helpers", () => {
  it("truncatePlain collapses whitespace and ends with …", () => {
    expect(truncatePlain("  a\n b  ", 24)).toBe("a b");
    expect(truncatePlain("abcdefghij", 5)).toBe("abcd…");
    expect(truncatePlain("ab😀cd", 4)).toBe("ab…");
  });

  it("safeSlice keeps surrogate pairs whole", () => {
    expect(safeSlice("a😀", 2)).toBe("a");
    expect(safeSlice("a😀", 3)).toBe("a😀");
  });

  it("userMention only mentions real ids", () => {
    expect(userMention("U012AB3CD")).toBe("<@U012AB3CD>");
    expect(userMention("<!channel>")).toBe("&lt;!channel&gt;");
  });

  it("quoteMrkdwn quotes every line", () => {
    expect(quoteMrkdwn("a\nb")).toBe("> a\n> b");
  });
});

describe("humanizeInputName", () => {
  it.each([
    ["current_year", "Current year"],
    ["currentYear", "Current year"],
    ["current-year", "Current year"],
    ["targetURL", "Target URL"],
    ["HTTPServer", "HTTP server"],
    ["CURRENT_YEAR", "Current year"],
    ["topic", "Topic"],
    ["__", "Input"],
  ])("%s → %s", (name, expected) => expect(humanizeInputName(name)).toBe(expected));
});

describe("formatDuration", () => {
  it.each([
    [0, "0 s"],
    [-5, "0 s"],
    [Number.NaN, "0 s"],
    [45_000, "45 s"],
    [59_600, "1 min"],
    [125_000, "2 min 5 s"],
    [3_780_000, "1 h 3 min"],
    [7_200_000, "2 h"],
    [90_061_000, "1 d 1 h"],
  ])("%d ms → %s", (ms, expected) => expect(formatDuration(ms)).toBe(expected));
});

describe("formatUtcTime", () => {
  it("formats as HH:MM:SS UTC", () => {
    expect(formatUtcTime(new Date("2025-03-01T14:03:05.900Z"))).toBe("14:03:05 UTC");
  });
});
