import { describe, expect, it } from "vitest";
import { editModal } from "./edit.js";
import { EDIT_TEXT_BLOCK, EDIT_VIEW_CALLBACK } from "./ids.js";
import { blockTextLength, messageLimitViolations, modalLimitViolations } from "./limits.js";
import { approvalsLine, editNeedsFile, roundDiffNeedsFile } from "./review-extras.js";
import { OUTPUT_MARKDOWN_MAX, outputNeedsFile, reviewMessage } from "./run.js";

const json = (v: unknown) => JSON.stringify(v);
const base = { reviewId: "rev_1", taskName: "Write report", agent: "Writer", round: 2, output: "The reef grew by ten percent.", state: "pending" as const };
const previous = { round: 1, output: "The reef grew by five percent.", feedback: "Check the <!channel> number", decidedBy: "U0BOB" };

function withinLimits(blocks: any[]) {
  expect(messageLimitViolations(blocks)).toEqual([]);
  expect(blockTextLength(blocks)).toBeLessThanOrEqual(12_000);
}

describe("review message extras", () => {
  it("round 2 quotes the feedback that asked for it and shows the diff, before the output", () => {
    const m = reviewMessage({ ...base, previous });
    const text = json(m.blocks);
    expect(text).toContain("Round 1 was rejected by <@U0BOB> with this feedback:\\n> Check the &lt;!channel&gt; number");
    expect(text).toContain("*Changes since round 1* (+1 / −1 words)");
    expect(text).toContain("[-five-]{+ten+}");
    expect(text.indexOf("Changes since")).toBeLessThan(text.indexOf('"type":"markdown"'));
    withinLimits(m.blocks);
  });

  it("a task message (no decision) of round 2 shows the diff too", () => {
    expect(json(reviewMessage({ ...base, state: "posted", previous }).blocks)).toContain("[-five-]{+ten+}");
  });

  it("waiting for more approvals: who approved so far, with the buttons still there", () => {
    const m = reviewMessage({ ...base, approvals: { required: 2, by: [{ userId: "U0BOB", note: "fine", edited: false }] } });
    const text = json(m.blocks);
    expect(text).toContain("1 of 2 approvals: <@U0BOB>");
    expect(text).toContain("review_approve");
    withinLimits(m.blocks);
  });

  it("approved with edits: who, and the edit as a diff against the original", () => {
    const m = reviewMessage({
      ...base,
      state: "approved",
      decidedBy: "U0ALICE",
      approvals: { required: 1, by: [{ userId: "U0ALICE", edited: true }] },
      edit: { by: "U0ALICE", text: "The reef grew by twelve percent." },
    });
    const text = json(m.blocks);
    expect(m.text).toBe("Approved with edits: Write report");
    expect(text).toContain("✅ Approved with edits by <@U0ALICE>");
    expect(text).toContain("[-ten-]{+twelve+}");
    expect(text).not.toContain("review_approve");
    withinLimits(m.blocks);
  });

  it("several approvers: all are named with their notes", () => {
    expect(
      approvalsLine({
        required: 2,
        by: [
          { userId: "U1", note: "a <b>", edited: false },
          { userId: "U2", edited: true },
        ],
      }),
    ).toBe("2 of 2 approvals: <@U1>, <@U2> (with edits)\n<@U1>: a &lt;b&gt;");
  });

  it("stays within Slack's limits with a long output, a long diff and many approvers", () => {
    const long = (seed: string) => Array.from({ length: 2_000 }, (_, i) => `${seed}${i}`).join(" ");
    const output = long("n").slice(0, OUTPUT_MARKDOWN_MAX - 10);
    const by = Array.from({ length: 10 }, (_, i) => ({ userId: `U${i}`, note: "n".repeat(500), edited: i % 2 === 0 }));
    const params = { ...base, output, previous: { ...previous, output: long("o"), feedback: "f".repeat(5_000) }, approvals: { required: 10, by } };
    expect(outputNeedsFile(output)).toBe(false);
    const pending = reviewMessage({ ...params, outputTruncated: true });
    withinLimits(pending.blocks);
    const approved = reviewMessage({ ...params, state: "approved", edit: { by: "U0", text: long("e") }, outputTruncated: true, editFileAttached: true });
    withinLimits(approved.blocks);
    expect(roundDiffNeedsFile(params.previous, output)).toBe(true);
    expect(editNeedsFile(output, long("e"), (t) => outputNeedsFile(t))).toBe(true);
    expect(editNeedsFile("a b", "a c", (t) => outputNeedsFile(t))).toBe(false);
  });
});

describe("editModal", () => {
  it("pre-fills the output and stays within modal limits", () => {
    const view = editModal({ taskName: "Write report", round: 1, head: "x".repeat(3000), restLength: 0, metadata: "{}" });
    expect(view.callback_id).toBe(EDIT_VIEW_CALLBACK);
    expect(view.blocks.find((b: any) => b.block_id === EDIT_TEXT_BLOCK)).toMatchObject({ element: { initial_value: "x".repeat(3000), max_length: 3000, multiline: true } });
    expect(json(view.blocks)).not.toContain("kept unchanged");
    expect(json(view.blocks)).toContain("Note for the crew");
    expect(modalLimitViolations(view)).toEqual([]);
    // A flow's request: its note goes to the flow.
    expect(json(editModal({ taskName: "t", head: "x", restLength: 0, metadata: "{}", receiver: "flow" }).blocks)).toContain("Note for the flow");
  });

  it("says when only the first part can be edited and what happens to the rest", () => {
    const view = editModal({ taskName: "Write report", round: 1, head: "x".repeat(2990), restLength: 9010, metadata: "{}" });
    expect(json(view.blocks)).toContain("This output is 12,000 characters long");
    expect(json(view.blocks)).toContain("the first 2,990 are here to edit, with room to add. The remaining 9,010 characters are kept unchanged and appended after your edit.");
    expect(modalLimitViolations(view)).toEqual([]);
  });

  it("refuses a part longer than a text input holds", () => {
    expect(() => editModal({ taskName: "t", round: 1, head: "x".repeat(3001), restLength: 0, metadata: "{}" })).toThrow();
  });
});
