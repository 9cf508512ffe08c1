// Where each workspace's installation of the app lives (OAuth distribution): Bolt's InstallationStore
// over the SlackInstallation table. One row per workspace, or per Enterprise Grid org for an org-wide
// install. Every token (bot, user, refresh) is sealed with the TokenCipher before it is written, bound
// to its row and field; the rest of Bolt's Installation object is kept as JSON without them.
import type { Installation, InstallationQuery, InstallationStore } from "@slack/bolt";
import { DecryptError, type TokenCipher } from "../../crypto/token-cipher.js";
import type { Logger } from "../../log/log.js";
import * as store from "../../store/installations.js";
import { SEALED_FIELDS as SEALED, type SealedField, type SlackInstallationRow } from "../../store/installations.js";
import type { Sql } from "../../store/sql.js";
import { type Clock, systemClock } from "../../usecases/ports.js";

/** "T:<team>" for a workspace install, "E:<enterprise>" for an org-wide one. */
export function installKeyOf(isEnterpriseInstall: boolean, teamId: string | undefined, enterpriseId: string | undefined): string | undefined {
  if (isEnterpriseInstall) return enterpriseId ? `E:${enterpriseId}` : undefined;
  return teamId ? `T:${teamId}` : undefined;
}

/** The bot side of an installation, as the Slack clients need it. */
export interface BotInstallation {
  teamId: string | null;
  enterpriseId: string | null;
  botToken: string;
}

export class InstallationNotFound extends Error {
  constructor(what: string) {
    super(`Crewline is not installed in ${what}`);
    this.name = "InstallationNotFound";
  }
}

/**
 * A workspace's stored tokens cannot be opened (sealed with a key no longer configured, or the row was
 * damaged): that workspace is cut off until it installs the app again; the others are not touched.
 * The message names the workspace and why, never the token.
 */
export class InstallationUnreadable extends Error {
  constructor(
    readonly installKey: string,
    reason: string,
  ) {
    super(`Crewline's installation in ${describeKey(installKey)} cannot be opened: ${reason}`);
    this.name = "InstallationUnreadable";
  }
}

/** How long a workspace's installation row, once read, is used before it is read again. */
const INSTALLATION_REREAD_MS = 10_000;

export interface DbInstallationStoreDeps {
  db: Sql;
  /** Seals every token before it is written and opens it when read (ENCRYPTION_KEY, ENCRYPTION_KEY_PREVIOUS). */
  cipher: TokenCipher;
  log: Logger;
  clock?: Clock;
}

export class DbInstallationStore implements InstallationStore {
  private readonly sql: Sql;
  /** Installations already reported unreadable by this process (each is logged as an error once). */
  private readonly reported = new Set<string>();
  /**
   * Rows read in the last INSTALLATION_REREAD_MS, by the keys asked for: every Slack request and every
   * outbox call asks, a burst of them in one workspace reads the row once. A write through this store
   * clears it; another replica's write (a reinstall, an uninstall) is seen here that much later.
   */
  private readonly recent = new Map<string, { row: SlackInstallationRow | null; at: number }>();

  private readonly clock: Clock;

  constructor(private readonly deps: DbInstallationStoreDeps) {
    this.sql = deps.db;
    this.clock = deps.clock ?? systemClock;
  }

  async storeInstallation(installation: Installation): Promise<void> {
    const enterpriseId = installation.enterprise?.id;
    const teamId = installation.team?.id;
    const isEnterpriseInstall = !!installation.isEnterpriseInstall;
    const installKey = installKeyOf(isEnterpriseInstall, teamId, enterpriseId);
    if (!installKey) throw new Error("an installation without a team or enterprise id cannot be stored");
    const seal = (field: SealedField, value: string | undefined) => (value ? this.deps.cipher.seal(value, `${installKey}:${field}`) : null);
    let data = withoutSecrets(installation);
    if (!installation.bot) {
      // A user-only install (no bot in it) keeps the workspace's bot as it was.
      const existing = await store.installationData(this.sql, installKey);
      const bot = existing && typeof existing === "object" && "bot" in existing ? existing.bot : undefined;
      if (bot && typeof bot === "object") data = { ...data, bot };
    }
    const row: store.InstallationWrite = {
      teamId: teamId ?? null,
      enterpriseId: enterpriseId ?? null,
      isEnterpriseInstall,
      appId: installation.appId ?? null,
      botId: installation.bot?.id ?? null,
      botUserId: installation.bot?.userId ?? null,
      userId: installation.user.id ?? null,
      botToken: seal("botToken", installation.bot?.token),
      botRefreshToken: seal("botRefreshToken", installation.bot?.refreshToken),
      userToken: seal("userToken", installation.user.token),
      userRefreshToken: seal("userRefreshToken", installation.user.refreshToken),
      data,
      installedAt: this.clock.now(),
    };
    const update = installation.bot ? row : (({ botId: _i, botUserId: _u, botToken: _t, botRefreshToken: _r, installedAt: _a, ...rest }) => rest)(row);
    await store.upsertInstallation(this.sql, installKey, row, update, this.clock.now());
    // Installed again, perhaps with scopes it lacked: Slack is asked to stream there again.
    if (installation.bot) {
      const of = isEnterpriseInstall && enterpriseId ? { enterpriseId } : teamId ? { teamId } : undefined;
      if (of) await store.forgetStreamingRefusals(this.sql, of);
    }
    this.recent.clear();
    this.deps.log.info("slack installation stored", { teamId, enterpriseId, isEnterpriseInstall });
  }

  async fetchInstallation(query: InstallationQuery<boolean>): Promise<Installation> {
    const row = await this.find(query.teamId, query.enterpriseId, query.isEnterpriseInstall);
    if (!row) throw new InstallationNotFound(describeQuery(query.teamId, query.enterpriseId));
    const data = row.data as unknown as Installation;
    const open = (field: SealedField) => (row[field] ? this.openField(row, field) : undefined);
    const installation: Installation = { ...data, user: { ...data.user } } as Installation;
    const userToken = open("userToken");
    const userRefreshToken = open("userRefreshToken");
    if (userToken) installation.user.token = userToken;
    if (userRefreshToken) installation.user.refreshToken = userRefreshToken;
    const botToken = open("botToken");
    if (data.bot && botToken) {
      const botRefreshToken = open("botRefreshToken");
      installation.bot = { ...data.bot, token: botToken, ...(botRefreshToken ? { refreshToken: botRefreshToken } : {}) };
    } else {
      delete installation.bot;
    }
    return installation;
  }

  async deleteInstallation(query: InstallationQuery<boolean>): Promise<void> {
    const key = installKeyOf(!!query.isEnterpriseInstall, query.teamId, query.enterpriseId);
    if (key) await store.deleteInstallation(this.sql, key);
    this.recent.clear();
  }

  /** The bot token for a workspace: its own install, else its Grid org's org-wide install. */
  async botFor(teamId: string, enterpriseId?: string | null, opts: { fresh?: boolean } = {}): Promise<BotInstallation> {
    const row = await this.find(teamId, enterpriseId ?? undefined, false, opts.fresh);
    // Without its org, a workspace served by an org-wide install is not found: say what names it.
    const hint = enterpriseId ? "" : " (a workspace an Enterprise Grid org-wide install serves is found with its org: a flow's enterprise:, FLOW_ENTERPRISE)";
    if (!row?.botToken) throw new InstallationNotFound(`${describeQuery(teamId, enterpriseId ?? undefined)}${hint}`);
    return { teamId: row.teamId, enterpriseId: row.enterpriseId, botToken: this.openField(row, "botToken") };
  }

  /** Whether the install these facts name got its bot token after `at` (a later install than an event sent at `at` was about). */
  async installedAfter(where: { teamId?: string; enterpriseId?: string; isEnterpriseInstall: boolean }, at: Date): Promise<boolean> {
    const key = installKeyOf(where.isEnterpriseInstall, where.teamId, where.enterpriseId);
    const installed = key ? await store.installedAt(this.sql, key) : null;
    return !!installed && installed.getTime() > at.getTime();
  }

  /** The teams of a Grid org that have an install of their own. */
  teamsInstalledOnTheirOwn(enterpriseId: string): Promise<string[]> {
    return store.teamsInstalledOnTheirOwn(this.sql, enterpriseId);
  }

  /** Forgets the user tokens of these users (tokens_revoked, oauth); the bot's stays. */
  async forgetUserTokens(key: { teamId?: string; enterpriseId?: string }, userIds: string[]): Promise<void> {
    if (userIds.length === 0) return;
    const keys = [key.teamId && `T:${key.teamId}`, key.enterpriseId && `E:${key.enterpriseId}`].filter((k): k is string => !!k);
    await store.forgetUserTokens(this.sql, keys, userIds, this.clock.now());
  }

  /**
   * Re-seals every token sealed with an earlier key (ENCRYPTION_KEY_PREVIOUS) with the current one.
   * Each update is conditional on the value read, so replicas doing it at once do no harm.
   */
  async resealStale(): Promise<number> {
    const rows = await store.allInstallations(this.sql);
    let resealed = 0;
    for (const row of rows) {
      const data: Partial<Record<SealedField, string>> = {};
      const where: Partial<Record<SealedField, string>> = {};
      try {
        for (const field of SEALED) {
          const sealed = row[field];
          if (!sealed || !this.deps.cipher.isStale(sealed)) continue;
          data[field] = this.deps.cipher.seal(this.openField(row, field), `${row.installKey}:${field}`);
          where[field] = sealed;
        }
      } catch (err) {
        // One workspace whose tokens cannot be opened fails alone (reported by openField); the others go on.
        if (err instanceof InstallationUnreadable) continue;
        throw err;
      }
      if (Object.keys(data).length === 0) continue;
      if (await store.replaceSealedTokens(this.sql, row.id, data, where, this.clock.now())) resealed++;
    }
    if (resealed) this.deps.log.info("slack tokens re-sealed with the current ENCRYPTION_KEY", { installations: resealed });
    return resealed;
  }

  /** Opens one sealed token of the row; a token that cannot be opened fails its workspace only, and says so once as an error. */
  private openField(row: SlackInstallationRow, field: SealedField): string {
    try {
      return this.deps.cipher.open(row[field]!, `${row.installKey}:${field}`);
    } catch (err) {
      if (!(err instanceof DecryptError)) throw err;
      const unreadable = new InstallationUnreadable(row.installKey, err.message);
      if (!this.reported.has(row.installKey)) {
        this.reported.add(row.installKey);
        this.deps.log.error(
          "a workspace's Slack tokens cannot be opened: Crewline cannot act in that workspace until it installs the app again (or the key it was sealed with is set in ENCRYPTION_KEY_PREVIOUS); other workspaces are not affected",
          {
            teamId: row.teamId,
            enterpriseId: row.enterpriseId,
            field,
            reason: err.message,
          },
        );
      }
      throw unreadable;
    }
  }

  private async find(teamId: string | undefined, enterpriseId: string | undefined, isEnterpriseInstall: boolean, fresh = false): Promise<SlackInstallationRow | null> {
    const keys: string[] = [];
    if (isEnterpriseInstall && enterpriseId) keys.push(`E:${enterpriseId}`);
    else {
      if (teamId) keys.push(`T:${teamId}`);
      if (enterpriseId) keys.push(`E:${enterpriseId}`);
    }
    if (keys.length === 0) return null;
    const asked = keys.join(" ");
    const now = this.clock.now().getTime();
    const known = this.recent.get(asked);
    if (known && !fresh && now - known.at < INSTALLATION_REREAD_MS) return known.row;
    const rows = await store.installationsByKeys(this.sql, keys);
    // The workspace's own install first, then its org's.
    const row = keys.map((k) => rows.find((r) => r.installKey === k)).find((r) => r) ?? null;
    this.recent.delete(asked);
    if (this.recent.size >= 10_000) this.recent.delete(this.recent.keys().next().value!);
    this.recent.set(asked, { row, at: now });
    return row;
  }
}

function describeKey(installKey: string): string {
  return installKey.startsWith("E:") ? `org ${installKey.slice(2)}` : `workspace ${installKey.slice(2)}`;
}

function describeQuery(teamId: string | undefined, enterpriseId: string | undefined): string {
  return [teamId && `workspace ${teamId}`, enterpriseId && `org ${enterpriseId}`].filter(Boolean).join(" / ") || "an unnamed workspace";
}

/** The Installation as JSON with every token (and the incoming webhook URL, which is one) removed. */
function withoutSecrets(installation: Installation): object {
  const copy = JSON.parse(JSON.stringify(installation)) as Record<string, any>;
  if (copy.bot) {
    delete copy.bot.token;
    delete copy.bot.refreshToken;
  }
  if (copy.user) {
    delete copy.user.token;
    delete copy.user.refreshToken;
  }
  if (copy.incomingWebhook) delete copy.incomingWebhook.url;
  return copy;
}
