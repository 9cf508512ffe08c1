// The one seam through which background work (the lifecycle notifier, reminders, flow effects, user
// group lookups) gets a Slack client for the workspace it acts for. Bolt handlers already get the
// right `client` through authorize; code that runs outside a Slack request asks here, per call, with
// the team (and Grid org) stored on the row it acts on.
import { type WebAPICallResult, WebClient, type WebClientOptions } from "@slack/web-api";
import type { BotInstallation } from "./installations.js";

export interface SlackClients {
  forTeam(teamId: string, enterpriseId?: string | null): Promise<WebClient>;
}

/** Single-workspace mode (SLACK_BOT_TOKEN): always the app's own client. */
export function singleTokenClients(client: WebClient): SlackClients {
  return { forTeam: async () => client };
}

export interface BotTokenSource {
  /** `fresh`: read past any cache of the store's (a token Slack just refused may have been replaced a moment ago). */
  botFor(teamId: string, enterpriseId?: string | null, opts?: { fresh?: boolean }): Promise<BotInstallation>;
}

/** Slack's answers for a token that no longer works (revoked by an uninstall, or replaced by a reinstall). */
const STALE_TOKEN_ERRORS = new Set(["token_revoked", "invalid_auth", "account_inactive", "token_expired"]);

/**
 * A workspace's client that, when Slack says its token no longer works, asks the store once for the
 * current one and, if it changed (a reinstall on another replica within the cache's time), makes the
 * call again with it: a call refused for its token was not carried out, so it is safe to repeat.
 */
class InstalledClient extends WebClient {
  constructor(
    token: string,
    options: WebClientOptions,
    private readonly current: () => Promise<string | undefined>,
  ) {
    super(token, options);
  }

  override async apiCall(method: string, options: Record<string, unknown> = {}): Promise<WebAPICallResult> {
    try {
      return await super.apiCall(method, options);
    } catch (err) {
      const code = (err as { data?: { error?: string } }).data?.error;
      if (!code || !STALE_TOKEN_ERRORS.has(code)) throw err;
      const token = await this.current().catch(() => undefined);
      if (!token || token === (options.token ?? this.token)) throw err;
      return super.apiCall(method, { ...options, token });
    }
  }
}

/**
 * Distribution mode: each workspace's bot token from the installation store, with one WebClient per
 * workspace (same options as the app's: API URL, counted fetch, retry policy). A cached client is
 * re-checked against the store after `ttlMs`, so a reinstall or an uninstall on another replica is
 * seen within that time; `forget` drops it at once (this replica's uninstall). Within that time, a
 * call Slack refuses for its token asks the store again (InstalledClient).
 */
export interface InstalledClientsDeps {
  /** Each workspace's bot token (the installation store). */
  tokens: BotTokenSource;
  /** Options of every workspace's WebClient. */
  clientOptions: WebClientOptions;
  /** A cached client is re-checked against the store after this long (ms; default 60 s). */
  ttlMs?: number;
  /** The time in ms (default Date.now). */
  now?: () => number;
}

export class InstalledClients implements SlackClients {
  private readonly cache = new Map<string, { token: string; client: WebClient; checkedAt: number }>();
  private readonly inflight = new Map<string, Promise<WebClient>>();
  private readonly tokens: BotTokenSource;
  private readonly clientOptions: WebClientOptions;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(deps: InstalledClientsDeps) {
    this.tokens = deps.tokens;
    this.clientOptions = deps.clientOptions;
    this.ttlMs = deps.ttlMs ?? 60_000;
    this.now = deps.now ?? Date.now;
  }

  forTeam(teamId: string, enterpriseId?: string | null): Promise<WebClient> {
    const key = `${enterpriseId ?? ""}/${teamId}`;
    const cached = this.cache.get(key);
    if (cached && this.now() - cached.checkedAt < this.ttlMs) return Promise.resolve(cached.client);
    const running = this.inflight.get(key);
    if (running) return running;
    const lookup = this.tokens
      .botFor(teamId, enterpriseId)
      .then(({ botToken }) => this.remember(key, botToken, teamId, enterpriseId))
      .catch((err) => {
        this.cache.delete(key);
        throw err;
      })
      .finally(() => this.inflight.delete(key));
    this.inflight.set(key, lookup);
    return lookup;
  }

  private remember(key: string, botToken: string, teamId: string, enterpriseId?: string | null): WebClient {
    const cached = this.cache.get(key);
    const client = cached?.token === botToken ? cached.client : new InstalledClient(botToken, { ...this.clientOptions, teamId }, () => this.reread(key, teamId, enterpriseId));
    this.cache.set(key, { token: botToken, client, checkedAt: this.now() });
    return client;
  }

  /** The store's token now (the cache takes it for the next calls). */
  private async reread(key: string, teamId: string, enterpriseId?: string | null): Promise<string> {
    const { botToken } = await this.tokens.botFor(teamId, enterpriseId, { fresh: true });
    this.remember(key, botToken, teamId, enterpriseId);
    return botToken;
  }

  /** Drops the cached clients of a workspace (or of every workspace of a Grid org). */
  forget(match: { teamId?: string; enterpriseId?: string }): void {
    for (const key of [...this.cache.keys()]) {
      const [enterprise, team] = key.split("/");
      if ((match.teamId && team === match.teamId) || (match.enterpriseId && enterprise === match.enterpriseId)) this.cache.delete(key);
    }
  }
}
