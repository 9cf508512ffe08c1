import { describe, expect, it } from "vitest";
import { type FlowMessageParams, flowRequestMessage, outcomeStyle } from "./flow.js";
import { FLOW_ACTIONS_BLOCK, FLOW_EDIT_ACTION, FLOW_FEEDBACK_BLOCK, FLOW_REASSIGN_ACTION, FLOW_SEND_ACTION } from "./ids.js";
import { messageLimitViolations } from "./limits.js";

const base: FlowMessageParams = {
  requestId: "3f0c2a9e-1b2c-4d5e-8f90-123456789abc",
  flowName: "content",
  deploymentName: "Content pipeline",
  methodName: "review_article",
  message: "Please review this article",
  output: "# Draft\n\nSome *text*.",
  emit: ["approved", "needs_changes", "rejected"],
  state: "pending",
};

const actions = (m: ReturnType<typeof flowRequestMessage>) => m.blocks.find((b) => b.type === "actions") as any;

describe("flowRequestMessage", () => {
  it("shows flow, deployment, step, message and output, with one button per outcome and a feedback field", () => {
    const m = flowRequestMessage(base);
    const text = JSON.stringify(m.blocks);
    for (const part of ["content", "Content pipeline", "review_article", "Please review this article", "# Draft"]) expect(text).toContain(part);
    const buttons = actions(m).elements;
    expect(actions(m).block_id).toBe(FLOW_ACTIONS_BLOCK);
    expect(buttons.map((b: any) => [b.text.text, b.style, b.value])).toEqual([
      ["approved", "primary", base.requestId],
      ["needs_changes", undefined, base.requestId],
      ["rejected", "danger", base.requestId],
      ["Edit and approve…", undefined, base.requestId],
      ["Reassign", undefined, base.requestId],
    ]);
    expect(new Set(buttons.map((b: any) => b.action_id)).size).toBe(5);
    expect(m.blocks.some((b: any) => b.type === "input" && b.block_id === FLOW_FEEDBACK_BLOCK)).toBe(true);
    expect(messageLimitViolations(m.blocks)).toEqual([]);
  });

  it("offers Send feedback when the flow lists no outcomes", () => {
    const m = flowRequestMessage({ ...base, emit: [] });
    expect(actions(m).elements.map((b: any) => [b.action_id, b.text.text])).toEqual([
      [FLOW_SEND_ACTION, "Send feedback"],
      [FLOW_EDIT_ACTION, "Edit and approve…"],
      [FLOW_REASSIGN_ACTION, "Reassign"],
    ]);
    expect(JSON.stringify(m.blocks)).toMatch(/Required/);
  });

  it("mentions the assignee, or says who it was for when no Slack user was found", () => {
    expect(JSON.stringify(flowRequestMessage({ ...base, assigneeUserId: "U0DAN", assignedEmail: "dan@example.com" }).blocks)).toContain("<@U0DAN>");
    const notFound = JSON.stringify(flowRequestMessage({ ...base, assignedEmail: "dan@example.com" }).blocks);
    expect(notFound).toContain("dan@example.com");
    expect(notFound).toMatch(/no Slack user/);
  });

  it("shows a long output as an excerpt, and says the file holds the rest", () => {
    const m = flowRequestMessage({ ...base, output: "word ".repeat(5000), outputTruncated: true });
    expect(JSON.stringify(m.blocks)).toMatch(/attached below as a file/);
    expect(messageLimitViolations(m.blocks)).toEqual([]);
  });

  it("does not let hostile text ping the channel or break out of formatting", () => {
    const m = flowRequestMessage({ ...base, flowName: "*x* <!channel>", output: "hi <!channel> <@U1>", emit: ["a".repeat(100)] });
    const text = JSON.stringify(m.blocks);
    expect(text).not.toContain("<!channel>");
    expect(actions(m).elements[0].text.text.length).toBeLessThanOrEqual(75);
  });

  it("after a decision: who, outcome, comment and the platform's answer, no buttons", () => {
    const m = flowRequestMessage({ ...base, state: "answered", decidedBy: "U0BOB", outcome: "rejected", feedback: "Needs sources", note: "Feedback received" });
    const text = JSON.stringify(m.blocks);
    for (const part of ["<@U0BOB>", "rejected", "Needs sources", "Feedback received"]) expect(text).toContain(part);
    expect(actions(m)).toBeUndefined();
    const closed = JSON.stringify(flowRequestMessage({ ...base, state: "closed", decidedBy: "U0BOB", outcome: "approved", note: "409 Feedback was already provided" }).blocks);
    expect(closed).toContain("Closed");
    expect(closed).toContain("409 Feedback was already provided");
  });
});

describe("outcomeStyle", () => {
  it("styles approve-like outcomes primary and reject-like ones danger", () => {
    expect(["approved", "Approve", "accept", "publish", "LGTM", "yes"].map(outcomeStyle)).toEqual(Array(6).fill("primary"));
    expect(["rejected", "reject", "deny", "needs_revision", "revise", "cancel"].map(outcomeStyle)).toEqual(["danger", "danger", "danger", undefined, "danger", "danger"]);
    expect(outcomeStyle("escalate")).toBeUndefined();
  });
});

describe("flowRequestMessage's notification text and the flow's answer", () => {
  const hostile = "<!here> <@U0VICTIM> <https://phish.example|Approve>";
  const tokens = /<[!@#]|<https?:/;

  it("escapes the flow's name, step and outcome in every state's notification text", () => {
    const p = { ...base, flowName: `f ${hostile}`, methodName: `m ${hostile}`, outcome: `o ${hostile}`, decidedBy: "U0BOB" };
    for (const state of ["pending", "answered", "closed"] as const) {
      const m = flowRequestMessage({ ...p, state });
      expect(m.text).not.toMatch(tokens);
      expect(m.text).toContain("&lt;!here&gt;");
    }
    expect(flowRequestMessage({ ...p, state: "answered", edit: { by: "U0BOB", text: "new" } }).text).not.toMatch(tokens);
  });

  it("shows the flow's answer (a 2xx message or a 4xx body) as text, not mrkdwn, in every state", () => {
    for (const state of ["pending", "answered", "closed"] as const) {
      const m = flowRequestMessage({ ...base, state, decidedBy: "U0BOB", note: `409 ${hostile}` });
      const shown = JSON.stringify(m.blocks);
      expect(shown).toContain("409 &lt;!here&gt; &lt;@U0VICTIM&gt; &lt;https://phish.example|Approve&gt;");
      for (const token of ["<!here>", "<@U0VICTIM>", "<https://phish"]) expect(shown).not.toContain(token);
    }
  });
});
