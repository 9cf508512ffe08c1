// The words of a message Crewline sends a person directly because Slack refused the channel it
// belongs in (src/outbox/refused.ts): which channel, why in plain words, and what the message is.
import { context } from "./kit.js";
import type { SlackMessage } from "./run.js";
import { escapeMrkdwn, truncatePlain, userMention } from "./text.js";

const NAME_MAX = 150;

/** Slack's reason, in plain words (an unknown code is shown as it is, escaped). */
export function refusalInWords(code: string): string {
  switch (code) {
    case "is_archived":
      return "the channel is archived";
    case "not_in_channel":
      return "Crewline is not a member of the channel any more (it was removed, or never invited)";
    case "channel_not_found":
      return "the channel no longer exists, or Crewline cannot see it";
    case "restricted_action":
      return "the channel only lets certain people post";
    case "team_access_not_granted":
      return "Crewline has no access to the channel's workspace";
    default:
      return `Slack answered \`${escapeMrkdwn(truncatePlain(code, 60))}\``;
  }
}

export type RefusedSubject =
  /** A crew run: its crew and who started it. */
  | { kind: "run"; crewName: string; startedBy: string }
  /** A flow's feedback request: its flow and step. */
  | { kind: "flow"; flowName: string; methodName?: string };

export interface RefusedChannelFacts {
  /** The channel that refused the message. */
  channelId: string;
  /** Slack's error code. */
  reason: string;
  subject: RefusedSubject;
}

/**
 * The header of a message sent directly because its channel refused it: "⚠️ I couldn't post in
 * #channel because the channel is archived, so …". Names the run (or request), the channel and the
 * reason; every name from outside is escaped.
 */
export function buildRefusedChannelHeader(facts: RefusedChannelFacts): SlackMessage {
  const channel = /^[CGD][A-Z0-9]+$/.test(facts.channelId) ? `<#${facts.channelId}>` : "its channel";
  const why = refusalInWords(facts.reason);
  const name = (n: string) => `*${escapeMrkdwn(truncatePlain(n, NAME_MAX)) || "unnamed"}*`;
  const what =
    facts.subject.kind === "run"
      ? `so the run of ${name(facts.subject.crewName)} started by ${userMention(facts.subject.startedBy)} continues here, in this direct message`
      : `so this feedback request of the flow ${name(facts.subject.flowName)}${facts.subject.methodName?.trim() ? ` (step ${name(facts.subject.methodName)})` : ""} is sent here, in this direct message`;
  const text = `⚠️ I couldn't post in ${channel} because ${why}, ${what}.`;
  return { text, blocks: [context(text)] };
}

/** A message with the header on top (its notification text starts with the header's). */
export function withRefusedHeader(message: SlackMessage, facts: RefusedChannelFacts | undefined): SlackMessage {
  if (!facts) return message;
  const header = buildRefusedChannelHeader(facts);
  return { text: truncatePlain(`${header.text} ${message.text}`, 3000), blocks: [...header.blocks, ...message.blocks] };
}
