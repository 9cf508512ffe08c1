// app_uninstalled and tokens_revoked (OAuth distribution): the workspace's installation is deleted,
// its cached client dropped, and its unfinished work stopped (src/usecases/workspaces.ts). Bolt
// skips authorize for these two events, so they arrive even though the tokens no longer work.
import type { App } from "@slack/bolt";
import type { Logger } from "../../log/log.js";
import type { Sql } from "../../store/sql.js";
import { type Clock, systemClock } from "../../usecases/ports.js";
import { stopWorkspace } from "../../usecases/workspaces.js";
import type { InstalledClients } from "./clients.js";
import type { DbInstallationStore } from "./installations.js";

export interface UninstallDeps {
  db: Sql;
  installations: DbInstallationStore;
  clients: Pick<InstalledClients, "forget">;
  /** Told when an uninstall ended runs, so the callback intake stops answering for them at once. */
  runsEnded?: () => void;
  log: Logger;
  clock?: Clock;
}

interface Where {
  teamId: string | undefined;
  enterpriseId: string | undefined;
  isEnterpriseInstall: boolean;
}

export function registerUninstall(app: App, deps: UninstallDeps): void {
  const removed = async (where: Where, why: string, body: unknown) => {
    // An org-wide install is removed as its org's, any other as its workspace's.
    const key: { enterpriseId: string } | { teamId: string } | undefined =
      where.isEnterpriseInstall && where.enterpriseId ? { enterpriseId: where.enterpriseId } : where.teamId ? { teamId: where.teamId } : undefined;
    if (!key) return;
    // Slack delivers an event again for minutes when its first delivery was not answered (a deploy, an
    // outage): one sent before the workspace installed the app again is not about this install.
    const sentAt = sentAtOf(body);
    const asInstalled = { ...where, isEnterpriseInstall: "enterpriseId" in key };
    if (sentAt && (await deps.installations.installedAfter(asInstalled, sentAt))) {
      deps.log.info("an uninstall sent before the app was installed again is ignored", { ...key, why });
      return;
    }
    const now = (deps.clock ?? systemClock).now();
    const match =
      "enterpriseId" in key
        ? {
            ...key,
            // Workspaces of the org that have their own install keep working.
            exceptTeams: await deps.installations.teamsInstalledOnTheirOwn(key.enterpriseId),
            // The workspace the event names is the org's too (its flow requests are found by team).
            namedTeams: where.teamId ? [where.teamId] : [],
          }
        : key;
    // The work stops first, then the install goes: nothing is left running without a token.
    const stopped = await stopWorkspace(deps.db, match, now);
    if (stopped.runs > 0) deps.runsEnded?.();
    await deps.installations.deleteInstallation(asInstalled);
    deps.clients.forget(key);
    deps.log.info(`crewline removed from ${"enterpriseId" in key ? "an org" : "a workspace"}`, { ...key, why, ...stopped });
  };

  app.event("app_uninstalled", async ({ body, context }) => {
    await removed(whereOf(body, context), "app_uninstalled", body);
  });

  app.event("tokens_revoked", async ({ event, body, context }) => {
    const where = whereOf(body, context);
    if ((event.tokens.bot ?? []).length > 0) return void (await removed(where, "tokens_revoked", body));
    await deps.installations.forgetUserTokens(where, event.tokens.oauth ?? []);
  });
}

/** When Slack sent the event (its `event_time`, whole seconds), rounded up: an install in that same second does not outdate it. */
function sentAtOf(body: unknown): Date | undefined {
  const t = (body as { event_time?: unknown }).event_time;
  return typeof t === "number" && Number.isFinite(t) && t > 0 ? new Date((Math.floor(t) + 1) * 1000) : undefined;
}

function whereOf(body: unknown, context: { teamId?: string; enterpriseId?: string; isEnterpriseInstall?: boolean }): Where {
  const b = body as { team_id?: string; enterprise_id?: string; authorizations?: { is_enterprise_install?: boolean }[] };
  return {
    teamId: context.teamId ?? b.team_id,
    enterpriseId: context.enterpriseId ?? b.enterprise_id,
    isEnterpriseInstall: !!(context.isEnterpriseInstall ?? b.authorizations?.[0]?.is_enterprise_install),
  };
}
