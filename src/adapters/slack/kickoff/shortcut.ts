// "Run a crew on this message" (a message shortcut): the kickoff form, opened from a message, with its
// text in the crew's form and the run announced in that message's thread.
import type { App } from "@slack/bolt";
import { z } from "zod";
import { sanitizeText } from "../../../text/sanitize.js";
import { slackTextToPlain } from "../../../text/slack-text.js";
import { safeSlice } from "../../../text/truncate.js";
import { INSTALLATION_UNKNOWN, NOT_THIS_ORGANISATION, ofInstallation } from "../access.js";
import { LIMITS, RUN_ON_MESSAGE_SHORTCUT } from "../blocks/index.js";
import type { FeatureDeps } from "../deps.js";
import { FORM_NOT_OPENED, openKickoffModal, WORKSPACE_UNKNOWN, workspaceOf } from "./modal.js";

const ts = z.string().min(1).max(40);
const messageAction = z.object({
  trigger_id: z.string(),
  // An org-wide (Enterprise Grid) install gets `team: null`: the user's team_id names their workspace.
  user: z.object({ id: z.string(), team_id: z.string().max(255).optional() }),
  team: z.object({ id: z.string().max(255) }).nullish(),
  channel: z.object({ id: z.string() }),
  // A message's text can be as long as Slack allows (and then some): it is cut before it is read further.
  message: z.object({ ts, thread_ts: ts.optional(), text: z.string().optional() }),
});

// Slack cuts a message's text above 40,000 characters, so reading no more loses nothing a person sees;
// it is read before the cut to a text input's size because decoding shrinks it (an "&amp;" is one "&").
const MESSAGE_TEXT_READ = 40_000;

/** The message as it reads in Slack (its text arrives escaped, with <…> tokens), cut to what a text input holds. */
function formTextOf(wire: string): string {
  return sanitizeText(safeSlice(slackTextToPlain(safeSlice(wire, MESSAGE_TEXT_READ)), LIMITS.plainTextInput));
}

export function registerMessageShortcut(app: App, deps: FeatureDeps): void {
  app.shortcut(RUN_ON_MESSAGE_SHORTCUT, async ({ ack, shortcut, client, respond, context }) => {
    await ack();
    const parsed = messageAction.safeParse(shortcut);
    if (!parsed.success) return void deps.log.warn("message shortcut of an unexpected shape ignored", { issues: parsed.error.issues.length });
    const answer = (text: string) => respond({ response_type: "ephemeral", text }).catch((err) => deps.log.warn("could not answer the shortcut", { err }));
    const own = await ofInstallation(deps, context, shortcut);
    if (own !== true) return void (await answer(own === false ? NOT_THIS_ORGANISATION : INSTALLATION_UNKNOWN));
    const { message, channel, user, team } = parsed.data;
    const teamId = workspaceOf(team?.id, user.team_id);
    if (!teamId) {
      deps.log.warn("message shortcut names no workspace; refused", { userId: user.id });
      return void (await answer(WORKSPACE_UNKNOWN));
    }
    const opened = await openKickoffModal(client, deps, {
      triggerId: parsed.data.trigger_id,
      channelId: channel.id,
      userId: user.id,
      teamId,
      source: {
        messageTs: message.ts,
        // Slack threads are one level deep: a reply's run goes into the thread it is in.
        threadTs: message.thread_ts ?? message.ts,
        text: formTextOf(message.text ?? ""),
      },
    });
    if (!opened) await answer(FORM_NOT_OPENED);
  });
}
