// Ephemeral help for the slash command.
import { escapeMrkdwn, truncatePlain } from "./text.js";

const LISTED_CREWS = 20;

/** mrkdwn text (under 3,000 chars, so it also fits a section block). */
export function helpText(commandName = "/crew", crews: string[], flows: { name: string; webhookUrl: string }[] = []): string {
  const cmd = escapeMrkdwn(truncatePlain(commandName, 40)) || "/crew";
  const lines = [
    "*Crewline* starts your team's AI crews from Slack. Each run gets a thread where you review every task's output.",
    `• \`${cmd}\` — choose a crew and fill in its inputs`,
  ];
  if (crews.length > 1) lines.push(`• \`${cmd} &lt;crew name&gt;\` — go straight to one crew's inputs`);
  lines.push(
    `• \`${cmd} status &lt;kickoff_id&gt;\` — where a run stands`,
    `• \`${cmd} stop &lt;kickoff_id&gt;\` — stop a run you started or may review (the Stop button on its announcement does the same)`,
    `• \`${cmd} list\` — this channel's recent runs`,
    `• \`${cmd} audit &lt;kickoff_id&gt; [csv|json]\` — who decided what in a run (or a flow's feedback request, by its id), with an export file in its thread`,
    `• \`${cmd} help\` — this message`,
    "",
    crewsLine(crews),
    flowsLine(flows),
  );
  return lines.join("\n");
}

/** Where an admin finds each flow's webhook URL (the URL only: its signing secret stays in the config). */
function flowsLine(flows: { name: string; webhookUrl: string }[]): string {
  if (flows.length === 0)
    return "_Admins: flows' feedback requests can be answered here too: set FLOW_WEBHOOK_SECRET and FLOW_CHANNEL (see the README); the webhook URL is then logged at start-up and shown here._";
  const shown = flows.slice(0, 10).map((f) => `\`${escapeMrkdwn(truncatePlain(f.name, 64))}\` → \`${escapeMrkdwn(truncatePlain(f.webhookUrl, 300))}\``);
  return `Flow feedback requests are answered here. Admins: paste each flow's webhook URL into its dashboard (Settings → Human in the Loop):\n${shown.map((l) => `• ${l}`).join("\n")}${flows.length > 10 ? `\n…and ${flows.length - 10} more (see the start-up log)` : ""}`;
}

function crewsLine(crews: string[]): string {
  if (crews.length === 0) return "No crews are set up yet. Ask an admin to add one.";
  const names = crews.slice(0, LISTED_CREWS).map((c) => `\`${escapeMrkdwn(truncatePlain(c, 80))}\``);
  const more = crews.length - names.length;
  const list = names.join(", ") + (more > 0 ? ` and ${more} more` : "");
  return crews.length === 1 ? `Crew available: ${list}` : `Crews available: ${list}`;
}

/** What a kickoff id no run has (or one the asker may not see) gets, from every command that takes one. */
export function unknownKickoffText(kickoffId: string): string {
  return `I don't know a run with kickoff id \`${escapeMrkdwn(truncatePlain(kickoffId, 80))}\`. \`/crew list\` shows this channel's recent runs.`;
}
