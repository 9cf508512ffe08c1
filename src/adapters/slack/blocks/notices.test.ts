import { describe, expect, it } from "vitest";
import { flowNoticeText, reminderText, runNoticeText } from "./notices.js";

describe("run notices", () => {
  it("words an escalation, a reassignment and an interrupted decision from their facts, escaping what people typed", () => {
    expect(runNoticeText({ kind: "escalation", ids: ["U2", "S1"], taskName: "draft <x>", round: 2, reminders: 3 })).toBe(
      "🔺 <@U2>, <!subteam^S1>: *draft &lt;x&gt;* (round 2) is still waiting for a decision after 3 reminders. You may approve or reject it too.",
    );
    expect(runNoticeText({ kind: "reassignment", to: "U3", by: "U1", taskName: "draft", round: 1, reason: "on\nleave" })).toBe(
      "↪️ <@U1> reassigned *draft* to <@U3>, who may now decide it.\n> on leave",
    );
    expect(runNoticeText({ kind: "decision_interrupted", by: null, taskName: "draft", round: 1 })).toMatch(/^⚠️ The decision on \*draft\* was interrupted/);
    expect(runNoticeText({ kind: "text", text: "as stored" })).toBe("as stored");
  });

  it("words a review reminder with a link to the review when Slack gave one", () => {
    expect(reminderText({ crewName: "research" }, { taskName: "draft", round: 1 }, "<@U1>", 2 * 3600_000, "https://x.slack.com/p1")).toBe(
      "⏰ <@U1>: *draft* has been waiting for a decision for 2 h. Approve or reject <https://x.slack.com/p1|the review> so *research* can go on.",
    );
  });
});

describe("flow notices", () => {
  const request = { flowName: "publish", methodName: "review_draft" };
  it("names the flow and its step in every reply", () => {
    expect(flowNoticeText(request, { kind: "reminder", who: "<@U1>", waitedMs: 90 * 60_000 })).toBe(
      "⏰ <@U1>: flow *publish* has been waiting for feedback on `review_draft` for 1 h 30 min. Answer the request above so the flow can go on.",
    );
    expect(flowNoticeText(request, { kind: "escalation", ids: ["U2"], reminders: 1 })).toBe(
      "🔺 <@U2>: flow *publish*'s request on `review_draft` is still waiting for an answer after a reminder. You may answer it too.",
    );
    expect(flowNoticeText({ flowName: "publish", methodName: null }, { kind: "reassignment", to: "U3", by: "U1" })).toBe(
      "↪️ <@U1> reassigned flow *publish*'s request to <@U3>, who may now answer it.",
    );
    expect(flowNoticeText(request, { kind: "deadline_passed", who: "Reviewers", withinMs: 3600_000, lacking: "approve" })).toBe(
      "⏰ Reviewers: the deadline for flow *publish*'s request has passed (no answer within 1 hour) (it offers no approve outcome, so nothing was chosen for it). Answer the request above so the flow can go on.",
    );
    expect(flowNoticeText(request, { kind: "deadline_not_delivered", message: "HTTP 502 <bad gateway>" })).toBe(
      "⚠️ The deadline passed, but the automatic answer did not reach the flow: HTTP 502 &lt;bad gateway&gt;. The request is open again; please answer it.",
    );
  });
});
