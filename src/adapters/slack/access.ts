// The Slack side of the access rules (usecases/access.ts): channel membership read from
// conversations.members with the client of the request's workspace (cached briefly, like user
// groups: usecases/membership-cache.ts), and the reviewer rules.
import type { WebClient } from "@slack/web-api";
import type { AccessPorts, ChannelMembers } from "../../usecases/access.js";
import { MembershipCache } from "../../usecases/membership-cache.js";
import type { Clock } from "../../usecases/ports.js";
import type { FeatureDeps } from "./deps.js";

const MEMBER_PAGES = 20;
/** How long a channel's member list is trusted: a member removed from the channel may still see its runs for this long. */
export const CHANNEL_MEMBERS_TTL_MS = 60_000;
/** At most this many channels' member lists are kept. */
export const CHANNEL_MEMBERS_CACHE_MAX = 500;

/** A channel's members as Slack lists them (up to 20 pages of 1000); throws when Slack cannot be read. */
async function readChannelMembers(channelId: string, client: WebClient): Promise<string[]> {
  const members: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MEMBER_PAGES; page++) {
    const res = await client.conversations.members({ channel: channelId, limit: 1000, ...(cursor ? { cursor } : {}) });
    members.push(...(res.members ?? []));
    cursor = res.response_metadata?.next_cursor || undefined;
    if (!cursor) break;
  }
  return members;
}

/** Channel member lists, shared by every access check (one per process). */
export type ChannelMembersCache = MembershipCache<WebClient>;

export function channelMembersCache(clock?: Clock, ttlMs = CHANNEL_MEMBERS_TTL_MS): ChannelMembersCache {
  return new MembershipCache(readChannelMembers, { ttlMs, maxEntries: CHANNEL_MEMBERS_CACHE_MAX, ...(clock ? { clock } : {}) });
}

/** Channel members read with the client given, through the cache (without one: read on every check). */
export function slackChannelMembers(client: WebClient, cache: ChannelMembersCache = channelMembersCache()): ChannelMembers {
  return { isMember: (channelId, userId) => cache.has(channelId, userId, client) };
}

/**
 * The ports of the access rules for one Slack request: its client reads the channel members, and its
 * workspace (Bolt's context: the team and Grid org Slack signed) is who the rules take the asker to be from.
 */
export function accessPorts(
  client: WebClient,
  deps: Pick<FeatureDeps, "reviewers" | "flows" | "log" | "channelMembers">,
  workspace: { teamId?: string | undefined; enterpriseId?: string | undefined },
): AccessPorts {
  return {
    workspace: { ...(workspace.teamId ? { teamId: workspace.teamId } : {}), ...(workspace.enterpriseId ? { enterpriseId: workspace.enterpriseId } : {}) },
    members: slackChannelMembers(client, deps.channelMembers),
    ...(deps.reviewers ? { reviewers: deps.reviewers } : {}),
    ...(deps.flows ? { flows: deps.flows } : {}),
    warn: (message, fields) => deps.log.warn(message, fields),
  };
}
