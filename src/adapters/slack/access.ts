// The Slack side of the access rules (usecases/access.ts): channel membership read from
// conversations.members with the client of the request's workspace (cached briefly, like user
// groups: usecases/membership-cache.ts), and the reviewer rules.
import type { WebClient } from "@slack/web-api";
import { z } from "zod";
import type { Logger } from "../../log/log.js";
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

const teamId = z.string().min(1).max(255);
/** The parts of a request that say which workspace (and Grid org) the asker is of: a click's or form's, a command's, a message event's. */
const askerParts = z.object({
  user: z.object({ team_id: teamId.optional() }).optional().catch(undefined),
  team: z.object({ id: teamId }).nullish().catch(undefined),
  enterprise: z.object({ id: teamId }).nullish().catch(undefined),
  team_id: teamId.optional().catch(undefined),
  enterprise_id: teamId.optional().catch(undefined),
  event: z
    .object({ user_team: teamId.optional().catch(undefined), team: teamId.optional().catch(undefined) })
    .optional()
    .catch(undefined),
  is_ext_shared_channel: z.boolean().optional().catch(undefined),
});

/**
 * The workspace and Grid org the asker is of, as Slack signed it in the request. In a Slack Connect
 * channel that is their own organisation's, not the app's (Bolt's context names the installation the
 * request was authorized with): a click, form or shortcut names the clicker's team and org, a command
 * its user's, a message event its author's team (user_team, or team). An org is taken only where the request
 * names the asker's (an event's, in a channel not shared with another organisation), or the asker is
 * of the installation's own team.
 */
export function askerWorkspace(context: { teamId?: string | undefined; enterpriseId?: string | undefined }, body: unknown): { teamId?: string; enterpriseId?: string } {
  const parsed = askerParts.safeParse(body);
  const b = parsed.success ? parsed.data : {};
  const team = b.event?.user_team ?? b.event?.team ?? b.user?.team_id ?? b.team?.id ?? b.team_id ?? context.teamId;
  // An event's envelope names the installation's org, which is its author's only in a channel no
  // other organisation shares.
  const named = b.event ? (b.is_ext_shared_channel === false ? b.enterprise_id : undefined) : (b.enterprise?.id ?? b.enterprise_id);
  const enterprise = named ?? (team === context.teamId ? context.enterpriseId : undefined);
  return { ...(team ? { teamId: team } : {}), ...(enterprise ? { enterpriseId: enterprise } : {}) };
}

/**
 * Whether the asker is of the workspace (or Grid org) the app is installed in for this request: with
 * one bot token, the token's own (`installedIn`); with OAuth, the installation the request was
 * authorized with. A person of another organisation in a Slack Connect channel is not, and does not
 * start the installation's crews.
 */
export async function ofInstallation(
  deps: Pick<FeatureDeps, "installedIn">,
  context: { teamId?: string | undefined; enterpriseId?: string | undefined },
  body: unknown,
): Promise<boolean> {
  // Known from the start (the composition root asks at once); while Slack does not say, the form's
  // trigger (3 s) is not spent waiting: the request's own workspace stands for it.
  const known = deps.installedIn && (await Promise.race([deps.installedIn(), new Promise<undefined>((r) => setTimeout(() => r(undefined), INSTALLATION_WAIT_MS).unref())]));
  const installation = known ?? context;
  const asker = askerWorkspace(context, body);
  if (!installation.teamId || !asker.teamId || asker.teamId === installation.teamId) return true;
  return !!installation.enterpriseId && asker.enterpriseId === installation.enterpriseId;
}

/** How long a request waits to know the bot token's workspace (ofInstallation). */
const INSTALLATION_WAIT_MS = 500;

/** The workspace (and Grid org) one bot token is installed in, asked of auth.test once; undefined while Slack does not say. */
export function tokenWorkspace(client: WebClient, log: Logger): () => Promise<{ teamId?: string; enterpriseId?: string } | undefined> {
  let known: Promise<{ teamId?: string; enterpriseId?: string } | undefined> | undefined;
  return () =>
    (known ??= client.auth
      .test()
      .then((r) => ({ ...(r.team_id ? { teamId: r.team_id } : {}), ...(r.enterprise_id ? { enterpriseId: r.enterprise_id } : {}) }))
      .catch((err) => {
        known = undefined;
        log.warn("could not read the bot token's workspace (auth.test)", { err });
        return undefined;
      }));
}

/** What someone of another organisation hears when they try to start a crew here. */
export const NOT_THIS_ORGANISATION = "Crewline's crews here belong to another organisation's workspace: only its own people may start them.";

/**
 * The ports of the access rules for one Slack request: its client reads the channel members, and the
 * asker's workspace, read from the request (askerWorkspace), is who the rules take the asker to be from.
 */
export function accessPorts(
  client: WebClient,
  deps: Pick<FeatureDeps, "reviewers" | "flows" | "log" | "channelMembers">,
  context: { teamId?: string | undefined; enterpriseId?: string | undefined },
  body: unknown,
): AccessPorts {
  return {
    workspace: askerWorkspace(context, body),
    members: slackChannelMembers(client, deps.channelMembers),
    ...(deps.reviewers ? { reviewers: deps.reviewers } : {}),
    ...(deps.flows ? { flows: deps.flows } : {}),
    warn: (message, fields) => deps.log.warn(message, fields),
  };
}
