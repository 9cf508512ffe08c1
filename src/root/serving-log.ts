// What the composition root logs once Crewline serves: where and how, which crews an installable bot
// offers, and each flow's webhook URL.
import type { FlowHook } from "../adapters/slack/deps.js";
import type { AppConfig, CrewConfig } from "../config/config.js";
import type { Logger } from "../log/log.js";
import type { Database } from "../store/db/database.js";

export interface ServingLogOptions {
  log: Logger;
  config: AppConfig;
  /** The HTTP port, and the metrics port when METRICS_PORT is set. */
  port: number;
  metricsPort?: number;
  database: Pick<Database, "kind">;
  crews: CrewConfig[];
  flowHooks: FlowHook[];
}

export function logServing(o: ServingLogOptions): void {
  const { log, config, metricsPort, flowHooks } = o;
  const oauth = config.slack.oauth;
  log.info("crewline is serving", {
    port: o.port,
    mode: config.slack.appToken ? "socket" : oauth ? "http, installable (GET /slack/install)" : "http",
    database: o.database.kind,
    crews: o.crews.map((c) => c.name),
    metrics:
      metricsPort !== undefined
        ? `GET /metrics on ${config.metricsHost ?? "127.0.0.1"}:${metricsPort}`
        : config.metricsToken
          ? "GET /metrics with METRICS_TOKEN"
          : "off (set METRICS_TOKEN or METRICS_PORT)",
  });
  if (oauth) logCrewOffers(log, o.crews);
  // Installed in many workspaces, a flow is listed (help, App Home) only in its own workspace.
  const homeless = flowHooks.filter((hook) => !hook.team).map((hook) => hook.name);
  if (oauth && homeless.length) log.warn("flows with no workspace (team:) are listed in no workspace's /crew help or App Home", { flows: homeless });
  // The URL to paste into each flow's dashboard (Settings → Human in the Loop); never its secret.
  for (const hook of flowHooks)
    log.info("flow feedback webhook", { flow: hook.name, url: hook.webhookUrl, ...(config.publicUrl ? {} : { note: "set PUBLIC_URL to the externally reachable base URL" }) });
}

/**
 * Installable by anyone (OAuth): which crews every workspace may use (teams: ["*"]), and which none
 * may (no teams: in CREWS_FILE, or CREW_TEAMS, is offered to no workspace in this mode).
 */
function logCrewOffers(log: Logger, crews: CrewConfig[]): void {
  const open = crews.filter((c) => !c.teams).map((c) => c.name);
  const none = crews.filter((c) => c.teams?.length === 0).map((c) => c.name);
  if (open.length) log.warn('crews open to every workspace that installs Crewline (teams: ["*"]): each may start them', { crews: open });
  if (none.length)
    log.warn(
      'crews offered to no workspace: installable by anyone, Crewline offers a crew only to the workspaces its teams: lists (CREW_TEAMS for the one crew), or to all with teams: ["*"]',
      {
        crews: none,
      },
    );
}
