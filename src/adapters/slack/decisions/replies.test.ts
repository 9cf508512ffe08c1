import { describe, expect, it } from "vitest";
import type { FlowRequest } from "../../../usecases/flows.js";
import type { Review } from "../../../usecases/ports.js";
import { flowReplyFor, replyFor } from "./replies.js";

const review = (patch: Partial<Review>) => ({ state: "approved", decidedBy: "U0BEN", decision: "approve", ...patch }) as Review;
const request = (patch: Partial<FlowRequest>) => ({ state: "answered", decidedBy: "U0BEN", ...patch }) as FlowRequest;

describe("what a click on a decided review or request is told", () => {
  it("names who decided it, in plain grammar, and speaks to the clicker when it was them", () => {
    expect(replyFor({ kind: "already_decided", review: review({ state: "deciding" }) }, "U0ANA")).toBe("<@U0BEN> is already deciding this review.");
    expect(replyFor({ kind: "already_decided", review: review({ state: "deciding" }) }, "U0BEN")).toBe("Your decision is already on its way to the crew.");
    expect(replyFor({ kind: "already_decided", review: review({ decision: "reject", state: "rejected" }) }, "U0ANA")).toBe("<@U0BEN> already rejected this review.");
    expect(replyFor({ kind: "already_decided", review: review({}) }, "U0BEN")).toBe("You already approved this review.");
    expect(replyFor({ kind: "already_decided", review: review({}) })).toBe("<@U0BEN> already approved this review.");
    expect(flowReplyFor({ kind: "already_decided", request: request({ state: "deciding" }) }, "U0BEN")).toBe("Your answer is already on its way to the flow.");
    expect(flowReplyFor({ kind: "already_decided", request: request({}) }, "U0BEN")).toBe("You already answered this request.");
  });
});
