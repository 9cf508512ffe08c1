import { describe, expect, it } from "vitest";
import { helpText } from "./help.js";

describe("helpText", () => {
  it("describes every subcommand, escaping the placeholders", () => {
    const text = helpText("/crew", ["research", "writer"]);
    for (const part of ["`/crew`", "`/crew &lt;crew name&gt;`", "`/crew status &lt;kickoff_id&gt;`", "`/crew stop &lt;kickoff_id&gt;`", "`/crew list`", "`/crew help`"]) {
      expect(text).toContain(part);
    }
    expect(text).toContain("`research`, `writer`");
    // What list answers: the channel's recent runs (kickoff/command.ts).
    expect(text).toContain("`/crew list` — this channel's recent runs");
  });

  it("skips the crew-name form with a single crew and uses the given command name", () => {
    const text = helpText("/ai", ["research"]);
    expect(text).not.toContain("crew name");
    expect(text).toContain("`/ai list`");
    expect(helpText(undefined, [])).toContain("No crews are set up yet");
  });

  it("stays short with many long crew names", () => {
    const crews = Array.from({ length: 500 }, (_, i) => `<${"n".repeat(1000)}${i}>`);
    const text = helpText("/crew", crews);
    expect(text.length).toBeLessThanOrEqual(3000);
    expect(text).toContain("and 480 more");
    expect(text).not.toMatch(/<n/);
  });
});
