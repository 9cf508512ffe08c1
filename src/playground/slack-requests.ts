/**
 * Send signed requests to a Bolt HTTP endpoint (POST {baseUrl}/slack/events) the way Slack does:
 * slash commands and interactivity form-encoded, Events API as JSON, all with v0 signatures.
 */
import { createHmac } from "node:crypto";

export interface SlackResponse {
  status: number;
  body: string;
}

export interface CommandParams {
  /** default "/crew" */
  command?: string;
  text?: string;
  user_id?: string;
  channel_id?: string;
  team_id?: string;
  /** An Enterprise Grid org (sent with is_enterprise_install when the app is installed org-wide). */
  enterprise_id?: string;
  trigger_id?: string;
  response_url?: string;
}

export interface BlockActionParams {
  /** Set for an element inside a modal (then channel_id and message_ts are ignored). */
  view?: { id: string; callback_id?: string; private_metadata?: string; hash?: string };
  user_id: string;
  channel_id: string;
  message_ts: string;
  thread_ts?: string;
  /** The clicked message is an ephemeral (message_ts is its ts): Slack then sends no `message`. */
  is_ephemeral?: boolean;
  /** Extra fields (selected_option, text, …) are passed through into actions[0]. */
  action: { action_id: string; block_id: string; value?: string; type?: string; [k: string]: unknown };
  stateValues?: Record<string, Record<string, any>>;
  /** Merged into payload.message (e.g. text/blocks of the clicked message, from fake.messages()). */
  message?: Record<string, unknown>;
  trigger_id?: string;
  team_id?: string;
  /** An Enterprise Grid org whose org-wide install handles the click. */
  enterprise_id?: string;
  response_url?: string;
}

export interface MessageShortcutParams {
  callback_id: string;
  user_id: string;
  channel_id: string;
  /** The message the shortcut was used on, as Slack sends it (text, ts, the author, thread_ts for a reply). */
  message: { ts: string; thread_ts?: string; text?: string; user?: string; [k: string]: unknown };
  trigger_id?: string;
  team_id?: string;
}

export interface ViewParams {
  user_id: string;
  view: {
    id?: string;
    callback_id: string;
    private_metadata?: string;
    state?: { values: Record<string, Record<string, any>> };
    hash?: string;
    [k: string]: unknown;
  };
  trigger_id?: string;
  team_id?: string;
  /** An Enterprise Grid org whose org-wide install handles the view. */
  enterprise_id?: string;
}

export interface ViewSubmissionParams extends ViewParams {
  view: ViewParams["view"] & { state: { values: Record<string, Record<string, any>> } };
}

export interface EventOptions {
  team_id?: string;
  /** An Enterprise Grid org; with it the event comes for an org-wide install. */
  enterprise_id?: string;
  /** Adds X-Slack-Retry-Num / X-Slack-Retry-Reason, as Slack's redeliveries carry. */
  retryNum?: number;
  retryReason?: string;
  event_id?: string;
  /** When Slack sent the event (seconds since the epoch; default now): a redelivery keeps its first time. */
  event_time?: number;
}

export interface SlackRequester {
  command(p: CommandParams): Promise<SlackResponse>;
  blockAction(p: BlockActionParams): Promise<SlackResponse>;
  /** A message shortcut (`message_action`) used on a message. */
  messageShortcut(p: MessageShortcutParams): Promise<SlackResponse>;
  viewSubmission(p: ViewSubmissionParams): Promise<SlackResponse & { json?: any }>;
  viewClosed(p: ViewParams & { is_cleared?: boolean }): Promise<SlackResponse>;
  appHomeOpened(p: { user_id: string; tab?: "home" | "messages"; channel?: string; view?: unknown }): Promise<SlackResponse>;
  /** Any Events API event (app_uninstalled, app_mention, message, …) wrapped in an event_callback. */
  event(event: Record<string, unknown>, opts?: EventOptions): Promise<SlackResponse>;
  /** Post a body as-is with the given headers (no signing), for bad-signature tests. */
  raw(body: string, headers: Record<string, string>): Promise<SlackResponse>;
}

export interface SlackRequesterOptions {
  /** Bolt's base URL, e.g. http://127.0.0.1:3000 */
  baseUrl: string;
  signingSecret: string;
  /** default T0TEAM */
  teamId?: string;
  /** default U0BOT; used in Events API `authorizations`. */
  botUserId?: string;
  /** default A0APP */
  apiAppId?: string;
  /**
   * Base for generated response_url values; pass `fake.responseUrlBase` so respond() lands in the fake
   * (block actions get <base><n>/<channel>/<message_ts>, which lets replace_original edit the message).
   * Default: http://127.0.0.1:9/response/ (nothing listens there, so respond() fails).
   */
  responseUrlBase?: string;
}

let counter = 0;
const next = () => ++counter;
const nowTs = () => (Date.now() / 1000).toFixed(6);

/** X-Slack-Request-Timestamp + X-Slack-Signature (v0=HMAC-SHA256 of "v0:{ts}:{body}"). */
export function signSlackBody(secret: string, body: string, timestamp = Math.floor(Date.now() / 1000)): Record<string, string> {
  const sig = createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex");
  return { "X-Slack-Request-Timestamp": String(timestamp), "X-Slack-Signature": `v0=${sig}` };
}

export function slackRequester(opts: SlackRequesterOptions): SlackRequester {
  const endpoint = `${opts.baseUrl.replace(/\/$/, "")}/slack/events`;
  const defaultTeam = opts.teamId ?? "T0TEAM";
  const apiAppId = opts.apiAppId ?? "A0APP";
  const responseBase = opts.responseUrlBase ?? "http://127.0.0.1:9/response/";
  const responseUrl = (...parts: (string | undefined)[]) => responseBase + [next(), ...parts].filter(Boolean).join("/");
  const user = (id: string, team: string) => ({ id, username: id.toLowerCase(), name: id.toLowerCase(), team_id: team });
  const team = (id: string) => ({ id, domain: "example" });

  const raw = async (body: string, headers: Record<string, string>): Promise<SlackResponse> => {
    const res = await fetch(endpoint, { method: "POST", headers, body });
    return { status: res.status, body: await res.text() };
  };
  const signed = (body: string, contentType: string, extra: Record<string, string> = {}) =>
    raw(body, { "Content-Type": contentType, ...signSlackBody(opts.signingSecret, body), ...extra });
  const form = (fields: Record<string, string>) => signed(new URLSearchParams(fields).toString(), "application/x-www-form-urlencoded");
  const interactive = (payload: Record<string, unknown>) => form({ payload: JSON.stringify(payload) });

  const viewPayload = (type: "view_submission" | "view_closed", p: ViewParams, extra: Record<string, unknown>) => {
    const teamId = p.team_id ?? defaultTeam;
    const { id, callback_id, private_metadata, state, hash, ...rest } = p.view;
    return {
      type,
      team: team(teamId),
      user: user(p.user_id, teamId),
      api_app_id: apiAppId,
      token: "legacy",
      is_enterprise_install: !!p.enterprise_id,
      enterprise: p.enterprise_id ? { id: p.enterprise_id, name: p.enterprise_id } : null,
      view: {
        id: id ?? `V${next()}`,
        team_id: teamId,
        type: "modal",
        blocks: [],
        callback_id,
        private_metadata: private_metadata ?? "",
        state: state ?? { values: {} },
        hash: hash ?? `${Math.floor(Date.now() / 1000)}.hash`,
        root_view_id: id ?? null,
        previous_view_id: null,
        app_id: apiAppId,
        bot_id: "B0BOT",
        ...rest,
      },
      ...extra,
    };
  };

  const event = (ev: Record<string, unknown>, eo: EventOptions = {}): Promise<SlackResponse> => {
    const teamId = eo.team_id ?? defaultTeam;
    const body = JSON.stringify({
      token: "legacy",
      team_id: teamId,
      api_app_id: apiAppId,
      event: { event_ts: nowTs(), ...ev },
      type: "event_callback",
      event_id: eo.event_id ?? `Ev${String(next()).padStart(8, "0")}`,
      event_time: eo.event_time ?? Math.floor(Date.now() / 1000),
      ...(eo.enterprise_id ? { enterprise_id: eo.enterprise_id } : {}),
      authorizations: [
        {
          enterprise_id: eo.enterprise_id ?? null,
          team_id: eo.enterprise_id ? null : teamId,
          user_id: opts.botUserId ?? "U0BOT",
          is_bot: true,
          is_enterprise_install: !!eo.enterprise_id,
        },
      ],
      is_ext_shared_channel: false,
    });
    const extra: Record<string, string> = {};
    if (eo.retryNum !== undefined) extra["X-Slack-Retry-Num"] = String(eo.retryNum);
    if (eo.retryReason !== undefined) extra["X-Slack-Retry-Reason"] = eo.retryReason;
    return signed(body, "application/json", extra);
  };

  return {
    raw,
    event,

    command(p) {
      const channel = p.channel_id ?? "C0GENERAL";
      const teamId = p.team_id ?? defaultTeam;
      const userId = p.user_id ?? "U0USER";
      return form({
        token: "legacy",
        team_id: teamId,
        team_domain: "example",
        channel_id: channel,
        channel_name: channel.startsWith("D") ? "directmessage" : channel.toLowerCase(),
        user_id: userId,
        user_name: userId.toLowerCase(),
        command: p.command ?? "/crew",
        text: p.text ?? "",
        api_app_id: apiAppId,
        ...(p.enterprise_id ? { enterprise_id: p.enterprise_id, enterprise_name: p.enterprise_id } : {}),
        is_enterprise_install: p.enterprise_id ? "true" : "false",
        response_url: p.response_url ?? responseUrl(channel),
        trigger_id: p.trigger_id ?? `trig-${next()}`,
      });
    },

    blockAction(p) {
      const teamId = p.team_id ?? defaultTeam;
      const { type = "button", ...action } = p.action;
      if (p.view) {
        // An element inside a modal: the payload carries the view instead of a channel and message.
        return interactive({
          type: "block_actions",
          user: user(p.user_id, teamId),
          api_app_id: apiAppId,
          token: "legacy",
          container: { type: "view", view_id: p.view.id },
          trigger_id: p.trigger_id ?? `trig-${next()}`,
          team: team(teamId),
          view: { type: "modal", state: { values: p.stateValues ?? {} }, ...p.view },
          actions: [{ type, ...action, action_ts: nowTs() }],
        });
      }
      return interactive({
        type: "block_actions",
        user: user(p.user_id, teamId),
        api_app_id: apiAppId,
        token: "legacy",
        container: { type: "message", message_ts: p.message_ts, channel_id: p.channel_id, is_ephemeral: !!p.is_ephemeral, ...(p.thread_ts ? { thread_ts: p.thread_ts } : {}) },
        trigger_id: p.trigger_id ?? `trig-${next()}`,
        team: team(teamId),
        enterprise: p.enterprise_id ? { id: p.enterprise_id, name: p.enterprise_id } : null,
        is_enterprise_install: !!p.enterprise_id,
        channel: { id: p.channel_id, name: p.channel_id.toLowerCase() },
        ...(p.is_ephemeral ? {} : { message: { type: "message", ts: p.message_ts, ...(p.thread_ts ? { thread_ts: p.thread_ts } : {}), ...p.message } }),
        state: { values: p.stateValues ?? {} },
        response_url: p.response_url ?? responseUrl(p.channel_id, p.message_ts),
        actions: [{ type, ...action, action_ts: nowTs() }],
      });
    },

    messageShortcut(p) {
      const teamId = p.team_id ?? defaultTeam;
      return interactive({
        type: "message_action",
        callback_id: p.callback_id,
        token: "legacy",
        api_app_id: apiAppId,
        action_ts: nowTs(),
        trigger_id: p.trigger_id ?? `trig-${next()}`,
        team: team(teamId),
        user: user(p.user_id, teamId),
        channel: { id: p.channel_id, name: p.channel_id.toLowerCase() },
        is_enterprise_install: false,
        enterprise: null,
        message_ts: p.message.ts,
        message: { type: "message", ...p.message },
        response_url: responseUrl(p.channel_id, p.message.ts),
      });
    },

    async viewSubmission(p) {
      const res = await interactive(viewPayload("view_submission", p, { trigger_id: p.trigger_id ?? `trig-${next()}`, response_urls: [] }));
      if (!res.body.trim()) return res;
      try {
        return { ...res, json: JSON.parse(res.body) };
      } catch {
        return res;
      }
    },

    viewClosed(p) {
      return interactive(viewPayload("view_closed", p, { is_cleared: p.is_cleared ?? false }));
    },

    appHomeOpened(p) {
      return event({ type: "app_home_opened", user: p.user_id, channel: p.channel ?? `D${p.user_id.slice(1)}`, tab: p.tab ?? "home", ...(p.view ? { view: p.view } : {}) });
    },
  };
}
