// The playground's web page on top of the Slack stand-in: a small Slack (channels, threads, ephemerals,
// files, modals, App Home) for a chosen user. Everything a visitor does goes to the bot as a signed
// request to /slack/events, exactly as Slack would send it; everything shown is what the bot sent to
// the stand-in's Web API.
import { readFile } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { type SlackRequester, slackRequester } from "./slack-requests.js";
import type { FakeSlack, FakeView } from "./slack-standin.js";
import { messageRoutes, type PlaygroundShortcut } from "./web-messages.js";

export interface PlaygroundUser {
  id: string;
  name: string;
  /** What the visitor can try as this user, e.g. "may decide reviews". */
  role: string;
}

export interface PlaygroundChannel {
  id: string;
  name: string;
}

export interface PlaygroundWebOptions {
  /** The bot's base URL (its /slack/events receives the signed requests). */
  botUrl: string;
  signingSecret: string;
  users: PlaygroundUser[];
  channels: PlaygroundChannel[];
  /** User groups shown on the page (id → name and members). */
  usergroups?: { id: string; handle: string; members: string[] }[];
  /** Lines shown under the title (crew, reviewer rules). */
  notes?: string[];
  /** Message shortcuts the app declares, offered in each message's ⋮ menu. */
  messageShortcuts?: PlaygroundShortcut[];
}

const HERE = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const MAX_BODY = 256 * 1024;

const userId = z.string().regex(/^[UW][A-Z0-9]{1,20}$/);
const commandBody = z.object({ user: userId, channel: z.string().max(40), text: z.string().max(4000) });
const actionBody = z.object({
  user: userId,
  channel: z.string().max(40).optional(),
  ts: z.string().max(40).optional(),
  threadTs: z.string().max(40).optional(),
  /** The clicked message is an ephemeral (ts is its ts). */
  ephemeral: z.boolean().optional(),
  viewId: z.string().max(40).optional(),
  action: z.object({
    action_id: z.string().max(255),
    block_id: z.string().max(255),
    type: z.string().max(40),
    value: z.string().max(2000).optional(),
    selected_option: z
      .object({ value: z.string().max(150), text: z.object({ type: z.string(), text: z.string().max(200) }) })
      .passthrough()
      .optional(),
  }),
  state: z.record(z.string(), z.record(z.string(), z.record(z.string(), z.unknown()))).default({}),
});
const submitBody = z.object({ user: userId, viewId: z.string().max(40), state: z.record(z.string(), z.record(z.string(), z.record(z.string(), z.unknown()))).default({}) });
const viewBody = z.object({ user: userId, viewId: z.string().max(40) });
const homeBody = z.object({ user: userId });

/** Adds the page and its JSON API to the stand-in. */
export function mountPlayground(slack: FakeSlack, opts: PlaygroundWebOptions): void {
  const requests: SlackRequester = slackRequester({ baseUrl: opts.botUrl, signingSecret: opts.signingSecret, responseUrlBase: slack.responseUrlBase });
  const viewErrors = new Map<string, Record<string, string>>();
  /** When a command's direct answer (shown as an ephemeral) arrived, by its ts. */
  const ackTimes = new Map<string, number>();
  let version = 0;
  const streams = new Set<ServerResponse>();
  let _pending: NodeJS.Timeout | undefined;
  slack.onChange(() => {
    version++;
    _pending ??= setTimeout(() => {
      _pending = undefined;
      for (const res of streams) res.write(`data: ${version}\n\n`);
    }, 50);
  });

  const userViews = (user: string) => [...slack.views.values()].filter((v) => v.user === user && v.view.type !== "home");
  const state = (user: string) => {
    const channelIds = new Set(opts.channels.map((c) => c.id));
    const messages = opts.channels.flatMap((c) => slack.messages(c.id));
    for (const m of slack.ephemerals) channelIds.add(m.channel);
    const home = [...slack.views.values()].find((v) => v.user === user && v.view.type === "home");
    const stack = userViews(user);
    const names = Object.fromEntries(opts.users.map((u) => [u.id, u.name]));
    return {
      version,
      users: opts.users,
      names,
      channels: opts.channels,
      usergroups: opts.usergroups ?? [],
      notes: opts.notes ?? [],
      shortcuts: opts.messageShortcuts ?? [],
      messages: messages.map((m) => ({ ...m, at: slack.timeOf(m.ts) })),
      ephemerals: slack.ephemerals.filter((e) => e.user === user).map((e) => ({ ...e, at: slack.timeOf(e.ts) ?? ackTimes.get(e.ts) })),
      files: slack.files.map((f) => ({
        id: f.id,
        ts: f.ts,
        at: f.ts ? slack.timeOf(f.ts) : undefined,
        channel: f.channel,
        thread_ts: f.thread_ts,
        filename: f.filename,
        title: f.title,
        size: Buffer.byteLength(f.content),
        preview: f.content.slice(0, 600),
      })),
      modal: stack.length ? { ...stack.at(-1)!.view, errors: viewErrors.get(stack.at(-1)!.id) ?? {}, depth: stack.length } : null,
      home: home?.view ?? null,
      violations: slack.violations.slice(-50),
    };
  };

  const viewFor = (user: string, viewId: string): FakeView | undefined => {
    const entry = slack.views.get(viewId);
    return entry && entry.user === user ? entry : undefined;
  };

  /** Applies a view_submission answer (response_action) the way Slack does. */
  const afterSubmit = (user: string, entry: FakeView, answer: any) => {
    viewErrors.delete(entry.id);
    const action = answer?.response_action;
    if (action === "errors") {
      viewErrors.set(entry.id, answer.errors ?? {});
    } else if (action === "update" && answer.view) {
      slack.views.set(entry.id, { ...entry, hash: `${entry.hash}+`, view: { ...answer.view, id: entry.id, hash: `${entry.hash}+`, state: { values: {} } } });
    } else if (action === "push" && answer.view) {
      const id = `V${entry.id}P${Date.now().toString(36)}`;
      slack.views.set(id, { id, hash: "1", user, view: { ...answer.view, id, hash: "1", state: { values: {} }, previous_view_id: entry.id } });
    } else if (action === "clear") {
      for (const v of userViews(user)) slack.views.delete(v.id);
    } else {
      slack.views.delete(entry.id);
    }
    slack.changed();
  };

  const routes: Record<string, (body: unknown) => Promise<unknown>> = {
    "/playground/command": async (raw) => {
      const b = commandBody.parse(raw);
      const [command = "", ...rest] = b.text.trim().split(/\s+/);
      if (!command.startsWith("/")) return { ok: false, error: "Type a slash command, e.g. /crew" };
      const res = await requests.command({
        command,
        text: rest.join(" "),
        user_id: b.user,
        channel_id: b.channel,
        trigger_id: slack.issueTrigger(b.user),
        response_url: slack.responseUrlFor({ channel: b.channel, user: b.user }),
      });
      // An ack with a body is shown to the user only, like Slack does with a command's direct answer.
      const answer = parseJson(res.body);
      if (answer && (answer.text || answer.blocks)) {
        const ts = `${(Date.now() / 1000).toFixed(6)}`;
        ackTimes.set(ts, Date.now());
        slack.ephemerals.push({ channel: b.channel, user: b.user, ts, text: answer.text, blocks: answer.blocks });
        slack.changed();
      }
      return { ok: res.status === 200, status: res.status };
    },
    "/playground/action": async (raw) => {
      const b = actionBody.parse(raw);
      const entry = b.viewId ? viewFor(b.user, b.viewId) : undefined;
      if (b.viewId && !entry) return { ok: false, error: "That view is gone." };
      const res = await requests.blockAction({
        user_id: b.user,
        channel_id: b.channel ?? "",
        message_ts: b.ts ?? "",
        thread_ts: b.threadTs,
        is_ephemeral: b.ephemeral,
        action: b.action,
        stateValues: b.state,
        trigger_id: slack.issueTrigger(b.user),
        ...(entry
          ? { view: { id: entry.id, callback_id: entry.view.callback_id, private_metadata: entry.view.private_metadata, hash: entry.hash } }
          : {
              message: b.ephemeral ? undefined : messageOf(slack, b.channel, b.ts),
              response_url: slack.responseUrlFor({ channel: b.channel, user: b.user, messageTs: b.ts, threadTs: b.threadTs }),
            }),
      });
      return { ok: res.status === 200, status: res.status };
    },
    "/playground/submit": async (raw) => {
      const b = submitBody.parse(raw);
      const entry = viewFor(b.user, b.viewId);
      if (!entry) return { ok: false, error: "That view is gone." };
      const res = await requests.viewSubmission({
        user_id: b.user,
        trigger_id: slack.issueTrigger(b.user),
        view: {
          id: entry.id,
          callback_id: entry.view.callback_id,
          private_metadata: entry.view.private_metadata,
          hash: entry.hash,
          blocks: entry.view.blocks,
          title: entry.view.title,
          state: { values: b.state },
        },
      });
      if (res.status === 200) afterSubmit(b.user, entry, res.json);
      return { ok: res.status === 200, status: res.status };
    },
    "/playground/close": async (raw) => {
      const b = viewBody.parse(raw);
      const entry = viewFor(b.user, b.viewId);
      if (!entry) return { ok: true };
      slack.closeView(entry.id);
      viewErrors.delete(entry.id);
      if (entry.view.notify_on_close)
        await requests.viewClosed({ user_id: b.user, view: { id: entry.id, callback_id: entry.view.callback_id, private_metadata: entry.view.private_metadata } });
      return { ok: true };
    },
    "/playground/home": async (raw) => {
      const b = homeBody.parse(raw);
      const res = await requests.appHomeOpened({ user_id: b.user });
      return { ok: res.status === 200, status: res.status };
    },
    ...messageRoutes(slack, requests, opts.messageShortcuts ?? []),
  };

  slack.mount(async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://playground.local");
    if (req.method === "GET" && (url.pathname === "/" || url.pathname === "/index.html")) {
      send(res, 200, "text/html; charset=utf-8", await readFile(path.join(HERE, "page", "index.html")));
      return true;
    }
    if (req.method === "GET" && url.pathname === "/playground/page.js") {
      send(res, 200, "text/javascript; charset=utf-8", await readFile(path.join(HERE, "page", "page.js")));
      return true;
    }
    if (req.method === "GET" && url.pathname === "/playground/page.css") {
      send(res, 200, "text/css; charset=utf-8", await readFile(path.join(HERE, "page", "page.css")));
      return true;
    }
    if (req.method === "GET" && url.pathname === "/playground/marked.js") {
      send(res, 200, "text/javascript; charset=utf-8", await readFile(path.join(path.dirname(require.resolve("marked")), "marked.esm.js")));
      return true;
    }
    if (req.method === "GET" && url.pathname === "/playground/state") {
      const user = userId.safeParse(url.searchParams.get("user"));
      if (!user.success) send(res, 400, "application/json", JSON.stringify({ error: "user must be a user id" }));
      else send(res, 200, "application/json; charset=utf-8", JSON.stringify(state(user.data)));
      return true;
    }
    if (req.method === "GET" && url.pathname === "/playground/events") {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
      res.write(`data: ${version}\n\n`);
      streams.add(res);
      req.on("close", () => streams.delete(res));
      return true;
    }
    const file = /^\/playground\/files\/(F[0-9]+)$/.exec(url.pathname);
    if (req.method === "GET" && file) {
      const found = slack.files.find((f) => f.id === file[1]);
      if (!found) send(res, 404, "text/plain", "no such file");
      else send(res, 200, "text/plain; charset=utf-8", found.content, { "content-disposition": `inline; filename="${found.filename.replace(/[^A-Za-z0-9._-]/g, "_")}"` });
      return true;
    }
    const route = req.method === "POST" ? routes[url.pathname] : undefined;
    if (!route) return false;
    let body: unknown;
    try {
      body = JSON.parse(await readSmallBody(req));
    } catch {
      send(res, 400, "application/json", JSON.stringify({ ok: false, error: "expected a JSON body" }));
      return true;
    }
    try {
      send(res, 200, "application/json", JSON.stringify(await route(body)));
    } catch (err) {
      const message =
        err instanceof z.ZodError ? `bad request: ${err.issues[0]?.path.join(".")} ${err.issues[0]?.message}` : `the bot could not be reached: ${(err as Error).message}`;
      send(res, err instanceof z.ZodError ? 400 : 502, "application/json", JSON.stringify({ ok: false, error: message }));
    }
    return true;
  });
}

function messageOf(slack: FakeSlack, channel: string | undefined, ts: string | undefined): Record<string, unknown> | undefined {
  if (!channel || !ts) return undefined;
  const m = slack.messages(channel).find((x) => x.ts === ts);
  return m ? { text: m.text, blocks: m.blocks, user: m.user, bot_id: "B0BOT" } : undefined;
}

function parseJson(text: string): any {
  try {
    return text.trim() ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}

function send(res: ServerResponse, status: number, type: string, body: string | Buffer, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": type, "cache-control": "no-store", ...headers }).end(body);
}

function readSmallBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new Error("body too large"));
        req.destroy();
      } else chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}
