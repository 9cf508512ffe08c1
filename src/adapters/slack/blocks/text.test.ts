import { describe, expect, it } from "vitest";
import {
  escapeMrkdwn,
  excerpt,
  fitMarkdown,
  fitMrkdwn,
  formatDuration,
  formatUtcTime,
  humanizeInputName,
  markdownToMrkdwn,
  quoteMrkdwn,
  revealLinkHosts,
  safeSlice,
  truncatePlain,
  userMention,
} from "./text.js";

describe("markdownToMrkdwn", () => {
  const cases: [string, string][] = [
    ["**bold** and __also__", "*bold* and *also*"],
    ["*italic* and _italic_", "_italic_ and _italic_"],
    ["***both***", "*_both_*"],
    ["**a *b* c**", "*a _b_ c*"],
    ["~~gone~~", "~gone~"],
    ["[the docs](https://ex.com/a?b=1&c=2)", "<https://ex.com/a?b=1&amp;c=2|the docs (ex.com)>"],
    ["[**bold** label](https://ex.com)", "<https://ex.com|bold label (ex.com)>"],
    ["[a|b](https://ex.com/x|y)", "<https://ex.com/x%7Cy|a|b (ex.com)>"],
    ["[ex.com](https://ex.com/)", "<https://ex.com/|ex.com>"],
    ["[https://ex.com/a](https://ex.com/a)", "<https://ex.com/a|https://ex.com/a>"],
    ["<https://auto.link/x>", "<https://auto.link/x>"],
    ["[relative](./docs.md)", "relative"],
    ["![chart](https://ex.com/c.png)", "<https://ex.com/c.png|chart (ex.com)>"],
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

describe("disguised links", () => {
  it("names the host of a link whose label is not its URL, so it cannot pose as a button", () => {
    expect(markdownToMrkdwn("[✅ Approve](https://phish.example/ok)")).toBe("<https://phish.example/ok|✅ Approve (phish.example)>");
    expect(markdownToMrkdwn("[Approve](https://xn--pple-43d.com)")).toBe("<https://xn--pple-43d.com|Approve (xn--pple-43d.com)>");
    expect(markdownToMrkdwn("[Approve](https://аpple.com)")).toContain("(xn--");
    expect(markdownToMrkdwn("[write us](mailto:help@ex.com?subject=x)")).toBe("<mailto:help@ex.com?subject=x|write us (help@ex.com)>");
  });

  it("does the same in standard Markdown that Slack renders itself, outside code", () => {
    expect(revealLinkHosts("Click [✅ Approve](https://phish.example) now")).toBe("Click [✅ Approve (phish.example)](https://phish.example) now");
    expect(revealLinkHosts("[✅\nApprove](https://phish.example)")).toBe("[✅\nApprove (phish.example)](https://phish.example)");
    expect(revealLinkHosts("see [https://ex.com](https://ex.com) and [docs](./a.md)")).toBe("see [https://ex.com](https://ex.com) and [docs](./a.md)");
    const code = "`[a](https://b.example)`\n```\n[a](https://b.example)\n```";
    expect(revealLinkHosts(code)).toBe(code);
  });
});

describe("hostile text", () => {
  // Unclosed markers repeated: each used to cost a scan to the end of the text per marker.
  const M = 2 ** 21;
  const fill = (unit: string, length = M) => unit.repeat(Math.ceil(length / unit.length)).slice(0, length);

  it("converts unclosed emphasis floods as text", () => {
    const out = markdownToMrkdwn(fill("**a ", 400_000));
    expect(out).toBe(fill("**a ", 400_000));
    expect(markdownToMrkdwn(`${fill("~~b ", 40_000)}~~c~~`)).toBe(`~${fill("~~b ", 40_000).slice(2)}~~c~`);
    expect(markdownToMrkdwn(`x ${fill("__a ", 40_000)}`)).toBe(`x ${fill("__a ", 40_000)}`);
  });

  it("keeps brackets, link starts and autolink starts that never close as text", () => {
    const brackets = `${"[".repeat(300_000)}${fill("~~b ", 100_000)}`;
    expect(markdownToMrkdwn(brackets)).toBe(brackets);
    const linkish = fill("[a](u ", 200_000);
    expect(markdownToMrkdwn(linkish)).toBe(linkish);
    expect(markdownToMrkdwn(`${fill("[](", 90_000)}> [ok](https://ok.example)`)).toMatch(/^\[\]\(\[\]\(.*&gt; <https:\/\/ok\.example\|ok \(ok\.example\)>$/);
    expect(markdownToMrkdwn(fill("<https:", 70_000))).toBe(fill("&lt;https:", 100_000));
    // Many link starts sharing one URL end, then a long blank run before anything that could close them.
    const shared = `${fill("[](a", 200_000)}${" ".repeat(500_000)}x`;
    expect(markdownToMrkdwn(shared)).toBe(shared);
  });

  it("pairs code spans of the same length however many backtick runs there are", () => {
    const runs = `x ${Array.from({ length: 300 }, (_, i) => `${"`".repeat(300 - i)}a`).join("")}`;
    expect(markdownToMrkdwn(runs)).toBe(runs);
    expect(markdownToMrkdwn(`x ${"`".repeat(100_000)} **b**`)).toBe(`x ${"`".repeat(100_000)} *b*`);
    const ticks = "`".repeat(100_000);
    expect(markdownToMrkdwn(`x \`\`\`**a**${ticks} \`\`\`b **c**`)).toBe(`x \`\`\`**a**${ticks} \`\`\`b *c*`);
  });

  it("reads long quote, heading and bullet lines once", () => {
    expect(markdownToMrkdwn(`# ${" ".repeat(100_000)}x`)).toBe("*x*");
    expect(markdownToMrkdwn(`${fill(">   ", 40_000)}x`)).toBe(`${"> ".repeat(10_000)}  x`);
    expect(markdownToMrkdwn(`- ${" ".repeat(100_000)}item`)).toBe("• item");
  });

  it("fits a 2 MiB output into the excerpt, converting only its start", () => {
    for (const md of [fill("**a "), `${"[".repeat(300_000)}${fill("~~b ", M - 300_000)}`, fill("<"), fill("&amp;"), fill("\ud83d"), fill("`")]) {
      const { text, truncated } = fitMarkdown(md, 2_900);
      expect(truncated).toBe(true);
      expect(text.length).toBeLessThanOrEqual(2_900);
      expect(text.endsWith("…")).toBe(true);
    }
    // Conversion that shortens a lot (link targets dropped): the start fits whole, and still says it goes on.
    const shrinking = fitMarkdown(fill(`[x](./${"a".repeat(50)}) `, 100_000), 100);
    expect(shrinking.truncated).toBe(true);
    expect(shrinking.text).toMatch(/^x x x x x x x.*\n…$/);
  });

  it("shows Markdown that converts to nothing visible as written, escaped: never an empty text", () => {
    for (const md of ["![](chart.png)", "[](#)", "[ ](x)", "\uE000\uE001", "[](#<x>)"]) {
      expect(fitMarkdown(md, 2_000)).toEqual({ text: escapeMrkdwn(md), truncated: false });
    }
    // Long ones too, cut like any text (the start converts to blank lines and "…").
    for (const md of [fill("![](x.png)\n", 20_000), fill("\uE000", 20_000), fill("[](<#>) ", 20_000)]) {
      const { text, truncated } = fitMarkdown(md, 2_900);
      expect(truncated).toBe(true);
      expect(text.length).toBeLessThanOrEqual(2_900);
      expect(text.replace("…", "").trim().length).toBeGreaterThan(2_000);
    }
    expect(fitMarkdown("  \n ", 100).text.trim()).toBe("");
  });

  it("escapes only what can show", () => {
    const { text, truncated } = fitMrkdwn(fill("<"), 700);
    expect(truncated).toBe(true);
    expect(text).toBe(`${"&lt;".repeat(174)}…`);
    expect(fitMrkdwn("a < b", 700)).toEqual({ text: "a &lt; b", truncated: false });
  });

  it("cuts plain text and input names before working on them", () => {
    expect(truncatePlain(`${" ".repeat(M)}name`, 10)).toBe("name");
    expect(truncatePlain(fill("ab "), 10)).toBe("ab ab ab…");
    expect(humanizeInputName(`a${"A".repeat(M)}`)).toBe(`A ${"A".repeat(199)}`);
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
