// Ephemeral help for the slash command.
import { escapeMrkdwn, truncatePlain } from "./text.js";

const LISTED_CREWS = 20;

/** mrkdwn text (under 3,000 chars, so it also fits a section block). */
export function helpText(commandName = "/crew", crews: string[]): string {
  const cmd = escapeMrkdwn(truncatePlain(commandName, 40)) || "/crew";
  const lines = [
    "*Crewline* starts your team's AI crews from Slack. Each run gets a thread where you review every task's output.",
    `• \`${cmd}\` — choose a crew and fill in its inputs`,
  ];
  if (crews.length > 1) lines.push(`• \`${cmd} &lt;crew name&gt;\` — go straight to one crew's inputs`);
  lines.push(
    `• \`${cmd} status &lt;kickoff_id&gt;\` — where a run stands`,
    `• \`${cmd} list\` — the crews you can start`,
    `• \`${cmd} audit &lt;kickoff_id&gt; [csv|json]\` — who decided what in a run, with an export file in its thread`,
    `• \`${cmd} help\` — this message`,
    "",
    crewsLine(crews),
  );
  return lines.join("\n");
}

function crewsLine(crews: string[]): string {
  if (crews.length === 0) return "No crews are set up yet. Ask an admin to add one.";
  const names = crews.slice(0, LISTED_CREWS).map((c) => `\`${escapeMrkdwn(truncatePlain(c, 80))}\``);
  const more = crews.length - names.length;
  const list = names.join(", ") + (more > 0 ? ` and ${more} more` : "");
  return crews.length === 1 ? `Crew available: ${list}` : `Crews available: ${list}`;
}
