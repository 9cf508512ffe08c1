// `/crew …`: opens the kickoff modal, or answers help, status and list.
import type { App } from "@slack/bolt";
import { z } from "zod";
import { sanitizeText } from "../../../text/sanitize.js";
import { type RunStatus, statusFor } from "../../../usecases/status-for.js";
import { accessPorts, INSTALLATION_UNKNOWN, NOT_THIS_ORGANISATION, ofInstallation } from "../access.js";
import { escapeMrkdwn, fitMarkdown, fitMrkdwn, helpText, unknownKickoffText, userMention } from "../blocks/index.js";
import { type FeatureDeps, flowHooksFor } from "../deps.js";
import { announcementFor } from "../notifier.js";
import { type AuditFormat, auditReply } from "../review/audit-export.js";
import { stopCommandReply } from "../review/stop.js";
import { FORM_NOT_OPENED, openKickoffModal, WORKSPACE_UNKNOWN } from "./modal.js";

export type CrewCommand =
  | { kind: "open"; crewName?: string }
  | { kind: "help" }
  | { kind: "status"; kickoffId: string }
  | { kind: "list" }
  | { kind: "audit"; kickoffId: string; format: AuditFormat }
  | { kind: "stop"; kickoffId: string }
  /** `/crew stop`, `audit` or `status` without what it takes after it (`format`: an audit format it does not write). */
  | { kind: "usage"; of: "stop" | "audit" | "status"; format?: string };

function parseCrewCommand(text: string): CrewCommand {
  const [word = "", ...rest] = text.trim().split(/\s+/);
  const arg = rest.join(" ").trim();
  switch (word.toLowerCase()) {
    case "":
      return { kind: "open" };
    case "help":
    case "?":
      return { kind: "help" };
    case "status":
      return arg ? { kind: "status", kickoffId: arg } : { kind: "usage", of: "status" };
    case "list":
      return { kind: "list" };
    case "stop": {
      // Exactly one word: a kickoff id has no spaces (and a long one is simply unknown).
      const words = arg.split(/\s+/).filter(Boolean);
      return words.length === 1 ? { kind: "stop", kickoffId: words[0]! } : { kind: "usage", of: "stop" };
    }
    case "audit": {
      const [kickoffId, format = "both", ...more] = arg.split(/\s+/).filter(Boolean);
      const fmt = format.toLowerCase();
      if (!kickoffId || more.length) return { kind: "usage", of: "audit" };
      if (!["both", "csv", "json"].includes(fmt)) return { kind: "usage", of: "audit", format };
      return { kind: "audit", kickoffId, format: fmt as AuditFormat };
    }
    default:
      return { kind: "open", crewName: text.trim() };
  }
}

const commandPayload = z.object({
  text: z.string().default(""),
  command: z.string(),
  user_id: z.string(),
  channel_id: z.string(),
  team_id: z.string().default(""),
  trigger_id: z.string(),
});

export function registerCrewCommand(app: App, deps: FeatureDeps, commandName = "/crew"): void {
  app.command(commandName, async ({ command, ack, client, respond, context }) => {
    const payload = commandPayload.parse(command);
    const parsed = parseCrewCommand(sanitizeText(payload.text));
    const team = payload.team_id || undefined;
    const say = (text: string) => ack({ response_type: "ephemeral", text });
    if (parsed.kind === "help") {
      const crews = deps.crews.usableBy(team).map((c) => c.name);
      return void (await say(helpText(commandName, crews, flowHooksFor(deps, team))));
    }
    if (parsed.kind === "usage") return void (await say(usageText(parsed, commandName)));
    if (parsed.kind === "open") {
      if (deps.crews.all().length === 0) {
        // A flow-only set-up: there is nothing to start.
        const flows = flowHooksFor(deps, team).length ? "It answers flows' feedback requests; " : "";
        return void (await say(`No crew is configured in Crewline, so there is nothing to start here. ${flows}\`${commandName} help\` says more.`));
      }
      // Before the crews' workspaces: a guest of another organisation is not told to have theirs added.
      const own = await ofInstallation(deps, context, command);
      if (own !== true) return void (await say(own === false ? NOT_THIS_ORGANISATION : INSTALLATION_UNKNOWN));
      // A run is stored with its workspace, whatever goes by workspace later (its token, App Home, an uninstall).
      if (!team) return void (await say(WORKSPACE_UNKNOWN));
      // Crews are limited to other workspaces (teams: in CREWS_FILE).
      if (deps.crews.usableBy(team).length === 0)
        return void (await say(
          "No crew may be used in this workspace: Crewline's crews are limited to other workspaces. Ask whoever set up Crewline to add this workspace to a crew's `teams`.",
        ));
    }
    await ack();
    if (parsed.kind === "open") {
      const opened = await openKickoffModal(client, deps, {
        triggerId: payload.trigger_id,
        channelId: payload.channel_id,
        userId: payload.user_id,
        teamId: payload.team_id,
        crewName: parsed.crewName,
      });
      if (!opened) await respond({ response_type: "ephemeral", text: FORM_NOT_OPENED });
    } else if (parsed.kind === "audit") {
      const asker = { userId: payload.user_id, channelId: payload.channel_id };
      const text = await auditReply(client, deps, { kickoffId: parsed.kickoffId, format: parsed.format, ...asker }, accessPorts(client, deps, context, command));
      await respond({ response_type: "ephemeral", text });
    } else if (parsed.kind === "stop") {
      const reply = await stopCommandReply(deps, parsed.kickoffId, { userId: payload.user_id, channelId: payload.channel_id }, accessPorts(client, deps, context, command));
      await respond({ response_type: "ephemeral", ...reply });
    } else if (parsed.kind === "status") {
      const access = accessPorts(client, deps, context, command);
      const status = await statusFor({ access, runs: deps.lifecycle.runs, crews: deps.crews }, parsed.kickoffId, { userId: payload.user_id, channelId: payload.channel_id });
      await respond({ response_type: "ephemeral", text: statusText(parsed.kickoffId, status) });
    } else {
      await respond({ response_type: "ephemeral", text: await listText(deps, payload.channel_id) });
    }
  });
}

/** How a subcommand is used, for an answer without what it takes (rather than the whole help). */
function usageText(usage: Extract<CrewCommand, { kind: "usage" }>, commandName: string): string {
  const where = `A run's kickoff id is on its announcement (or in \`${commandName} list\`).`;
  switch (usage.of) {
    case "stop":
      return `Usage: \`${commandName} stop &lt;kickoff_id&gt;\` stops one run: its kickoff id is on the run's announcement (or in \`${commandName} list\`). The Stop button on the announcement does the same.`;
    case "status":
      return `Usage: \`${commandName} status &lt;kickoff_id&gt;\` shows where one run is. ${where}`;
    case "audit": {
      const format = usage.format === undefined ? "" : ` \`${escapeMrkdwn(usage.format.slice(0, 40))}\` is not one of them.`;
      return `Usage: \`${commandName} audit &lt;kickoff_id&gt; [csv|json]\` shows who decided what in a run (or a flow's request, by its id), with both export files in its thread, or only the one named.${format} ${where}`;
    }
  }
}

/** A run's status for someone who may see it (usecases/status-for.ts); everyone else hears "unknown id". */
export function statusText(kickoffId: string, status: RunStatus): string {
  if (status.kind === "unknown") return unknownKickoffText(kickoffId);
  const { execution, crew } = status;
  const lines = [`*${escapeMrkdwn(execution.crewName)}* · \`${escapeMrkdwn(execution.kickoffId ?? kickoffId)}\` · ${execution.state}`];
  if (crew && "status" in crew) {
    const reported = crew.status;
    lines.push(
      `The crew reports *${escapeMrkdwn(reported.rawState || reported.phase)}*${reported.progress?.total ? ` (${reported.progress.completed ?? 0}/${reported.progress.total} tasks)` : ""}.`,
    );
    const sofar = reported.output ?? reported.lastTask?.output;
    // A crew's output is Markdown, shown as its review would show it; an error is plain text.
    if (sofar) lines.push(`Output so far:\n${fitMarkdown(sofar, 2500).text}`);
  } else if (crew) {
    lines.push(escapeMrkdwn(crew.unreadable));
  } else if (execution.output || execution.error) {
    lines.push(execution.error ? fitMrkdwn(execution.error, 2500).text : fitMarkdown(execution.output ?? "", 2500).text);
  }
  return lines.join("\n");
}

async function listText(deps: FeatureDeps, channelId: string): Promise<string> {
  const runs = await deps.lifecycle.runs.recentInChannel(channelId, 10);
  if (runs.length === 0) return "No crew runs in this channel yet. Start one with `/crew`.";
  // The announcement's text is escaped already; the kickoff id comes from the crew.
  const lines = runs.map((run) => `• ${announcementFor(run).text} — ${userMention(run.userId)} · \`${escapeMrkdwn(run.kickoffId ?? "not started")}\``);
  return `*Recent runs in this channel*\n${lines.join("\n")}`;
}
