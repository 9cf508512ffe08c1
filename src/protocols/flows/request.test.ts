import { describe, expect, it } from "vitest";
import { answerReason, feedbackText } from "../../usecases/flows.js";
import { MESSAGE_MAX, OUTPUT_MAX, parseFlowBody } from "./request.js";

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
  });

  it("keeps a long output whole, and cuts only what no body could carry, saying so", () => {
    const long = "x".repeat(250_000);
    expect(parseFlowBody({ ...valid, output: long })).toMatchObject({ kind: "request", request: { output: long } });
    const object = { text: "y".repeat(250_000) };
    expect(parseFlowBody({ ...valid, output: object })).toMatchObject({ kind: "request", request: { output: JSON.stringify(object) } });
    const cut = parseFlowBody({ ...valid, output: `${"z".repeat(OUTPUT_MAX - 2)}\u{1F600}tail` });
    expect(cut.kind === "request" && cut.request.output).toBe(`${"z".repeat(OUTPUT_MAX - 2)}…`);
    expect(parseFlowBody({ ...valid, output: 42 })).toMatchObject({ kind: "request", request: { output: "42" } });
  });

  it("cuts a long message, and drops shown-only fields of the wrong type instead of refusing the request", () => {
    const parsed = parseFlowBody({ ...valid, message: "m".repeat(MESSAGE_MAX + 5), deployment_name: 7, method_name: { x: 1 }, flow_id: [1], assigned_to_email: 5, status: 3 });
    expect(parsed.kind).toBe("request");
    if (parsed.kind !== "request") return;
    expect(parsed.request.message).toBe(`${"m".repeat(MESSAGE_MAX - 1)}…`);
    expect(parsed.request).toMatchObject({ deploymentName: "7", methodName: null, flowId: null, assignedEmail: null, requestId: "r1" });
    expect(parseFlowBody({ ...valid, method_name: "s".repeat(1000) })).toMatchObject({ kind: "request", request: { methodName: `${"s".repeat(299)}…` } });
  });

  it("offers each outcome once, leaving blank ones out; refuses more than can be offered, never dropping one the flow routes on", () => {
    expect(parseFlowBody({ ...valid, emit: ["approved", " ", "", "rejected", " approved "] })).toMatchObject({ kind: "request", request: { emit: ["approved", "rejected"] } });
    expect(parseFlowBody({ ...valid, emit: Array(21).fill("x") })).toMatchObject({ kind: "request", request: { emit: ["x"] } });
    expect(parseFlowBody({ ...valid, emit: [1, "two"] })).toMatchObject({ kind: "request", request: { emit: ["1", "two"] } });
    const many = parseFlowBody({ ...valid, emit: Array.from({ length: 21 }, (_, i) => `route_${i}`) });
    expect(many).toEqual({ kind: "invalid", field: "emit", problem: "emit: 21 distinct outcomes, at most 20 can be offered" });
    expect(parseFlowBody({ ...valid, emit: ["ok", "o".repeat(101)] })).toMatchObject({ kind: "invalid", field: "emit.1" });
    expect(parseFlowBody({ ...valid, emit: "approved" })).toMatchObject({ kind: "invalid", field: "emit" });
  });

  it("still requires the request's id and callback URL", () => {
    const { id: _id, ...noId } = valid;
    expect(parseFlowBody(noId)).toMatchObject({ kind: "invalid", field: "id" });
    expect(parseFlowBody({ ...valid, id: "  " })).toMatchObject({ kind: "invalid", field: "id" });
    expect(parseFlowBody({ ...valid, id: "i".repeat(201) })).toMatchObject({ kind: "invalid", field: "id" });
    const { callback_url: _url, ...noUrl } = valid;
    expect(parseFlowBody(noUrl)).toMatchObject({ kind: "invalid", field: "callback_url" });
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
