import { describe, expect, it } from "vitest";
import { openDecisionForm, sealDecisionForm } from "./form-seal.js";

const facts = { r: "0b3c2f4e-1111-4222-8333-444455556666", u: "U0ALICE", c: "C0RUNS", m: "1700000000.000100", h: 3000 };

describe("edit binding", () => {
  it("opens for the user it was sealed for, with the same key", () => {
    expect(openDecisionForm("key", sealDecisionForm("key", facts), "U0ALICE")).toEqual(facts);
  });

  it("refuses another user, another key, changed facts and garbage", () => {
    const sealed = sealDecisionForm("key", facts);
    expect(openDecisionForm("key", sealed, "U0BOB")).toBeUndefined();
    expect(openDecisionForm("other", sealed, "U0ALICE")).toBeUndefined();
    const changed = JSON.stringify({ ...JSON.parse(sealed), h: 10 });
    expect(openDecisionForm("key", changed, "U0ALICE")).toBeUndefined();
    const otherReview = JSON.stringify({ ...JSON.parse(sealed), r: "0b3c2f4e-1111-4222-8333-444455557777" });
    expect(openDecisionForm("key", otherReview, "U0ALICE")).toBeUndefined();
    expect(openDecisionForm("key", "not json", "U0ALICE")).toBeUndefined();
    expect(openDecisionForm("key", "{}", "U0ALICE")).toBeUndefined();
  });

  it("fits in private_metadata", () => {
    expect(sealDecisionForm("key", facts).length).toBeLessThan(3000);
  });
});
