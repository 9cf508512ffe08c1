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
  teamId?: string;
  enterpriseId?: string;
  isEnterpriseInstall: boolean;
}

export function registerUninstall(app: App, deps: UninstallDeps): void {
  const removed = async (where: Where, why: string) => {
    const now = (deps.clock ?? systemClock).now();
    if (where.isEnterpriseInstall && where.enterpriseId) {
      // Workspaces of the org that have their own install keep working.
      const own = await deps.installations.teamsInstalledOnTheirOwn(where.enterpriseId);
      // The work stops first, then the install goes: nothing is left running without a token.
      // The workspace the event names is the org's too (its flow requests are found by team).
      const named = where.teamId ? [where.teamId] : [];
      const stopped = await stopWorkspace(deps.db, { enterpriseId: where.enterpriseId, exceptTeams: own, namedTeams: named }, now);
      if (stopped.runs > 0) deps.runsEnded?.();
      await deps.installations.deleteEnterprise(where.enterpriseId);
      deps.clients.forget({ enterpriseId: where.enterpriseId });
      deps.log.info("crewline removed from an org", { enterpriseId: where.enterpriseId, why, ...stopped });
    } else if (where.teamId) {
      const stopped = await stopWorkspace(deps.db, { teamId: where.teamId }, now);
      if (stopped.runs > 0) deps.runsEnded?.();
      await deps.installations.deleteTeam(where.teamId);
      deps.clients.forget({ teamId: where.teamId });
      deps.log.info("crewline removed from a workspace", { teamId: where.teamId, why, ...stopped });
    }
  };

  app.event("app_uninstalled", async ({ body, context }) => {
    await removed(whereOf(body, context), "app_uninstalled");
  });

  app.event("tokens_revoked", async ({ event, body, context }) => {
    const where = whereOf(body, context);
    if ((event.tokens.bot ?? []).length > 0) return void (await removed(where, "tokens_revoked"));
    await deps.installations.forgetUserTokens(where, event.tokens.oauth ?? []);
  });
}

function whereOf(body: unknown, context: { teamId?: string; enterpriseId?: string; isEnterpriseInstall?: boolean }): Where {
  const b = body as { team_id?: string; enterprise_id?: string; authorizations?: { is_enterprise_install?: boolean }[] };
  return {
    teamId: context.teamId ?? b.team_id,
    enterpriseId: context.enterpriseId ?? b.enterprise_id,
    isEnterpriseInstall: !!(context.isEnterpriseInstall ?? b.authorizations?.[0]?.is_enterprise_install),
  };
}
