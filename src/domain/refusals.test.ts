import { describe, expect, it } from "vitest";
import { isChannelRefusal, reviewChannel, runPlace } from "./refusals.js";

describe("channel refusals", () => {
  it("counts the errors that refuse the channel itself, not the token, the scope or the message", () => {
    for (const code of ["is_archived", "not_in_channel", "channel_not_found", "restricted_action", "team_access_not_granted"]) expect(isChannelRefusal(code)).toBe(true);
    for (const code of ["token_revoked", "invalid_auth", "missing_scope", "msg_too_long", "invalid_blocks", "ratelimited", "cant_update_message"])
      expect(isChannelRefusal(code)).toBe(false);
  });

  it("a run posts in its thread until it moved, then at the top of the direct message", () => {
    expect(runPlace({ channelId: "C1", threadTs: "1.0", movedTo: null })).toEqual({ channel: "C1", threadTs: "1.0", moved: false });
    expect(runPlace({ channelId: "C1", threadTs: "1.0", movedTo: "D1" })).toEqual({ channel: "D1", threadTs: null, moved: true });
  });

  it("a review's message is in its own channel when it has one, else its run's", () => {
    expect(reviewChannel({ channelId: null }, { channelId: "C1" })).toBe("C1");
    expect(reviewChannel({ channelId: "D1" }, { channelId: "C1" })).toBe("D1");
  });
});
