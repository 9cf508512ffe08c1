// The playground page's messages: what a visitor types that is not a slash command is posted as their
// message (in the channel, or as a reply in a thread) and reaches the bot as the Events API `message`
// event Slack sends for it; a message shortcut used on a message reaches it as the `message_action`
// payload. Both are signed by the stand-in like every other request of the page.
import { z } from "zod";
import type { SlackRequester } from "./slack-requests.js";
import type { FakeSlack } from "./slack-standin.js";

/** A message shortcut the app declares (manifest.yml `features.shortcuts`, type message). */
export interface PlaygroundShortcut {
  callback_id: string;
  name: string;
}

const userId = z.string().regex(/^[UW][A-Z0-9]{1,20}$/);
const ts = z.string().regex(/^\d{1,12}\.\d{1,8}$/);
const channelId = z.string().regex(/^[CGD][A-Z0-9]{1,20}$/);
/** Slack keeps up to 40,000 characters of a message's text. */
const messageBody = z.object({ user: userId, channel: channelId, threadTs: ts.optional(), text: z.string().min(1).max(40_000) });
const shortcutBody = z.object({ user: userId, channel: channelId, ts, callbackId: z.string().min(1).max(255) });

/** The page routes for messages and message shortcuts, to add beside the others of ./web.ts. */
export function messageRoutes(slack: FakeSlack, requests: SlackRequester, shortcuts: PlaygroundShortcut[]): Record<string, (body: unknown) => Promise<unknown>> {
  return {
    "/playground/message": async (raw) => {
      const b = messageBody.parse(raw);
      const parent = b.threadTs ? slack.messages(b.channel).find((m) => m.ts === b.threadTs) : undefined;
      if (b.threadTs && !parent) return { ok: false, error: "That thread is gone." };
      const posted = slack.postAsUser(b.channel, b.user, b.text, b.threadTs);
      const res = await requests.event({
        type: "message",
        channel: b.channel,
        channel_type: b.channel.startsWith("D") ? "im" : b.channel.startsWith("G") ? "group" : "channel",
        user: b.user,
        text: b.text,
        ts: posted.ts,
        // As Slack sends a thread reply: who wrote the thread's parent (the bot's outage warning reads it).
        ...(b.threadTs ? { thread_ts: b.threadTs, parent_user_id: parent?.user } : {}),
      });
      return { ok: res.status === 200, status: res.status, ts: posted.ts };
    },
    "/playground/shortcut": async (raw) => {
      const b = shortcutBody.parse(raw);
      if (!shortcuts.some((s) => s.callback_id === b.callbackId)) return { ok: false, error: "The app declares no such shortcut." };
      const m = slack.messages(b.channel).find((x) => x.ts === b.ts);
      if (!m) return { ok: false, error: "That message is gone." };
      const res = await requests.messageShortcut({
        callback_id: b.callbackId,
        user_id: b.user,
        channel_id: b.channel,
        trigger_id: slack.issueTrigger(b.user),
        message: {
          ts: m.ts,
          ...(m.thread_ts && m.thread_ts !== m.ts ? { thread_ts: m.thread_ts } : {}),
          text: m.text ?? "",
          user: m.user,
          ...(m.blocks ? { blocks: m.blocks } : {}),
          ...(m.user === slack.botUserId ? { bot_id: "B0BOT" } : {}),
        },
      });
      return { ok: res.status === 200, status: res.status };
    },
  };
}
