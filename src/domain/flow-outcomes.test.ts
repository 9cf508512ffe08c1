import { describe, expect, it } from "vitest";
import { flowEditable, outcomeLeaning, outcomesOf } from "./flow-outcomes.js";

describe("flow outcomes", () => {
  it("tells approve-like from reject-like outcomes, whatever their case and separators", () => {
    expect(["approved", "Approve", "accept", "publish", "LGTM", "ship_it"].map(outcomeLeaning)).toEqual(Array(6).fill("approve"));
    expect(["rejected", "deny", "needs_revision", "revise", "cancel"].map(outcomeLeaning)).toEqual(["reject", "reject", undefined, "reject", "reject"]);
    expect(outcomeLeaning("escalate")).toBeUndefined();
  });

  it("reads every word of an outcome, not only its first: an affirming word alone does not approve", () => {
    const expectLeaning = (names: string[], lean: "approve" | "reject" | "neither") =>
      expect(Object.fromEntries(names.map((n) => [n, outcomeLeaning(n) ?? "neither"]))).toEqual(Object.fromEntries(names.map((n) => [n, lean])));
    // Approve-like only when the words clearly approve.
    expectLeaning(["go_back", "go_back_to_draft", "goBack", "continue_editing", "pass_to_legal", "approve_or_reject", "approve_no_changes", "publish_back"], "neither");
    expectLeaning(["yes", "ok", "pass", "go_ahead", "good_to_go", "go_live", "ok_to_publish", "approve_with_changes", "ShipIt", "please approve"], "approve");
    // Saying yes to a rejection rejects; so do a negated approval and a reject word first, whatever it names.
    expectLeaning(["confirm_rejection", "ok_to_reject", "not_approved", "no_go", "do_not_publish", "don't publish", "cancel_publish", "reject_and_go_back", "no"], "reject");
    // A negation before anything else is not guessed at.
    expectLeaning(["no_issues_found", "no_changes", "not_rejected", "needs_changes", "", " _ "], "neither");
  });

  it("reads a request's outcomes in order, ignoring what is not a word", () => {
    expect(outcomesOf({ emit: ["approved", 3, null, "rejected"] })).toEqual(["approved", "rejected"]);
    expect(outcomesOf({ emit: { approved: true } })).toEqual([]);
  });

  it("lets a request be edited and approved when its flow offers an approve-like outcome or takes free feedback", () => {
    expect(flowEditable([])).toBe(true);
    expect(flowEditable(["approved", "rejected"])).toBe(true);
    expect(flowEditable(["rejected", "escalate"])).toBe(false);
    expect(flowEditable(["go_back", "continue_editing"])).toBe(false);
  });
});
