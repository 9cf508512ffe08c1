// The composition root's Slack Web API clients: their options, the installation store (OAuth), and the
// three client sets: the request path's, its one-shot posts', and the outbox's.
import { type Logger as BoltLogger, webApi } from "@slack/bolt";
import { tokenWorkspace } from "../adapters/slack/access.js";
import { InstalledClients, type SlackClients, singleTokenClients } from "../adapters/slack/clients.js";
import type { TokenWorkspace } from "../adapters/slack/deps.js";
import { DbInstallationStore } from "../adapters/slack/installations.js";
import type { AppConfig } from "../config/config.js";
import { TokenCipher } from "../crypto/token-cipher.js";
import type { Logger } from "../log/log.js";
import { DEFAULT_OUTBOX_OPTIONS, effectCallTimeout } from "../outbox/worker.js";
import type { Sql } from "../store/sql.js";
import type { Clock, TeamRef } from "../usecases/ports.js";
import { boltLogger } from "./slack-app.js";

/** The Web API retry policy of the clients that answer Slack requests: three tries within about 3 s. */
export const REQUEST_RETRIES = { retries: 2, factor: 2, minTimeout: 500, maxTimeout: 2000 };
/** A Web API call made while answering a request gives up after this long. */
const REQUEST_TIMEOUT_MS = 10_000;

export interface SlackClientsOptions {
  config: AppConfig;
  db: Sql;
  log: Logger;
  clock: Clock;
  /** What every Web API request goes through (the figures count it). */
  fetch: webApi.WebClientOptions["fetch"];
  /** Web API retry policy of the request path (tests shorten it). */
  retries?: { retries: number; factor?: number; minTimeout?: number; maxTimeout?: number };
  /** How long a Web API call made while answering a request may take (tests shorten it). */
  timeoutMs?: number;
  /** The outbox's lease as asked (tests); CLAIM_STALE_MS otherwise. */
  outboxLeaseMs?: number;
}

export interface CrewlineSlackClients {
  /** The request path's client options (Bolt's per-request clients copy them) and Bolt's logger. */
  clientOptions: webApi.WebClientOptions;
  logger: BoltLogger;
  /** Each workspace's installation (OAuth distribution only). */
  installations?: DbInstallationStore;
  /** The Slack client of each workspace, for work outside a Slack request (one client unless installed by OAuth). */
  clients: SlackClients;
  /** The same without retries of their own, for posts that must not show twice. */
  oneShot: SlackClients;
  /** The outbox's: no retries of their own, rate limits as errors, each call given up within the lease. */
  effects: SlackClients;
  /** The outbox's lease, lengthened to hold its calls (effectCallTimeout). */
  outboxLeaseMs: number;
  /** How long one of the outbox's Web API calls may take before it is given up. */
  outboxCallTimeoutMs: number;
  /** With one bot token, its workspace (asked of auth.test at start). */
  installation?: TokenWorkspace;
  /** A user group's members, looked up in its workspace. */
  usergroupMembers: (usergroup: string, team: TeamRef | undefined) => Promise<string[]>;
  /** Drops an uninstalled workspace from every client cache at once (request path, its one-shot posts, outbox). */
  forget(match: { teamId?: string; enterpriseId?: string }): void;
}

export function createSlackClients(o: SlackClientsOptions): CrewlineSlackClients {
  const { config, log } = o;
  const clientOptions: webApi.WebClientOptions = {
    // Every Web API request (Bolt's per-request clients too, which copy these options) is counted.
    fetch: o.fetch,
    ...(config.slack.apiUrl ? { slackApiUrl: config.slack.apiUrl } : {}),
    // A person waits on most of these calls (a form to open, a run to announce, a private answer):
    // retried briefly, never for the SDK's default half hour, which held a kickoff through an outage.
    retryConfig: o.retries ?? REQUEST_RETRIES,
    timeout: o.timeoutMs ?? REQUEST_TIMEOUT_MS,
  };
  const logger = boltLogger(log);
  // Distribution: tokens come from the installation store (sealed with ENCRYPTION_KEY), per workspace.
  const oauth = config.slack.oauth;
  if (oauth && !config.encryption) throw new Error("OAuth distribution needs ENCRYPTION_KEY (config.encryption)");
  const installations =
    oauth && config.encryption ? new DbInstallationStore({ db: o.db, cipher: new TokenCipher(config.encryption.key, config.encryption.previous), log, clock: o.clock }) : undefined;
  const installedClients = installations ? new InstalledClients({ tokens: installations, clientOptions }) : undefined;
  // One bot token: the client Bolt's app.client would be (its options, its logger).
  const tokenClient = installedClients ? undefined : new webApi.WebClient(config.slack.botToken, { ...clientOptions, logger });
  // With one bot token, its workspace (who may start its crews: adapters/slack/access.ts), asked now.
  const installation = tokenClient ? tokenWorkspace(tokenClient, log) : undefined;
  const clients: SlackClients = installedClients ?? singleTokenClients(tokenClient!);
  // The same, without retries of their own: a post that may have reached Slack (a 5xx, no answer) is
  // looked for before it is sent again, where retrying blindly would show it twice (the run's announcement).
  const oneShotOptions = { ...clientOptions, retryConfig: { retries: 0 }, rejectRateLimitedCalls: true, logger };
  const installedOneShotClients = installations ? new InstalledClients({ tokens: installations, clientOptions: oneShotOptions }) : undefined;
  const oneShot: SlackClients = installedOneShotClients ?? singleTokenClients(new webApi.WebClient(config.slack.botToken, oneShotOptions));
  // The outbox's own Web API clients never retry by themselves (the outbox does, with its backoff and
  // lease), answer rate limits as errors with Retry-After, and give up a call well within the lease.
  // CLAIM_STALE_MS: how long a replica's claim on a Slack effect holds before another takes it over.
  // An effect makes up to four calls (a look-up's two pages after an interrupted attempt, a permalink,
  // the post; a file's three), each given up after the time-out: all of them end within four fifths of
  // the claim, so no other replica takes the effect over, and posts it again, while it still calls Slack
  // (60 s: 12 s a call). A lease too short for calls of a second is lengthened to hold them (effectCallTimeout).
  const { leaseMs, timeoutMs: effectCallTimeoutMs } = effectCallTimeout(o.outboxLeaseMs ?? config.polling?.claimStaleMs ?? DEFAULT_OUTBOX_OPTIONS.leaseMs);
  const effectsClientOptions = {
    ...clientOptions,
    retryConfig: { retries: 0 },
    rejectRateLimitedCalls: true,
    timeout: effectCallTimeoutMs,
    logger,
  };
  const installedEffectClients = installations ? new InstalledClients({ tokens: installations, clientOptions: effectsClientOptions }) : undefined;
  const effects: SlackClients = installedEffectClients ?? singleTokenClients(new webApi.WebClient(config.slack.botToken, effectsClientOptions));
  // User groups belong to a workspace: looked up with its token (single-workspace mode: the one client).
  const usergroupMembers = async (usergroup: string, team: TeamRef | undefined) => {
    if (oauth && !team) throw new Error("no workspace known for this user group lookup");
    const client = await clients.forTeam(team?.teamId ?? "", team?.enterpriseId);
    return (await client.usergroups.users.list({ usergroup })).users ?? [];
  };
  return {
    clientOptions,
    logger,
    ...(installations ? { installations } : {}),
    clients,
    oneShot,
    effects,
    outboxLeaseMs: leaseMs,
    outboxCallTimeoutMs: effectCallTimeoutMs,
    ...(installation ? { installation } : {}),
    usergroupMembers,
    forget: (match) => [installedClients, installedOneShotClients, installedEffectClients].forEach((c) => c?.forget(match)),
  };
}
