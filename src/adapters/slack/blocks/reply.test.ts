import { describe, expect, it } from "vitest";
import { REPLY_APPROVE_ACTION, REPLY_IGNORE_ACTION, REPLY_PICK_ACTION, REPLY_REJECT_ACTION, replyQuestionAnswered, replyQuestionMessage } from "./reply.js";

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
    expect(words).toContain("1 other review waits in this thread: this question is about the newest");
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

describe("the question when a reply could mean several reviews", () => {
  const review = (i: number, excerpt = `Draft ${i}`) => ({ value: `q1:rev${i}:1`, taskName: "research_task", round: 1, crewName: `crew ${i}`, excerpt });

  it("puts one button beside each review, told apart by its crew and first words, each with its own action id", () => {
    const m = replyQuestionMessage({ kind: "which", replyId: "q1", approve: true, reviews: [review(1, `${hostile}\n\n  second line`), review(2)], more: 0, cut: false });
    expect(m.text).toBe("2 reviews wait in this thread. Which one do you approve?");
    const picks = m.blocks.filter((b: any) => b.accessory).map((b: any) => [b.accessory.action_id, b.accessory.text.text, b.accessory.value, b.text.text]);
    expect(picks).toEqual([
      ["reply_pick_approve_0", "Approve", "q1:rev1:1", "*research_task* round 1 of *crew 1*\n&lt;!here&gt; *bold* &lt;https://phish.example|x&gt; second line"],
      ["reply_pick_approve_1", "Approve", "q1:rev2:1", "*research_task* round 1 of *crew 2*\nDraft 2"],
    ]);
    for (const [actionId] of picks) expect(REPLY_PICK_ACTION.test(actionId)).toBe(true);
    expect(buttons(m.blocks)).toEqual([[REPLY_IGNORE_ACTION, "Ignore", "q1"]]);
  });

  it("for a reject, offers Reject with this, and says how many more wait beyond those shown", () => {
    const m = replyQuestionMessage({ kind: "which", replyId: "q1", approve: false, reviews: [review(1), review(2)], more: 3, cut: true });
    expect(m.text).toBe("5 reviews wait in this thread. Which one should get your reply as feedback?");
    expect(m.blocks.filter((b: any) => b.accessory).map((b: any) => [b.accessory.action_id, b.accessory.text.text])).toEqual([
      ["reply_pick_reject_0", "Reject with this"],
      ["reply_pick_reject_1", "Reject with this"],
    ]);
    const words = JSON.stringify(m.blocks);
    expect(words).toContain("3 more wait: use the buttons on their messages.");
    expect(words).toContain("first 4,000 characters");
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
