import { describe, expect, it } from "vitest";
import { GiveUp, judgeFailure } from "./failures.js";

const platform = (error: string) => Object.assign(new Error(error), { code: "slack_webapi_platform_error", data: { ok: false, error } });

describe("outbox failures", () => {
  it("retries what may mend (5xx, network, rate limits after Retry-After) and gives up what cannot", () => {
    expect(judgeFailure(Object.assign(new Error("429"), { code: "slack_webapi_rate_limited_error", retryAfter: 7 }))).toEqual({
      kind: "retry",
      afterMs: 7000,
      reason: "rate limited",
      ambiguous: false,
    });
    expect(judgeFailure(Object.assign(new Error("503"), { code: "slack_webapi_http_error", statusCode: 503 }))).toMatchObject({ kind: "retry", ambiguous: true, outage: true });
    // A 4xx is Slack refusing the request, not an outage: what a person waits on is not retried forever for it.
    expect(judgeFailure(Object.assign(new Error("404"), { code: "slack_webapi_http_error", statusCode: 404 }))).not.toHaveProperty("outage");
    expect(judgeFailure(Object.assign(new Error("reset"), { code: "slack_webapi_request_error" }))).toMatchObject({ kind: "retry", ambiguous: true });
    // An error answer means Slack did not do it: no need to look for a message it may have left.
    expect(judgeFailure(platform("message_not_found"))).toMatchObject({ kind: "retry", ambiguous: false });
    expect(judgeFailure(platform("channel_not_found"))).toEqual({ kind: "give_up", reason: "channel_not_found" });
    expect(judgeFailure(platform("invalid_blocks"))).toMatchObject({ kind: "give_up" });
    expect(judgeFailure(new GiveUp("its review no longer exists"))).toMatchObject({ kind: "give_up" });
  });

  it("takes Slack saying it is down as a call that may have gone through: the next attempt looks before posting", () => {
    // Slack documents that these may follow a partial success: a post made whose answer is the error.
    for (const code of ["internal_error", "fatal_error", "service_unavailable", "request_timeout"])
      expect(judgeFailure(platform(code)), code).toEqual({ kind: "retry", reason: code, ambiguous: true, outage: true });
  });
});
