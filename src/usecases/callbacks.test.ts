import { describe, expect, it } from "vitest";
import { bearerToken, roundRepeatedAfterRejection } from "./callbacks.js";

const received = new Date("2026-03-01T10:00:00.000Z");
const later = new Date("2026-03-01T10:05:00.000Z");
const earlier = new Date("2026-03-01T09:55:00.000Z");
const round = (p: { state: string; decision: string | null; decidedAt: Date | null }) => ({ id: "review-1", ...p });

describe("roundRepeatedAfterRejection (a callback with the same body as one recorded)", () => {
  it("is the crew's next round when the output was rejected after the delivery it repeats: keyed on that round", () => {
    expect(roundRepeatedAfterRejection({ receivedAt: received, lastRejected: round({ state: "rejected", decision: "reject", decidedAt: later }) })).toBe("review-1");
  });

  it("counts a rejection still on its way to the crew (claimed, deciding): the crew may answer before Crewline stores it", () => {
    expect(roundRepeatedAfterRejection({ receivedAt: received, lastRejected: round({ state: "deciding", decision: "reject", decidedAt: later }) })).toBe("review-1");
  });

  it("is a redelivery when no round of that output was rejected (before or while it is open, after an approval)", () => {
    expect(roundRepeatedAfterRejection({ receivedAt: received, lastRejected: null })).toBeUndefined();
  });

  it("is a redelivery when the rejection came before the delivery it repeats (the crew's next round is recorded already)", () => {
    expect(roundRepeatedAfterRejection({ receivedAt: received, lastRejected: round({ state: "rejected", decision: "reject", decidedAt: earlier }) })).toBeUndefined();
  });

  it("is a redelivery when the crew never took the rejection (it was not waiting: closed) or it is no rejection", () => {
    for (const r of [
      round({ state: "closed", decision: "reject", decidedAt: later }),
      round({ state: "pending", decision: null, decidedAt: null }),
      round({ state: "deciding", decision: "approve", decidedAt: later }),
      round({ state: "approved", decision: "approve", decidedAt: later }),
      round({ state: "rejected", decision: "reject", decidedAt: null }),
    ])
      expect(roundRepeatedAfterRejection({ receivedAt: received, lastRejected: r })).toBeUndefined();
  });
});

describe("bearerToken (a human-input request's or event stream's Authorization header)", () => {
  it("reads the token whatever the scheme's case and the spaces around it; anything else is no token", () => {
    for (const header of ["Bearer tok-1", "bearer tok-1", "BEARER  tok-1 ", "Bearer\ttok-1"]) expect(bearerToken(header)).toBe("tok-1");
    for (const header of [undefined, "", "tok-1", "Basic tok-1", "Bearer", "Bearertok-1"]) expect(bearerToken(header)).toBe("");
  });
});
