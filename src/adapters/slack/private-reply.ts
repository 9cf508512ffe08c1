// What a click on a message says about where it was, and the private answer (chat.postEphemeral) to
// the person who clicked, in the channel and thread they acted in: best effort, a failure is logged.
import type { types } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import { z } from "zod";
import type { Logger } from "../../log/log.js";

/** The parts of a block_actions payload that say who clicked, and on which message. */
export const clickedMessage = {
  user: z.object({ id: z.string() }),
  channel: z.object({ id: z.string() }).optional(),
  container: z.object({ channel_id: z.string().optional(), thread_ts: z.string().optional(), message_ts: z.string().optional() }).partial().optional(),
  message: z.object({ ts: z.string(), thread_ts: z.string().optional() }).partial().optional(),
};
const clicked = z.object(clickedMessage);

/** The first few places a payload did not have the expected shape (for the log). */
export function payloadIssues(error: z.ZodError): string[] {
  return error.issues.slice(0, 3).map((i) => i.path.join("."));
}

/** Says something to one person only, where they are (in the thread when given). */
export async function tellPrivately(
  client: WebClient,
  log: Logger,
  to: { channel: string; user: string; threadTs?: string },
  text: string,
  blocks?: types.KnownBlock[],
): Promise<void> {
  await client.chat
    .postEphemeral({ channel: to.channel, user: to.user, text, ...(to.threadTs ? { thread_ts: to.threadTs } : {}), ...(blocks ? { blocks } : {}) })
    .catch((err) => log.warn("could not send ephemeral reply", { err }));
}

/** The click's message, and how to tell the clicker something privately (in the thread it was in). */
export function clickFacts(log: Logger, client: WebClient, click: z.infer<typeof clicked>) {
  const channel = click.container?.channel_id ?? click.channel?.id;
  const messageTs = click.container?.message_ts ?? click.message?.ts;
  const threadTs = click.message?.thread_ts ?? click.container?.thread_ts;
  const tell = async (text: string, blocks?: types.KnownBlock[]) => {
    if (channel) await tellPrivately(client, log, { channel, user: click.user.id, ...(threadTs ? { threadTs } : {}) }, text, blocks);
  };
  return { channel, messageTs, tell };
}
