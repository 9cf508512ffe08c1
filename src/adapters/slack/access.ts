// The Slack side of the access rules (usecases/access.ts): channel membership read from
// conversations.members with the client of the request's workspace, and the reviewer rules.
import type { WebClient } from "@slack/web-api";
import type { AccessPorts, ChannelMembers } from "../../usecases/access.js";
import type { FeatureDeps } from "./deps.js";

const MEMBER_PAGES = 20;

/** Channel members as Slack lists them (up to 20 pages of 1000); throws when Slack cannot be read. */
export function slackChannelMembers(client: WebClient): ChannelMembers {
  return {
    async isMember(channelId, userId) {
      let cursor: string | undefined;
      for (let page = 0; page < MEMBER_PAGES; page++) {
        const res = await client.conversations.members({ channel: channelId, limit: 1000, ...(cursor ? { cursor } : {}) });
        if (res.members?.includes(userId)) return true;
        cursor = res.response_metadata?.next_cursor || undefined;
        if (!cursor) return false;
      }
      return false;
    },
  };
}

/** The ports of the access rules for one Slack request (its client reads the channel members). */
export function accessPorts(client: WebClient, deps: Pick<FeatureDeps, "reviewers" | "flows" | "log">): AccessPorts {
  return {
    members: slackChannelMembers(client),
    ...(deps.reviewers ? { reviewers: deps.reviewers } : {}),
    ...(deps.flows ? { flows: deps.flows } : {}),
    warn: (message, fields) => deps.log.warn(message, fields),
  };
}
