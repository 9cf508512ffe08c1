import { describe, expect, it } from "vitest";
import { REPLY_APPROVE_ACTION, REPLY_IGNORE_ACTION, REPLY_REJECT_ACTION, replyQuestionAnswered, replyQuestionMessage } from "./reply.js";

const hostile = "<!here> *bold* <https://phish.example|x>";
const buttons = (blocks: any[]) => blocks.find((b) => b.type === "actions").elements.map((e: any) => [e.action_id, e.text.text, e.value]);

describe("the private question about a reply", () => {
  it("names the task and round, offers Reject with this, Approve and Ignore, and carries only the reply's id", () => {
    const m = replyQuestionMessage({ kind: "review", replyId: "r1", taskName: hostile, round: 2, otherPending: 1, cut: true });
    expect(m.text).toContain("round 2 with your reply as feedback?");
    expect(m.text).not.toContain("<!here>");
    expect(m.text).toContain("&lt;!here&gt;");
    expect(buttons(m.blocks)).toEqual([
      [REPLY_REJECT_ACTION, "Reject with this", "r1"],
      [REPLY_APPROVE_ACTION, "Approve", "r1"],
      [REPLY_IGNORE_ACTION, "Ignore", "r1"],
    ]);
    const words = JSON.stringify(m.blocks);
    expect(words).toContain("1 other review waits in this thread");
    expect(words).toContain("first 4,000 characters");
  });

  it("for a flow: its reject- and approve-like outcomes, free feedback, or only the outcomes it takes", () => {
    const base = { kind: "flow" as const, replyId: "r2", flowName: "content", cut: false };
    expect(buttons(replyQuestionMessage({ ...base, rejectOutcome: "rejected", approveOutcome: "approved", freeText: false, outcomes: ["approved", "rejected"] }).blocks)).toEqual([
      [REPLY_REJECT_ACTION, "rejected with this", "r2"],
      [REPLY_APPROVE_ACTION, "approved", "r2"],
      [REPLY_IGNORE_ACTION, "Ignore", "r2"],
    ]);
    expect(buttons(replyQuestionMessage({ ...base, freeText: true, outcomes: [] }).blocks)).toEqual([
      [REPLY_REJECT_ACTION, "Send this", "r2"],
      [REPLY_IGNORE_ACTION, "Ignore", "r2"],
    ]);
    const none = replyQuestionMessage({ ...base, freeText: false, outcomes: ["hold", "later"] });
    expect(none.text).toContain("`hold`, `later`");
    expect(buttons(none.blocks)).toEqual([[REPLY_IGNORE_ACTION, "Ignore", "r2"]]);
  });
});

describe("what replaces an answered question", () => {
  it("says what was done, or the answer's own words, with no buttons", () => {
    expect(replyQuestionAnswered("reject", undefined).text).toContain("sent as feedback");
    expect(replyQuestionAnswered("approve", undefined).text).toContain("approved");
    const answered = replyQuestionAnswered("approve", "You already answered this question.");
    expect(answered.text).toBe("You already answered this question.");
    expect(JSON.stringify(answered.blocks)).not.toContain("button");
  });
});
