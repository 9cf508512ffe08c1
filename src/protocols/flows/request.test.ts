import { describe, expect, it } from "vitest";
import { answerReason, feedbackText } from "../../usecases/flows.js";
import { parseFlowBody } from "./request.js";

const valid = {
  event_type: "new_request",
  id: "r1",
  method_name: "review",
  message: "m",
  output: "o",
  emit: ["approved", "rejected"],
  callback_url: "https://x/human_feedback_requests/r1/respond?token=t",
  deployment_id: 456,
  assigned_to_email: "a@example.com",
};

describe("parseFlowBody", () => {
  it("reads the documented shape, tolerating numbers for ids and absent emit", () => {
    const parsed = parseFlowBody(valid);
    expect(parsed).toMatchObject({ kind: "request", request: { requestId: "r1", emit: ["approved", "rejected"], assignedEmail: "a@example.com" } });
    expect(parseFlowBody({ ...valid, id: 42, emit: undefined })).toMatchObject({ kind: "request", request: { requestId: "42", emit: [] } });
    expect(parseFlowBody({ ...valid, output: { a: 1 } })).toMatchObject({ kind: "request", request: { output: '{\n  "a": 1\n}' } });
  });

  it("ignores other event types and refuses malformed bodies without echoing values", () => {
    expect(parseFlowBody({ event_type: "request_cancelled", id: "r1" })).toEqual({ kind: "ignored", eventType: "request_cancelled" });
    expect(parseFlowBody([1, 2])).toMatchObject({ kind: "invalid" });
    const bad = parseFlowBody({ ...valid, callback_url: "javascript:alert(1)" });
    expect(bad.kind).toBe("invalid");
    expect(JSON.stringify(bad)).not.toContain("alert");
    expect(parseFlowBody({ ...valid, emit: Array(21).fill("x") }).kind).toBe("invalid");
  });
});

describe("feedbackText / answerReason", () => {
  it("puts the outcome first so the flow can route on it", () => {
    expect(feedbackText("approved", "")).toBe("approved");
    expect(feedbackText("rejected", " more sources ")).toBe("rejected\n\nmore sources");
    expect(feedbackText(undefined, "just text")).toBe("just text");
  });

  it("gives a readable reason and hides tokens", () => {
    expect(answerReason(409, JSON.stringify({ error: "Conflict", message: "already answered" }))).toBe("409 already answered");
    expect(answerReason(410, "")).toBe("410 the request expired");
    expect(answerReason(400, "bad token=abc123")).not.toContain("abc123");
  });
});
