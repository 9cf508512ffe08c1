import { describe, expect, it } from "vitest";
import { blockTextLength, messageLimitViolations, modalLimitViolations } from "./limits.js";

// The builders' tests lean on these checkers, so prove they catch what they claim to.
describe("limit checkers", () => {
  it("counts every text string in the blocks", () => {
    expect(
      blockTextLength([
        { type: "section", text: { type: "mrkdwn", text: "abc" }, fields: [{ type: "mrkdwn", text: "de" }] },
        { type: "markdown", text: "fgh" },
      ]),
    ).toBe(8);
  });

  it("flags oversized message parts", () => {
    const problems = messageLimitViolations([
      { type: "section", text: { type: "mrkdwn", text: "x".repeat(3001) } },
      { type: "header", text: { type: "plain_text", text: "h".repeat(151) } },
      { type: "markdown", text: "m".repeat(12_001) },
      { type: "actions", elements: [{ type: "button", action_id: "a", value: "v".repeat(2001), text: { type: "plain_text", text: "b".repeat(76) } }] },
      { type: "section", text: { type: "mrkdwn", text: "" } },
    ]);
    expect(problems.join("\n")).toMatch(/section.text: 3001 > 3000/);
    expect(problems.join("\n")).toMatch(/header.text: 151 > 150/);
    expect(problems.join("\n")).toMatch(/markdown text: 12001 > 12000/);
    expect(problems.join("\n")).toMatch(/block text: \d+ > 12000/);
    expect(problems.join("\n")).toMatch(/value: 2001 > 2000/);
    expect(problems.join("\n")).toMatch(/text: 76 > 75/);
    expect(problems.join("\n")).toMatch(/empty/);
  });

  it("flags too many message blocks", () => {
    const blocks = Array.from({ length: 51 }, () => ({ type: "divider" as const }));
    expect(messageLimitViolations(blocks)).toContain("blocks: 51 > 50");
  });

  it("flags oversized modal parts", () => {
    const problems = modalLimitViolations({
      type: "modal",
      title: { type: "plain_text", text: "t".repeat(25) },
      private_metadata: "m".repeat(3001),
      blocks: [
        ...Array.from({ length: 100 }, () => ({ type: "divider" as const })),
        {
          type: "input",
          block_id: "b".repeat(256),
          label: { type: "plain_text", text: "l" },
          element: { type: "plain_text_input", action_id: "value", max_length: 3001, placeholder: { type: "plain_text", text: "p".repeat(151) } },
        },
      ],
    });
    expect(problems).toEqual(expect.arrayContaining(["title: 25 > 24", "private_metadata: 3001 > 3000", "blocks: 101 > 100", "input blocks need a submit button"]));
    expect(problems.join("\n")).toMatch(/block_id: 256 > 255/);
    expect(problems.join("\n")).toMatch(/max_length: 3001 > 3000/);
    expect(problems.join("\n")).toMatch(/placeholder: 151 > 150/);
  });
});
