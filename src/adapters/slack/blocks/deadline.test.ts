import { describe, expect, it } from "vitest";
import { timeoutFeedback } from "../../../usecases/decisions/core.js";
import { deadlineNotDeliveredText, deadlineText, escalationText, mentionIds, pendingReviewNotes, reassignModal, reassignmentText, slackTime } from "./deadline.js";
import { FLOW_REASSIGN_VIEW_CALLBACK, REASSIGN_VIEW_CALLBACK } from "./ids.js";
import { modalLimitViolations } from "./limits.js";
import { reviewMessage } from "./run.js";

const now = new Date("2026-11-23T12:00:00Z");
const at = new Date("2026-11-23T14:00:00Z");
const unix = Math.floor(at.getTime() / 1000);

describe("deadline text", () => {
  it("says when, in the reader's time (Slack date token) with a UTC fallback, and what happens then", () => {
    expect(deadlineText(at, "reject", now)).toBe(`⏳ If nobody decides in 2 hours, at <!date^${unix}^{time} {date_short_pretty}|14:00 UTC>, it will be rejected automatically.`);
    expect(deadlineText(at, "approve", now)).toContain("it will be approved automatically.");
    expect(deadlineText(at, "remind", now)).toContain("its reviewers will be reminded.");
  });

  it("names the UTC date when the deadline is on another day, and says when it has passed", () => {
    const tomorrow = new Date("2026-11-24T09:30:00Z");
    expect(slackTime(tomorrow, now)).toMatch(/\|09:30 UTC on 2026-11-24>$/);
    expect(deadlineText(at, "reject", new Date("2026-11-23T15:00:00Z"))).toBe(`⏳ The deadline passed at <!date^${unix}^{time} {date_short_pretty}|14:00 UTC>.`);
  });

  it("gives the crew feedback that says the decision timed out", () => {
    expect(timeoutFeedback("reject", 30 * 60_000)).toBe("No decision within 30 minutes: rejected automatically by Crewline");
    expect(timeoutFeedback("approve", 24 * 3_600_000)).toBe("No decision within 24 hours: approved automatically by Crewline");
    expect(deadlineNotDeliveredText({ taskName: "t<x>", action: "reject", message: "crew down." })).toBe(
      "⚠️ The deadline for *t&lt;x&gt;* passed, but the automatic rejection did not reach the crew: crew down. The review is open again; please decide it.",
    );
  });

  it("mentions users and user groups, and escapes names", () => {
    expect(mentionIds(["U1", "S2"])).toBe("<@U1>, <!subteam^S2>");
    expect(escalationText({ ids: ["U1", "S2"], taskName: "a<b>", round: 2, reminders: 3 })).toBe(
      "🔺 <@U1>, <!subteam^S2>: *a&lt;b&gt;* (round 2) is still waiting for a decision after 3 reminders. You may approve or reject it too.",
    );
    expect(reassignmentText({ to: "U2", by: "U1", taskName: "t", round: 1, reason: "<!channel> on\nleave" })).toBe(
      "↪️ <@U1> reassigned *t* to <@U2>, who may now decide it.\n> &lt;!channel&gt; on leave",
    );
  });

  it("shows the notes under a pending review, unescaped Slack tokens included", () => {
    const notes = pendingReviewNotes({ deadline: { at, action: "reject" }, escalatedTo: ["S9"], reassignedTo: "U7", now });
    const message = reviewMessage({ reviewId: "r1", taskName: "t", round: 1, output: "x", state: "pending", pendingNotes: notes, reassignable: true });
    const text = JSON.stringify(message.blocks);
    expect(text).toContain("↪️ Reassigned to <@U7>");
    expect(text).toContain("🔺 Escalated to <!subteam^S9>");
    expect(text).toContain(`<!date^${unix}^`);
    expect(text).toContain("review_reassign");
    const decided = reviewMessage({ reviewId: "r1", taskName: "t", round: 1, output: "x", state: "rejected", byDeadline: true, decidedBy: "crewline:deadline" });
    expect(JSON.stringify(decided.blocks)).toContain("Rejected by deadline (Crewline)");
  });

  it("builds a Reassign modal within Slack's limits", () => {
    const view = reassignModal({ metadata: "r1", taskName: "x".repeat(5000) });
    expect(modalLimitViolations(view)).toEqual([]);
    expect(view.private_metadata).toBe("r1");
    expect(view.callback_id).toBe(REASSIGN_VIEW_CALLBACK);
    const flow = reassignModal({ metadata: "f1", taskName: "content", callbackId: FLOW_REASSIGN_VIEW_CALLBACK, what: "request" });
    expect(modalLimitViolations(flow)).toEqual([]);
    expect(flow.callback_id).toBe(FLOW_REASSIGN_VIEW_CALLBACK);
    expect(JSON.stringify(flow)).toContain("may answer it");
  });
});
