import { describe, expect, it } from "vitest";
import { slackTextToPlain } from "./slack-text.js";

describe("slackTextToPlain", () => {
  it("decodes Slack's three entities, &amp; last (so an escaped entity stays one)", () => {
    expect(slackTextToPlain("fish &amp; chips &lt;b&gt; a&gt;b")).toBe("fish & chips <b> a>b");
    expect(slackTextToPlain("&amp;lt; &amp;amp;")).toBe("&lt; &amp;");
    expect(slackTextToPlain("&quot; &nbsp; & &amp &#60;")).toBe("&quot; &nbsp; & &amp &#60;");
  });

  it("reads links as their label and url, or the url alone", () => {
    expect(slackTextToPlain("see <https://x.y/a?b=1&amp;c=2|the doc>")).toBe("see the doc (https://x.y/a?b=1&c=2)");
    expect(slackTextToPlain("<https://x.y>")).toBe("https://x.y");
    expect(slackTextToPlain("<https://x.y|https://x.y>")).toBe("https://x.y");
    expect(slackTextToPlain("<https://x.y|>")).toBe("https://x.y");
    expect(slackTextToPlain("<https://x.y|a &lt;b&gt; | c>")).toBe("a <b> | c (https://x.y)");
    expect(slackTextToPlain("<mailto:a@b.c|a@b.c>")).toBe("a@b.c");
    expect(slackTextToPlain("<mailto:a@b.c|Ann>")).toBe("Ann (mailto:a@b.c)");
  });

  it("reads mentions as a person reads them (a user without a name keeps its id: no look-up)", () => {
    expect(slackTextToPlain("hi <@U123|ann> and <@U456>")).toBe("hi @ann and @U456");
    expect(slackTextToPlain("in <#C1|general> and <#C2>")).toBe("in #general and #C2");
    expect(slackTextToPlain("<!here> <!channel> <!everyone> <!here|here>")).toBe("@here @channel @everyone @here");
    expect(slackTextToPlain("<!subteam^S1|@team> <!subteam^S2|ops> <!subteam^S3>")).toBe("@team @ops @S3");
    expect(slackTextToPlain("due <!date^1700000000^{date_short}|Nov 14, 2023>")).toBe("due Nov 14, 2023");
  });

  it("keeps what is no token as text: unclosed, stray, empty, unknown", () => {
    expect(slackTextToPlain("a < b")).toBe("a < b");
    expect(slackTextToPlain("a > b")).toBe("a > b");
    expect(slackTextToPlain("a < b > c <x y|z>")).toBe("a < b > c <x y|z>");
    expect(slackTextToPlain("<<@U1>")).toBe("<@U1");
    expect(slackTextToPlain("<@U1 <https://x.y>")).toBe("<@U1 https://x.y");
    expect(slackTextToPlain("<> <!> <!date^1> <@>")).toBe("<> <!> <!date^1> <@>");
    expect(slackTextToPlain("<https://x.y")).toBe("<https://x.y");
    expect(slackTextToPlain("<x &amp; y")).toBe("<x & y");
  });

  it("accepts any Unicode", () => {
    expect(slackTextToPlain("😀 <@U1|Zoë 😀> \u0000 \ud800 <https://例え.jp|例>")).toBe("😀 @Zoë 😀 \u0000 \ud800 例 (https://例え.jp)");
  });

  it("takes a million of what it parses in linear time, never growing the text", () => {
    const M = 1_000_000;
    const floods = ["<".repeat(M), "&".repeat(M), "&amp;".repeat(M / 5), "<@".repeat(M / 2), "<|>".repeat(M / 3), `<${"|".repeat(M)}>`, `${"<a".repeat(M / 2)}>`];
    const started = performance.now();
    const out = floods.map(slackTextToPlain);
    // Linear work on these 7M characters takes about half a second; a quadratic scan would take hours.
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(out[0]).toBe(floods[0]);
    expect(out[1]).toBe(floods[1]);
    expect(out[2]).toBe("&".repeat(M / 5));
    expect(out[3]).toBe(floods[3]);
    floods.forEach((f, k) => expect(out[k]!.length).toBeLessThanOrEqual(f.length));
  });
});
