// The Slack side of the access rules (usecases/access.ts): channel membership read from
// conversations.members with the client of the request's workspace (cached briefly, like user
// groups: usecases/membership-cache.ts), people's facts from users.info, and the reviewer rules.
import type { WebClient } from "@slack/web-api";
import { z } from "zod";
import type { Logger } from "../../log/log.js";
import { type AccessPorts, type ChannelMembers, fromItsWorkspace, type People } from "../../usecases/access.js";
import { MembershipCache } from "../../usecases/membership-cache.js";
import type { Clock } from "../../usecases/ports.js";
import type { FeatureDeps, TokenWorkspace, Workspace } from "./deps.js";

const MEMBER_PAGES = 20;
/** How long a channel's member list is trusted: a member removed from the channel may still see its runs for this long. */
export const CHANNEL_MEMBERS_TTL_MS = 60_000;
/** At most this many channels' member lists are kept. */
const CHANNEL_MEMBERS_CACHE_MAX = 500;

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

/** The parts of users.info's answer a reassignment reads. */
const userInfo = z.object({
  user: z.object({
    is_bot: z.boolean().optional(),
    deleted: z.boolean().optional(),
    team_id: teamId,
    enterprise_user: z.object({ enterprise_id: teamId.optional() }).optional().catch(undefined),
  }),
});

/**
 * People as users.info tells them, asked with the client of the request's workspace (which sees a
 * Slack Connect guest's own team). Not cached: only a reassignment asks, once per submission (Tier 4).
 */
export function slackPeople(client: WebClient): People {
  return {
    async about(userId) {
      const { user } = userInfo.parse(await client.users.info({ user: userId }));
      // In an Enterprise Grid org, team_id may be the org's own id (E…): their org.
      const enterpriseId = user.enterprise_user?.enterprise_id ?? (user.team_id.startsWith("E") ? user.team_id : undefined);
      return { isBot: user.is_bot ?? false, deleted: user.deleted ?? false, teamId: user.team_id, ...(enterpriseId ? { enterpriseId } : {}) };
    },
  };
}

/** The parts of a request that say which workspace (and Grid org) the asker is of: a click's or form's, a command's, a message event's. */
const askerParts = z.object({
  user: z.object({ team_id: teamId.optional() }).optional().catch(undefined),
  team: z
    .object({ id: teamId, enterprise_id: teamId.optional().catch(undefined) })
    .nullish()
    .catch(undefined),
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
  // In an Enterprise Grid org, a user's team_id may be the org's id (E…): their org, not a workspace.
  const userTeam = b.user?.team_id;
  const userOrg = userTeam?.startsWith("E") ? userTeam : undefined;
  const team = b.event?.user_team ?? b.event?.team ?? (userOrg ? undefined : userTeam) ?? b.team?.id ?? b.team_id ?? context.teamId;
  // An event's envelope names the installation's org, which is its author's only in a channel no
  // other organisation shares.
  const named = b.event ? (b.is_ext_shared_channel === false ? b.enterprise_id : undefined) : (b.enterprise?.id ?? b.team?.enterprise_id ?? userOrg ?? b.enterprise_id);
  const enterprise = named ?? (team === context.teamId ? context.enterpriseId : undefined);
  return { ...(team ? { teamId: team } : {}), ...(enterprise ? { enterpriseId: enterprise } : {}) };
}

/**
 * Whether the asker is of the workspace (or Grid org) the app is installed in for this request: with
 * one bot token, the token's own (`installation`, asked of auth.test at start); with OAuth, the
 * installation the request was authorized with. A person of another organisation in a Slack Connect
 * channel is not, and does not start the installation's crews. Undefined: with one bot token, its
 * workspace is not known yet (Slack has not answered auth.test); the request's context names the
 * asker's own team there, so it cannot stand for it.
 */
export async function ofInstallation(deps: Pick<FeatureDeps, "installation">, context: Workspace, body: unknown): Promise<boolean | undefined> {
  const installation = deps.installation ? await deps.installation.within(INSTALLATION_WAIT_MS) : context;
  if (!installation) return undefined;
  return fromItsWorkspace({ workspace: askerWorkspace(context, body) }, { teamId: installation.teamId ?? null, enterpriseId: installation.enterpriseId ?? null });
}

/** How long a request waits to know the bot token's workspace (ofInstallation); a form's trigger lives 3 s. */
const INSTALLATION_WAIT_MS = 1_000;

export function tokenWorkspace(client: WebClient, log: Logger): TokenWorkspace {
  let known: Workspace | undefined;
  let asking: Promise<Workspace | undefined> | undefined;
  const ask = () =>
    (asking ??= client.auth
      .test()
      .then((r) => (known = { ...(r.team_id ? { teamId: r.team_id } : {}), ...(r.enterprise_id ? { enterpriseId: r.enterprise_id } : {}) }))
      .catch((err) => {
        asking = undefined;
        log.warn("could not read the bot token's workspace (auth.test)", { err });
        return undefined;
      }));
  void ask();
  return {
    known: () => known,
    within: async (ms) => known ?? (await Promise.race([ask(), new Promise<undefined>((r) => setTimeout(() => r(undefined), ms).unref())])),
  };
}

/** What someone of another organisation hears when they try to start a crew here. */
export const NOT_THIS_ORGANISATION = "Crewline's crews here belong to another organisation's workspace: only its own people may start them.";
/** What someone hears when the bot token's workspace is not known yet (just after a start, or Slack not answering). */
export const INSTALLATION_UNKNOWN = "Crewline could not tell yet which workspace it is installed in, so it cannot start a crew for you. Please try again in a moment.";

/**
 * The ports of the access rules for one Slack request: its client reads the channel members and
 * people's facts, and the asker's workspace, read from the request (askerWorkspace), is who the rules
 * take the asker to be from.
 */
export function accessPorts(
  client: WebClient,
  deps: Pick<FeatureDeps, "reviewers" | "flows" | "log" | "channelMembers" | "installation">,
  context: { teamId?: string | undefined; enterpriseId?: string | undefined },
  body: unknown,
): AccessPorts {
  const installation = deps.installation?.known();
  return {
    workspace: askerWorkspace(context, body),
    ...(installation ? { installation } : {}),
    members: slackChannelMembers(client, deps.channelMembers),
    people: slackPeople(client),
    ...(deps.reviewers ? { reviewers: deps.reviewers } : {}),
    ...(deps.flows ? { flows: deps.flows } : {}),
    warn: (message, fields) => deps.log.warn(message, fields),
  };
}
