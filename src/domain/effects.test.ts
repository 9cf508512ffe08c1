import { describe, expect, it } from "vitest";
import { effectKey, retryDelay } from "./effects.js";

describe("outbox effects", () => {
  it("keys one-time effects per subject, and per part where one subject has several", () => {
    expect(effectKey({ kind: "review.post", subjectId: "r1" })).toBe("review.post:r1");
    expect(effectKey({ kind: "review.reminder", subjectId: "r1", part: 2 })).toBe("review.reminder:r1:2");
  });

  it("backs off doubling from the minimum to the maximum, with at most 20% jitter", () => {
    expect(retryDelay(1, 1000, 300_000, () => 0)).toBe(1000);
    expect(retryDelay(4, 1000, 300_000, () => 0)).toBe(8000);
    expect(retryDelay(30, 1000, 300_000, () => 0)).toBe(300_000);
    expect(retryDelay(2, 1000, 300_000, () => 1)).toBe(2400);
  });
});
