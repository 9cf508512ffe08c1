import type { WebClient } from "@slack/web-api";
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../../log/log.js";
import { SlackFlowEffects } from "./slack-effects.js";

const platform = (error: string) => Object.assign(new Error(error), { code: "slack_webapi_platform_error", data: { ok: false, error } });

/** The flow's Slack side with a client whose users.lookupByEmail answers `answer` (thrown when an Error). */
function effects(answer: unknown) {
  const client = {
    users: {
      lookupByEmail: async () => {
        if (answer instanceof Error) throw answer;
        return answer;
      },
    },
  } as unknown as WebClient;
  return new SlackFlowEffects({ forTeam: async () => client }, silentLogger);
}

const lookUp = (answer: unknown) => effects(answer).lookupByEmail("dan@example.com", { teamId: "T0TEAM", enterpriseId: null });

describe("SlackFlowEffects.lookupByEmail", () => {
  it("names the person found, and nobody when Slack says there is none or refuses the look-up for good", async () => {
    await expect(lookUp({ ok: true, user: { id: "U0DAN" } })).resolves.toBe("U0DAN");
    await expect(lookUp(platform("users_not_found"))).resolves.toBeUndefined();
    // No retry mends a missing scope: the request is posted without its assignee rather than never.
    await expect(lookUp(platform("missing_scope"))).resolves.toBeUndefined();
  });

  it("throws what a retry may mend (a rate limit, Slack down, no answer), so the outbox looks again before posting", async () => {
    for (const err of [
      Object.assign(new Error("429"), { code: "slack_webapi_rate_limited_error", retryAfter: 1 }),
      platform("internal_error"),
      Object.assign(new Error("503"), { code: "slack_webapi_http_error", statusCode: 503 }),
      Object.assign(new Error("reset"), { code: "slack_webapi_request_error" }),
    ])
      await expect(lookUp(err), err.message).rejects.toBe(err);
  });
});
