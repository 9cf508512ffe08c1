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

describe("what a decider is told when the crew or flow took it but Crewline could not store it", () => {
  it("says it was taken, and not to decide again", () => {
    expect(replyFor({ kind: "unrecorded", review: review({ state: "deciding" }) })).toBe(
      "The crew took your decision, but Crewline could not record it just now (its database did not answer), so the review may look undecided here for a few minutes. Please don't decide it again.",
    );
    expect(flowReplyFor({ kind: "unrecorded", request: request({ state: "deciding" }) })).toMatch(/^The flow took your answer, .* Please don't answer it again\.$/);
  });
});
