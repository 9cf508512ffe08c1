import { describe, expect, it } from "vitest";
import { effectKey, GiveUp, judgeFailure, retryDelay } from "./effects.js";

const platform = (error: string) => Object.assign(new Error(error), { code: "slack_webapi_platform_error", data: { ok: false, error } });

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

  it("retries what may mend (5xx, network, rate limits after Retry-After) and gives up what cannot", () => {
    expect(judgeFailure(Object.assign(new Error("429"), { code: "slack_webapi_rate_limited_error", retryAfter: 7 }))).toEqual({
      kind: "retry",
      afterMs: 7000,
      reason: "rate limited",
      ambiguous: false,
    });
    expect(judgeFailure(Object.assign(new Error("503"), { code: "slack_webapi_http_error", statusCode: 503 }))).toMatchObject({ kind: "retry", ambiguous: true });
    expect(judgeFailure(Object.assign(new Error("reset"), { code: "slack_webapi_request_error" }))).toMatchObject({ kind: "retry", ambiguous: true });
    // An error answer means Slack did not do it: no need to look for a message it may have left.
    expect(judgeFailure(platform("message_not_found"))).toMatchObject({ kind: "retry", ambiguous: false });
    expect(judgeFailure(platform("channel_not_found"))).toEqual({ kind: "give_up", reason: "channel_not_found" });
    expect(judgeFailure(platform("invalid_blocks"))).toMatchObject({ kind: "give_up" });
    expect(judgeFailure(new GiveUp("its review no longer exists"))).toMatchObject({ kind: "give_up" });
  });
});
