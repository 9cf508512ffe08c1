import { describe, expect, it } from "vitest";
import { flowEditable, outcomeLeaning, outcomesOf } from "./flow-outcomes.js";

describe("flow outcomes", () => {
  it("tells approve-like from reject-like outcomes, whatever their case and separators", () => {
    expect(["approved", "Approve", "accept", "publish", "LGTM", "ship_it"].map(outcomeLeaning)).toEqual(Array(6).fill("approve"));
    expect(["rejected", "deny", "needs_revision", "revise", "cancel"].map(outcomeLeaning)).toEqual(["reject", "reject", undefined, "reject", "reject"]);
    expect(outcomeLeaning("escalate")).toBeUndefined();
  });

  it("reads a request's outcomes in order, ignoring what is not a word", () => {
    expect(outcomesOf({ emit: ["approved", 3, null, "rejected"] })).toEqual(["approved", "rejected"]);
    expect(outcomesOf({ emit: { approved: true } })).toEqual([]);
  });

  it("lets a request be edited and approved when its flow offers an approve-like outcome or takes free feedback", () => {
    expect(flowEditable([])).toBe(true);
    expect(flowEditable(["approved", "rejected"])).toBe(true);
    expect(flowEditable(["rejected", "escalate"])).toBe(false);
  });
});
