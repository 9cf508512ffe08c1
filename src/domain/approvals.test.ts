import { describe, expect, it } from "vitest";
import {
  approvalFeedback,
  approvalPolicy,
  approvalsFor,
  approvalTally,
  EDIT_ROOM,
  EDITED_OUTPUT_END,
  EDITED_OUTPUT_START,
  editableSplit,
  joinEdit,
  latestEdit,
  type StoredApproval,
  selfApprovalRefused,
  unchangedEdit,
} from "./approvals.js";

const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));
const approval = (userId: string, s: number, note: string | null = null, editedOutput: string | null = null): StoredApproval => ({
  userId,
  note,
  editedOutput,
  createdAt: at(s),
});

describe("approvalPolicy", () => {
  it("defaults to one approval, starters allowed", () => {
    expect(approvalPolicy(undefined)).toEqual({ required: 1, selfApproval: true });
    expect(approvalPolicy({ approvals: 3, selfApproval: false })).toEqual({ required: 3, selfApproval: false });
    expect(approvalPolicy({ approvals: 0 })).toEqual({ required: 1, selfApproval: true });
  });
});

describe("selfApprovalRefused", () => {
  it("refuses only the run's starter, only when self-approval is off", () => {
    expect(selfApprovalRefused({ required: 1, selfApproval: false }, "U1", "U1")).toBe(true);
    expect(selfApprovalRefused({ required: 1, selfApproval: false }, "U1", "U2")).toBe(false);
    expect(selfApprovalRefused({ required: 1, selfApproval: true }, "U1", "U1")).toBe(false);
  });
});

describe("approvalTally", () => {
  it("counts distinct people, oldest first", () => {
    expect(approvalTally([approval("U2", 2), approval("U1", 1)], 2)).toEqual({ approvers: ["U1", "U2"], required: 2, done: true });
    expect(approvalTally([approval("U1", 1)], 2)).toMatchObject({ done: false });
    expect(approvalTally([approval("U1", 1), approval("U1", 3)], 2)).toMatchObject({ approvers: ["U1"], done: false });
    expect(approvalTally([], 1)).toMatchObject({ done: false });
  });
});

describe("approvalsFor", () => {
  const forOutcome = (userId: string, s: number, outcome: string | null) => ({ ...approval(userId, s), outcome });
  const given = [forOutcome("U1", 1, "approved_with_minor_edits"), forOutcome("U2", 2, "approved")];

  it("counts a flow's approve-like outcomes apart: two people for two outcomes answer nothing", () => {
    expect(approvalTally(approvalsFor(given, "approved"), 2)).toEqual({ approvers: ["U2"], required: 2, done: false });
    expect(approvalTally(approvalsFor(given, "approved_with_minor_edits"), 2)).toMatchObject({ approvers: ["U1"], done: false });
    const third = [...given, forOutcome("U3", 3, "approved_with_minor_edits")];
    expect(approvalTally(approvalsFor(third, "approved_with_minor_edits"), 2)).toEqual({ approvers: ["U1", "U3"], required: 2, done: true });
    expect(approvalsFor(third, "approved_with_minor_edits").map((a) => a.userId)).toEqual(["U1", "U3"]);
  });

  it("counts all of a review's approvals (no outcome given), and a flow without outcomes' (null) together", () => {
    expect(approvalTally(approvalsFor([approval("U1", 1), approval("U2", 2)], undefined), 2)).toMatchObject({ done: true });
    expect(approvalsFor(given, undefined)).toEqual(given);
    expect(approvalTally(approvalsFor([forOutcome("U1", 1, null), approval("U2", 2)], null), 2)).toMatchObject({ approvers: ["U1", "U2"], done: true });
  });
});

describe("approvalFeedback", () => {
  it("is the note (or Approved) for one approver without an edit, as before", () => {
    expect(approvalFeedback([approval("U1", 1, "Ship it")])).toBe("Ship it");
    expect(approvalFeedback([approval("U1", 1)])).toBe("Approved");
  });

  it("names every approver and passes each note on", () => {
    const text = approvalFeedback([approval("U2", 2, "Fine"), approval("U1", 1, "Good sources")]);
    expect(text).toBe("Approved by 2 reviewers: U1, U2.\n\nReviewers' notes:\n- U1: Good sources\n- U2: Fine");
  });

  it("says plainly that the output was replaced, and carries the edited version whole", () => {
    const text = approvalFeedback([approval("U1", 1, "Shorter title", "# New title\nBody")]);
    expect(text).toContain("The reviewer U1 replaced this task's output with an edited version and approved it.");
    expect(text).toContain("Reviewer's note: Shorter title");
    expect(text.endsWith(`${EDITED_OUTPUT_START}\n# New title\nBody\n${EDITED_OUTPUT_END}`)).toBe(true);
  });

  it("uses the latest edit when several approvers edited, and says so", () => {
    const approvals = [approval("U1", 1, null, "first edit"), approval("U2", 2, null, "second edit")];
    expect(latestEdit(approvals)?.userId).toBe("U2");
    const text = approvalFeedback(approvals);
    expect(text).toContain("The reviewer U2 replaced");
    expect(text).toContain("1 earlier edit was replaced by this one");
    expect(text).toContain(`${EDITED_OUTPUT_START}\nsecond edit\n${EDITED_OUTPUT_END}`);
    expect(text).not.toContain("first edit");
  });
});

describe("editableSplit", () => {
  it("keeps short outputs whole", () => {
    expect(editableSplit("short")).toEqual({ head: "short", rest: "" });
  });

  it("cuts long outputs at a line break within the limit; head + rest is the output", () => {
    const output = Array.from({ length: 100 }, (_, i) => `line ${i} ${"x".repeat(50)}`).join("\n");
    const { head, rest } = editableSplit(output, 3000);
    expect(head.length).toBeLessThanOrEqual(3000);
    expect(head + rest).toBe(output);
    expect(rest.startsWith("\n")).toBe(true);
    expect(joinEdit(head.toUpperCase(), rest)).toBe(head.toUpperCase() + rest);
  });

  it("never splits a surrogate pair", () => {
    const output = `${"a".repeat(2499)}😀${"b".repeat(1000)}`;
    const { head, rest } = editableSplit(output, 3000);
    expect(head).toBe("a".repeat(2499));
    expect(rest.startsWith("😀")).toBe(true);
  });

  it("leaves room to add to the first part, even in an output without line breaks", () => {
    const words = Array.from({ length: 1000 }, (_, i) => `word${i}`).join(" ");
    const { head, rest } = editableSplit(words, 3000);
    expect(head.length).toBeLessThanOrEqual(3000 - EDIT_ROOM);
    expect(head.length).toBeGreaterThan(2000);
    // Cut between words, not inside one.
    expect(rest.startsWith(" word")).toBe(true);
    expect(head + rest).toBe(words);
    const unbroken = "x".repeat(10_000);
    expect(editableSplit(unbroken, 3000).head).toHaveLength(3000 - EDIT_ROOM);
  });
});

describe("unchangedEdit", () => {
  it("ignores line-break style and trailing whitespace, nothing else", () => {
    expect(unchangedEdit("a\r\nb\n", "a\nb")).toBe(true);
    expect(unchangedEdit("a b", "a  b")).toBe(false);
    expect(unchangedEdit("a", "b")).toBe(false);
  });
});
