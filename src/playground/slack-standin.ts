/**
 * A local stand-in for Slack's Web API over node:http: the end-to-end tests, the bench and
 * `npm run playground` (which adds a web page on top, see ./web.ts) all use this one.
 *
 * Point Bolt at it with `clientOptions: { slackApiUrl: fake.url }` (or a WebClient
 * with `{ slackApiUrl: fake.url }`). Every call is recorded in `calls`, failing ones
 * included. State (messages, views, files) is kept so tests can assert on what a user
 * would see, not only on the calls made.
 *
 * Routes:
 *   POST /api/<method>         Web API methods (form-urlencoded, JSON or multipart body)
 *   POST /upload/<file_id>     target of files.getUploadURLExternal's upload_url
 *   POST /response/<...>       response_url target (method "response_url"); see responseUrl()
 *
 * OAuth distribution: issueInstallCode() stands for a user approving the install in a workspace;
 * oauth.v2.access exchanges that code (once) for the workspace's own bot token, as Slack does, and
 * every later call is recorded with the token it carried (`token`) and the workspace it belongs to
 * (`team`). revokeTeam() makes a workspace's tokens answer token_revoked.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { types } from "@slack/bolt";
import { messageLimitViolations, modalLimitViolations } from "../adapters/slack/blocks/limits.js";
import { bucketKey, TIERS, type TierName, type TierRate, takeCell, tierOf } from "../outbox/tiers.js";
import { applyChunks, chunksProblem, type FakeStream, streamText } from "./slack-stream.js";

export interface SlackCall {
  /** e.g. "chat.postMessage"; "response_url" for response_url POSTs; "upload" for file bytes. */
  method: string;
  /** Parsed body. JSON-encoded form fields (blocks, view, attachments, files, …) are parsed back to objects. */
  args: Record<string, unknown>;
  token?: string;
  at: number;
  /** Set when the fake answered ok:false (the Slack error code) or 429 ("ratelimited"). */
  error?: string;
  /** Request path, useful for response_url calls. */
  path?: string;
  /** The workspace the token belongs to (tokens issued by oauth.v2.access; else the default team). */
  team?: string;
  /** The ts the answer carried (the message a chat.postMessage posted, or a chat.update updated). */
  ts?: string;
}

/** A user approving the app's install in a workspace (or, with isEnterpriseInstall, a whole Grid org). */
export interface InstallGrant {
  teamId: string;
  teamName?: string;
  enterpriseId?: string;
  isEnterpriseInstall?: boolean;
  /** Who installed it (default U0INSTALLER). */
  userId?: string;
  /** User scopes granted: a user token is issued too (default none). */
  userScopes?: string[];
  /** Bot scopes granted (default the usual Crewline ones). */
  scopes?: string[];
}

export interface FakeSlackOptions {
  port?: number;
  /** default U0BOT */
  botUserId?: string;
  /** default T0TEAM */
  teamId?: string;
  /** When set, chat.update beyond this many per rolling minute per channel answers 429 with Retry-After. */
  tier3PerMinute?: number;
  /** Retry-After for tier3PerMinute 429s; default 1. */
  retryAfterSeconds?: number;
  /**
   * Slack's rate-limit tiers (src/outbox/tiers.ts): every Web API method past its tier answers 429 with
   * a Retry-After (whole seconds until the method's bucket has a token again), per workspace (the
   * token's team), and chat.postMessage per channel. `true` uses Slack's figures; an object overrides
   * some tiers. Default off (the bench turns it on).
   */
  tiers?: boolean | Partial<Record<TierName, TierRate>>;
  /**
   * Reject payloads beyond Slack's Block Kit limits (blocks per message 50 / per view 100, section text
   * 3,000, header 150, total block text 12,000 → msg_blocks_too_long, modal title 24, private_metadata
   * 3,000). Default true.
   */
  validateBlocks?: boolean;
  /** When set, oauth.v2.access checks client_id and client_secret against these. */
  oauthClient?: { clientId: string; clientSecret: string };
  /**
   * Time every Web API call takes before it has its effect and is answered, like the round trip to the
   * real Slack (tens of milliseconds): a fixed number of ms, or a range drawn from uniformly per call.
   * Default 0 (answer at once). The bench uses it so that throughput figures are not about loopback.
   */
  latencyMs?: number | { min: number; max: number };
}

export interface FakeMessage {
  channel: string;
  ts: string;
  thread_ts?: string;
  text?: string;
  blocks?: any[];
  user: string;
  updated?: number;
  /** Message metadata (event_type, event_payload), as Slack keeps it. */
  metadata?: { event_type: string; event_payload: Record<string, unknown> };
  /** A streamed message (chat.startStream): its plan title, task cards and state. */
  stream?: FakeStream;
}

export interface FakeEphemeral {
  channel: string;
  user: string;
  ts: string;
  thread_ts?: string;
  text?: string;
  blocks?: any[];
  /** When a response_url answer replaced it (replace_original). */
  updated?: number;
}

/** A payload that breaks one of Slack's documented limits (src/adapters/slack/blocks/limits.ts). */
export interface LimitViolation {
  method: string;
  at: number;
  channel?: string;
  ts?: string;
  viewId?: string;
  problems: string[];
}

/** Context a response_url answers into (which user sees its ephemeral answers). */
export interface ResponseTarget {
  channel?: string;
  user?: string;
  messageTs?: string;
  threadTs?: string;
}

export interface FakeFile {
  id: string;
  /** When the file was shared (orders it among the thread's messages). */
  ts?: string;
  channel?: string;
  thread_ts?: string;
  filename: string;
  title?: string;
  content: string;
  initial_comment?: string;
}

export interface FakeView {
  id: string;
  hash: string;
  view: any;
  user?: string;
}

export interface FakeSlack {
  /** API base for clientOptions.slackApiUrl; ends with "/api/". */
  url: string;
  /** The bot's user (its messages carry it); default U0BOT. */
  readonly botUserId: string;
  /** Base for response_url values, ends with "/response/". */
  responseUrlBase: string;
  calls: SlackCall[];
  callsTo(method: string): SlackCall[];
  waitForCalls(method: string, count: number, timeoutMs?: number): Promise<SlackCall[]>;
  failNext(method: string, error: string, times?: number): void;
  /** Every call of this method whose arguments `when` matches answers `error`, until reset (content Slack will not take). */
  refuseWhen(method: string, error: string, when: (args: Record<string, unknown>) => boolean): void;
  rateLimitNext(method: string, times?: number, retryAfterSeconds?: number): void;
  delayNext(method: string, ms: number, times?: number): void;
  /** Performs the next call(s) of this method, then answers only after `ms` (Slack did it; the caller did not hear back in time). */
  answerLateNext(method: string, ms: number, times?: number): void;
  /** Every Web API call answers HTTP 503 for this long, from now (an outage). */
  outage(ms: number): void;
  /** Posts and updates in this channel (and conversations.info/join) answer `error` (is_archived, not_in_channel…); join clears a not_in_channel denial. */
  denyChannel(channel: string, error?: string): void;
  /** Message streaming (chat.startStream/appendStream/stopStream) in this workspace answers `error` (unknown_method: Slack has no streaming there). */
  refuseStreaming(teamId: string, error?: string): void;
  /** Message streaming works in this workspace again (refuseStreaming undone). */
  allowStreaming(teamId: string): void;
  /** The direct message (one user) or group DM (several) conversations.open made with these users, if any. */
  conversationWith(...userIds: string[]): string | undefined;
  setUsergroup(id: string, userIds: string[]): void;
  setUser(id: string, user: Record<string, unknown>): void;
  /** Who conversations.members lists for a channel (default: nobody). */
  setMembers(channel: string, userIds: string[]): void;
  /** The WebSocket URL apps.connections.open hands out (Socket Mode); unset answers an error. */
  socketModeUrl?: string;
  /** A response_url that routes respond({replace_original|delete_original}) to the given message. */
  responseUrl(channel?: string, messageTs?: string): string;
  messages(channel: string): FakeMessage[];
  /** A person's message (top level, or a reply in a thread), as typed in Slack: kept like any message. */
  postAsUser(channel: string, user: string, text: string, threadTs?: string): FakeMessage;
  files: FakeFile[];
  views: Map<string, FakeView>;
  /** chat.postEphemeral and ephemeral response_url answers, per user (replaced or removed by replace_original / delete_original on a click's response_url). */
  ephemerals: FakeEphemeral[];
  /** Every payload that broke a documented Slack limit (recorded even when validateBlocks is off). */
  violations: LimitViolation[];
  /** A trigger_id for this user: views opened with it belong to the user. */
  issueTrigger(user: string): string;
  /** A response_url whose ephemeral answers are shown to target.user. */
  responseUrlFor(target: ResponseTarget): string;
  /** When a message, ephemeral or file with this ts was posted (ms since the epoch). */
  timeOf(ts: string): number | undefined;
  /** Removes a view (the user closed the modal). */
  closeView(viewId: string): void;
  /** Tells onChange listeners that state changed outside a Web API call. */
  changed(): void;
  /** A one-time code, as Slack hands to the app's redirect URL once a user approves the install. */
  issueInstallCode(grant: InstallGrant): string;
  /** The bot token oauth.v2.access issued for a workspace (undefined before its install). */
  botTokenOf(teamId: string): string | undefined;
  /** Tokens of this workspace (or org) now answer token_revoked, as after an uninstall. */
  revokeTeam(teamOrEnterpriseId: string): void;
  /** Called after every request the stand-in answered (state may have changed). */
  onChange(listener: () => void): () => void;
  /** Serves other paths (the playground page): return true when handled. Web API paths stay first. */
  mount(handler: (req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>): void;
  readonly rateLimited: number;
  /** 429s answered because a method went past its tier (the `tiers` option), by method. */
  readonly tierLimited: Record<string, number>;
  /** Web API calls received and not answered yet (held by delayNext or the latency), oldest first. */
  readonly inFlight: SlackCall[];
  reset(): void;
  close(): Promise<void>;
}

type Result = Record<string, unknown>;
type Handler = (args: Record<string, any>, call: SlackCall) => Result;

class SlackError extends Error {
  constructor(
    readonly code: string,
    readonly extra: Result = {},
  ) {
    super(code);
  }
}
const fail = (code: string, extra?: Result): never => {
  throw new SlackError(code, extra);
};
const required = (args: Record<string, any>, name: string, code = "invalid_arguments"): any => {
  const v = args[name];
  if (v === undefined || v === null || v === "") fail(code);
  return v;
};

/** Form fields the WebClient JSON-encodes (non-primitive values); parsed back to objects. */
const JSON_FIELDS = new Set(["chunks", "blocks", "attachments", "view", "files", "metadata", "unfurls", "user_auth_blocks", "options"]);

// Microseconds from the process's start (well under 2^53): a playground restarted on its kept database
// never gives a new message the ts of an old one (a reply would be taken for the old message's thread).
const TS_BASE = Date.now() * 1000;
let seq = 0; // process-wide so ids and ts never repeat across fakes or resets
const nextSeq = () => ++seq;
const pad = (n: number) => String(n).padStart(10, "0");

class Fault {
  constructor(
    readonly kind: "fail" | "ratelimit" | "outage",
    readonly value: string | number,
  ) {}
}

class FakeSlackServer implements FakeSlack {
  url = "";
  responseUrlBase = "";
  calls: SlackCall[] = [];
  files: FakeFile[] = [];
  views = new Map<string, FakeView>();
  ephemerals: FakeEphemeral[] = [];
  violations: LimitViolation[] = [];
  rateLimited = 0;
  tierLimited: Record<string, number> = {};
  inFlight: SlackCall[] = [];

  readonly botUserId: string;
  private readonly teamId: string;
  private msgs = new Map<string, FakeMessage>(); // key channel/ts
  private denied = new Map<string, string>();
  /** Workspaces where streaming answers an error (refuseStreaming), and the error. */
  private streamingRefused = new Map<string, string>();
  /** Direct messages and group DMs conversations.open made: the sorted user ids → channel id. */
  private conversations = new Map<string, string>();
  private usergroups = new Map<string, string[]>();
  private users = new Map<string, Record<string, unknown>>();
  private members = new Map<string, string[]>();
  private usedTriggers = new Set<string>();
  private uploads = new Map<string, { filename: string; length?: number; bytes?: Buffer }>();
  private responseUses = new Map<string, number>();
  private updatesByChannel = new Map<string, number[]>();
  /** The tiers' buckets: theoretical arrival time of the next call, per bucket key. */
  private cells = new Map<string, number>();
  private faults = new Map<string, Fault[]>();
  private refusals = new Map<string, { fault: Fault; when: (args: Record<string, unknown>) => boolean }[]>();
  private delays = new Map<string, number[]>();
  private lateAnswers = new Map<string, number[]>();
  private outageUntil = 0;
  private waiters = new Set<() => void>();
  private triggerUsers = new Map<string, string>();
  /** When each ts was handed out (ts values count up from a fixed base, not from the clock). */
  private times = new Map<string, number>();
  private responseTargets = new Map<string, ResponseTarget>();
  private listeners = new Set<() => void>();
  /** The Web API method being answered (for violation records). */
  private currentMethod = "";
  private mounted: ((req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>)[] = [];
  /** Install codes not yet exchanged. */
  private installCodes = new Map<string, InstallGrant>();
  /** Tokens issued by oauth.v2.access: who they belong to. */
  private issued = new Map<string, { kind: "bot" | "user"; grant: InstallGrant; botUserId: string; botId: string; revoked?: boolean }>();
  private readonly server = createServer((req, res) => void this.serve(req, res));

  constructor(private readonly opts: FakeSlackOptions) {
    this.botUserId = opts.botUserId ?? "U0BOT";
    this.teamId = opts.teamId ?? "T0TEAM";
  }

  async listen(): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(this.opts.port ?? 0, "127.0.0.1", () => resolve());
    });
    const { port } = this.server.address() as AddressInfo;
    this.url = `http://127.0.0.1:${port}/api/`;
    this.responseUrlBase = `http://127.0.0.1:${port}/response/`;
    return this;
  }

  // ---------------------------------------------------------------- test controls

  callsTo(method: string): SlackCall[] {
    return this.calls.filter((c) => c.method === method);
  }

  waitForCalls(method: string, count: number, timeoutMs = 5000): Promise<SlackCall[]> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const got = this.callsTo(method);
        if (got.length < count) return false;
        this.waiters.delete(check);
        clearTimeout(timer);
        resolve(got);
        return true;
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        const seen = new Map<string, number>();
        for (const c of this.calls) seen.set(c.method, (seen.get(c.method) ?? 0) + 1);
        const list = [...seen].map(([m, n]) => `${m}×${n}`).join(", ") || "none";
        reject(new Error(`fake-slack: expected ${count} ${method} call(s) within ${timeoutMs} ms, got ${this.callsTo(method).length}; methods seen: ${list}`));
      }, timeoutMs);
      if (!check()) this.waiters.add(check);
    });
  }

  failNext(method: string, error: string, times = 1): void {
    this.queue(this.faults, method, times, new Fault("fail", error));
  }

  refuseWhen(method: string, error: string, when: (args: Record<string, unknown>) => boolean): void {
    this.queue(this.refusals, method, 1, { fault: new Fault("fail", error), when });
  }

  rateLimitNext(method: string, times = 1, retryAfterSeconds = 1): void {
    this.queue(this.faults, method, times, new Fault("ratelimit", retryAfterSeconds));
  }

  delayNext(method: string, ms: number, times = 1): void {
    this.queue(this.delays, method, times, ms);
  }

  answerLateNext(method: string, ms: number, times = 1): void {
    this.queue(this.lateAnswers, method, times, ms);
  }

  outage(ms: number): void {
    this.outageUntil = Date.now() + ms;
  }

  denyChannel(channel: string, error = "not_in_channel"): void {
    this.denied.set(channel, error);
  }

  refuseStreaming(teamId: string, error = "unknown_method"): void {
    this.streamingRefused.set(teamId, error);
  }

  allowStreaming(teamId: string): void {
    this.streamingRefused.delete(teamId);
  }

  conversationWith(...userIds: string[]): string | undefined {
    return this.conversations.get([...new Set(userIds)].sort().join(","));
  }

  setUsergroup(id: string, userIds: string[]): void {
    this.usergroups.set(id, [...userIds]);
  }

  setMembers(channel: string, userIds: string[]): void {
    this.members.set(channel, [...userIds]);
  }

  setUser(id: string, user: Record<string, unknown>): void {
    this.users.set(id, user);
  }

  responseUrl(channel?: string, messageTs?: string): string {
    return this.responseUrlBase + [nextSeq(), channel, messageTs].filter(Boolean).join("/");
  }

  issueTrigger(user: string): string {
    const trigger = `trig-${nextSeq()}.${user}`;
    this.triggerUsers.set(trigger, user);
    return trigger;
  }

  responseUrlFor(target: ResponseTarget): string {
    const id = String(nextSeq());
    this.responseTargets.set(id, target);
    return this.responseUrlBase + [id, target.channel, target.messageTs].filter(Boolean).join("/");
  }

  closeView(viewId: string): void {
    this.views.delete(viewId);
    this.changed();
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  mount(handler: (req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>): void {
    this.mounted.push(handler);
  }

  /** Tells onChange listeners that state may have changed. */
  changed(): void {
    for (const listener of [...this.listeners]) {
      try {
        listener();
      } catch {
        /* a listener's problem is its own */
      }
    }
  }

  issueInstallCode(grant: InstallGrant): string {
    const code = `code-${nextSeq()}-${grant.teamId}`;
    this.installCodes.set(code, grant);
    return code;
  }

  botTokenOf(teamId: string): string | undefined {
    for (const [token, t] of this.issued) if (t.kind === "bot" && !t.revoked && t.grant.teamId === teamId) return token;
    return undefined;
  }

  revokeTeam(teamOrEnterpriseId: string): void {
    for (const t of this.issued.values()) if (t.grant.teamId === teamOrEnterpriseId || t.grant.enterpriseId === teamOrEnterpriseId) t.revoked = true;
  }

  messages(channel: string): FakeMessage[] {
    return [...this.msgs.values()].filter((m) => m.channel === channel).sort((a, b) => a.ts.localeCompare(b.ts));
  }

  postAsUser(channel: string, user: string, text: string, threadTs?: string): FakeMessage {
    const msg = this.post(channel, { text, ...(threadTs ? { thread_ts: threadTs } : {}) }, user);
    this.changed();
    return msg;
  }

  reset(): void {
    this.calls = [];
    this.cells.clear();
    this.tierLimited = {};
    this.files = [];
    this.views.clear();
    this.ephemerals = [];
    this.violations = [];
    this.rateLimited = 0;
    for (const m of [
      this.msgs,
      this.conversations,
      this.denied,
      this.streamingRefused,
      this.usergroups,
      this.users,
      this.uploads,
      this.responseUses,
      this.updatesByChannel,
      this.faults,
      this.refusals,
      this.delays,
    ])
      m.clear();
    this.usedTriggers.clear();
    this.triggerUsers.clear();
    this.responseTargets.clear();
    this.installCodes.clear();
    this.issued.clear();
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private queue<T>(map: Map<string, T[]>, method: string, times: number, item: T): void {
    const q = map.get(method) ?? [];
    for (let i = 0; i < times; i++) q.push(item);
    map.set(method, q);
  }

  // ---------------------------------------------------------------- HTTP

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    if (!path.startsWith("/api/") && !path.startsWith("/upload/") && !path.startsWith("/response/")) {
      for (const handler of this.mounted) {
        try {
          if (await handler(req, res)) return;
        } catch (err) {
          if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain; charset=utf-8" }).end(String((err as Error).message ?? err));
          return;
        }
      }
    }
    const raw = await readBody(req);
    const call: SlackCall = { method: "", args: {}, at: Date.now(), path };
    try {
      call.args = await parseArgs(raw, req.headers["content-type"] ?? "");
    } catch {
      call.args = { _raw: raw.toString("utf8") };
    }
    const auth = req.headers.authorization;
    const token = auth?.startsWith("Bearer ") ? auth.slice(7) : typeof call.args.token === "string" ? call.args.token : undefined;
    if (token !== undefined) {
      call.token = token;
      call.team = this.issued.get(token)?.grant.teamId ?? this.teamId;
    }

    let status = 200;
    let body: Result;
    const headers: Record<string, string> = { "content-type": "application/json; charset=utf-8" };

    if (path.startsWith("/upload/")) {
      call.method = "upload";
      ({ status, body } = this.receiveUpload(path.slice("/upload/".length), raw, call));
    } else if (path.startsWith("/response/") || path.startsWith("/api/response/")) {
      call.method = "response_url";
      this.currentMethod = "response_url";
      ({ status, body } = this.receiveResponseUrl(path.replace(/^(\/api)?\/response\//, ""), call.args));
    } else {
      call.method = path.replace(/^\/api\//, "").replace(/^\//, "");
      const delay = (this.delays.get(call.method)?.shift() ?? 0) + this.latency();
      this.inFlight.push(call);
      if (delay) await sleep(delay);
      this.inFlight.splice(this.inFlight.indexOf(call), 1);
      const fault =
        Date.now() < this.outageUntil ? new Fault("outage", "") : (this.faults.get(call.method)?.shift() ?? this.refusals.get(call.method)?.find((r) => r.when(call.args))?.fault);
      const tier3 = !fault && call.method === "chat.update" ? this.tier3Exceeded(String(call.args.channel ?? "")) : undefined;
      const tier = !fault && tier3 === undefined ? this.tierExceeded(call) : undefined;
      if (fault?.kind === "ratelimit" || tier3 !== undefined || tier !== undefined) {
        status = 429;
        headers["retry-after"] = String(fault?.kind === "ratelimit" ? fault.value : (tier3 ?? tier));
        if (tier !== undefined) this.tierLimited[call.method] = (this.tierLimited[call.method] ?? 0) + 1;
        body = { ok: false, error: "ratelimited" };
        this.rateLimited++;
      } else if (fault?.kind === "outage") {
        status = 503;
        body = { ok: false, error: "service_unavailable" };
      } else if (fault) {
        body = { ok: false, error: fault.value };
      } else {
        this.currentMethod = call.method;
        body = this.dispatch(call);
        const late = this.lateAnswers.get(call.method)?.shift();
        if (late) await sleep(late);
      }
    }
    if (body.ok === false) call.error = String(body.error);
    else if (typeof body.ts === "string") call.ts = body.ts;
    this.calls.push(call);
    for (const w of [...this.waiters]) w();
    res.writeHead(status, headers).end(JSON.stringify(body));
    this.changed();
  }

  private latency(): number {
    const l = this.opts.latencyMs;
    if (l === undefined) return 0;
    if (typeof l === "number") return l;
    return l.min + Math.random() * (l.max - l.min);
  }

  private dispatch(call: SlackCall): Result {
    const handler = this.handlers[call.method];
    if (!handler) return { ok: false, error: "unknown_method" };
    // oauth.v2.access authenticates with the client id and secret, not a token.
    if (call.method === "oauth.v2.access") {
      try {
        return { ok: true, ...this.exchangeInstallCode(call.args as Record<string, any>) };
      } catch (e) {
        if (e instanceof SlackError) return { ok: false, error: e.code };
        throw e;
      }
    }
    if (!call.token) return { ok: false, error: "not_authed" };
    if (this.issued.get(call.token)?.revoked) return { ok: false, error: "token_revoked" };
    try {
      return { ok: true, ...handler(call.args as Record<string, any>, call) };
    } catch (e) {
      if (e instanceof SlackError) return { ok: false, error: e.code, ...e.extra };
      return { ok: false, error: "fatal_error", detail: String(e) };
    }
  }

  /** Retry-After seconds when this chat.update would exceed tier3PerMinute, else undefined (and counts it). */
  private tier3Exceeded(channel: string): number | undefined {
    const limit = this.opts.tier3PerMinute;
    if (limit === undefined) return undefined;
    const now = Date.now();
    const recent = (this.updatesByChannel.get(channel) ?? []).filter((t) => now - t < 60_000);
    this.updatesByChannel.set(channel, recent);
    if (recent.length >= limit) return this.opts.retryAfterSeconds ?? 1;
    recent.push(now);
    return undefined;
  }

  /** Retry-After seconds when this call goes past its method's tier (the `tiers` option), else undefined (and spends a token). */
  private tierExceeded(call: SlackCall): number | undefined {
    const option = this.opts.tiers;
    if (!option) return undefined;
    const rate = tierOf(call.method, option === true ? TIERS : { ...TIERS, ...option });
    if (!rate) return undefined;
    const key = bucketKey({ team: call.team ?? this.teamId, method: call.method, channel: String(call.args.channel ?? call.args.channel_id ?? "") }, rate);
    const now = Date.now();
    const taken = takeCell(this.cells.get(key), now, rate);
    if (taken.ok) {
      this.cells.set(key, taken.tat);
      return undefined;
    }
    return Math.max(1, Math.ceil((taken.retryAt - now) / 1000));
  }

  // ---------------------------------------------------------------- state helpers

  private key = (channel: string, ts: string) => `${channel}/${ts}`;

  private newTs(): string {
    const s = String(TS_BASE + nextSeq() * 100);
    const ts = `${s.slice(0, 10)}.${s.slice(10)}`;
    this.times.set(ts, Date.now());
    return ts;
  }

  timeOf(ts: string): number | undefined {
    return this.times.get(ts);
  }

  private newHash(): string {
    return `${Math.floor(Date.now() / 1000)}.${nextSeq().toString(36).padStart(8, "0")}`;
  }

  private checkChannel(channel: string): void {
    const denied = this.denied.get(channel);
    if (denied) fail(denied);
  }

  private checkStreaming(call: SlackCall): void {
    const refused = this.streamingRefused.get(call.team ?? this.teamId);
    if (refused) fail(refused);
  }

  /** chat.appendStream and chat.stopStream: chunks onto a message still streaming. */
  private continueStream(args: Record<string, any>, call: SlackCall, stop: boolean): Result {
    this.checkStreaming(call);
    if (typeof args.channel === "string") this.checkChannel(args.channel);
    required(args, "ts", "invalid_arguments");
    const msg = this.existing(args.channel, args.ts);
    const stream = msg.stream?.state === "streaming" ? msg.stream : fail("message_not_in_streaming_state");
    if (!stop || args.chunks !== undefined || args.markdown_text !== undefined) {
      const problem = chunksProblem(args.chunks, args.markdown_text);
      if (problem) fail(problem);
    }
    applyChunks(stream, args.chunks, args.markdown_text);
    if (stop) {
      stream.state = "stopped";
      if (Array.isArray(args.blocks)) msg.blocks = args.blocks;
    } else stream.appends++;
    msg.text = streamText(stream);
    msg.updated = Date.now();
    return { channel: msg.channel, ts: msg.ts };
  }

  private existing(channel: unknown, ts: unknown): FakeMessage {
    if (typeof channel !== "string" || !channel) fail("channel_not_found");
    const msg = this.msgs.get(this.key(String(channel), String(ts ?? "")));
    return msg ?? fail("message_not_found");
  }

  private post(channel: string, args: Record<string, any>, user = this.botUserId): FakeMessage {
    if (args.text === undefined && args.blocks === undefined && args.attachments === undefined) fail("no_text");
    this.checkMessageBlocks(args);
    const msg: FakeMessage = { channel, ts: this.newTs(), user };
    if (args.thread_ts) msg.thread_ts = String(args.thread_ts);
    if (args.text !== undefined) msg.text = String(args.text).slice(0, 40_000);
    if (args.blocks !== undefined) msg.blocks = args.blocks;
    if (args.metadata && typeof args.metadata === "object" && typeof args.metadata.event_type === "string") msg.metadata = args.metadata;
    this.msgs.set(this.key(channel, msg.ts), msg);
    return msg;
  }

  private edit(msg: FakeMessage, args: Record<string, any>): void {
    this.checkMessageBlocks(args);
    if (args.text !== undefined) msg.text = String(args.text).slice(0, 40_000);
    if (args.blocks !== undefined) msg.blocks = args.blocks;
    msg.updated = Date.now();
  }

  /** A message as conversations.history/replies list it: metadata only when asked for. */
  private historyJson(m: FakeMessage, includeMetadata: unknown): Result {
    const { metadata, ...rest } = this.messageJson(m) as Result & { metadata?: unknown };
    return includeMetadata === true || includeMetadata === "true" ? { ...rest, metadata } : rest;
  }

  private messageJson(m: FakeMessage): Result {
    return { type: "message", bot_id: m.user === this.botUserId ? "B0BOT" : undefined, app_id: "A0APP", team: this.teamId, ...m };
  }

  /** Records what breaks Slack's documented limits, whether or not the call is then rejected. */
  private recordViolations(method: string, problems: string[], where: Omit<LimitViolation, "method" | "at" | "problems"> = {}): void {
    if (problems.length) this.violations.push({ method, at: Date.now(), ...where, problems });
  }

  private messageViolations(args: Record<string, any>): string[] {
    const problems: string[] = [];
    if (typeof args.text === "string" && args.text.length > 40_000) problems.push(`text: ${args.text.length} > 40000 (Slack truncates it)`);
    if (Array.isArray(args.blocks)) {
      try {
        problems.push(...messageLimitViolations(args.blocks as types.KnownBlock[]));
      } catch (err) {
        problems.push(`blocks could not be checked: ${(err as Error).message}`);
      }
    }
    return problems;
  }

  private checkMessageBlocks(args: Record<string, any>): void {
    this.recordViolations(this.currentMethod, this.messageViolations(args), {
      channel: args.channel ? String(args.channel) : undefined,
      ts: args.ts ? String(args.ts) : undefined,
    });
    if (this.opts.validateBlocks === false || args.blocks === undefined) return;
    if (!Array.isArray(args.blocks)) fail("invalid_blocks_format");
    const blocks = args.blocks as any[];
    if (blocks.length > 50) fail("invalid_blocks", { response_metadata: { messages: ["[ERROR] no more than 50 items allowed [json-pointer:/blocks]"] } });
    checkBlockLimits(blocks, "invalid_blocks");
    if (blockTextLength(blocks) > 12_000) fail("msg_blocks_too_long");
  }

  private checkView(view: any): void {
    const method = this.currentMethod;
    if (!view || typeof view !== "object") fail("invalid_arguments");
    if (view.type === "modal" && Array.isArray(view.blocks) && view.title) {
      try {
        this.recordViolations(method, modalLimitViolations(view as types.ModalView));
      } catch (err) {
        this.recordViolations(method, [`view could not be checked: ${(err as Error).message}`]);
      }
    } else if (Array.isArray(view.blocks)) {
      const problems = view.blocks.length > 100 ? [`blocks: ${view.blocks.length} > 100`] : [];
      try {
        problems.push(
          ...messageLimitViolations(view.blocks as types.KnownBlock[]).filter((p) => !p.startsWith("blocks:") && !p.startsWith("block text") && !p.startsWith("markdown")),
        );
      } catch {
        /* checked above as far as possible */
      }
      this.recordViolations(method, problems);
    }
    if (this.opts.validateBlocks === false) return;
    const blocks: any[] = Array.isArray(view.blocks) ? view.blocks : [];
    if (blocks.length > 100) fail("invalid_arguments", { response_metadata: { messages: ["[ERROR] no more than 100 items allowed [json-pointer:/view/blocks]"] } });
    for (const k of ["title", "submit", "close"])
      if ((view[k]?.text?.length ?? 0) > 24)
        fail("invalid_arguments", { response_metadata: { messages: [`[ERROR] must be less than 25 characters [json-pointer:/view/${k}/text]`] } });
    if ((view.private_metadata?.length ?? 0) > 3000)
      fail("invalid_arguments", { response_metadata: { messages: ["[ERROR] must be less than 3001 characters [json-pointer:/view/private_metadata]"] } });
    checkBlockLimits(blocks, "invalid_arguments");
  }

  private useTrigger(args: Record<string, any>): void {
    const trigger = String(required(args, "trigger_id"));
    if (this.usedTriggers.has(trigger)) fail("trigger_exchanged");
    this.usedTriggers.add(trigger);
  }

  private storeView(view: any, existing?: FakeView, user?: string): Result {
    this.checkView(view);
    const id = existing?.id ?? `V${pad(nextSeq())}`;
    const hash = this.newHash();
    const stored = {
      ...view,
      id,
      team_id: this.teamId,
      app_id: "A0APP",
      bot_id: "B0BOT",
      hash,
      state: { values: {} },
      private_metadata: view.private_metadata ?? "",
      callback_id: view.callback_id ?? "",
      external_id: view.external_id ?? "",
      root_view_id: existing?.view.root_view_id ?? id,
      previous_view_id: null,
    };
    const entry: FakeView = { id, hash, view: stored };
    const owner = user ?? existing?.user;
    if (owner) entry.user = owner;
    this.views.set(id, entry);
    return { view: stored };
  }

  private findView(args: Record<string, any>): FakeView {
    if (args.view_id) return this.views.get(String(args.view_id)) ?? fail("not_found");
    if (args.external_id) return [...this.views.values()].find((v) => v.view.external_id === args.external_id) ?? fail("not_found");
    return fail("invalid_arguments");
  }

  private checkHash(entry: FakeView | undefined, hash: unknown): void {
    if (entry && hash !== undefined && hash !== "" && hash !== entry.hash) fail("hash_conflict");
  }

  private receiveUpload(fileId: string, raw: Buffer, call: SlackCall): { status: number; body: Result } {
    const up = this.uploads.get(fileId);
    if (!up) return { status: 404, body: { ok: false, error: "file_not_found" } };
    const field = (call.args as Record<string, unknown>).body ?? (call.args as Record<string, unknown>).file;
    up.bytes = Buffer.isBuffer(field) ? field : typeof field === "string" ? Buffer.from(field) : raw;
    call.args = { file_id: fileId, length: up.bytes.length };
    return { status: 200, body: { ok: true } };
  }

  private receiveResponseUrl(rest: string, args: Record<string, any>): { status: number; body: Result } {
    const [id = "", channel, ts] = rest.split("/");
    const key = `${id}/${channel ?? ""}`;
    const uses = (this.responseUses.get(key) ?? 0) + 1;
    this.responseUses.set(key, uses);
    if (uses > 5) return { status: 404, body: { ok: false, error: "used_url" } };
    const replace = args.replace_original === true || args.replace_original === "true";
    const remove = args.delete_original === true || args.delete_original === "true";
    try {
      const ephemeral = channel && ts && (replace || remove) ? this.ephemeralAt(channel, ts, this.responseTargets.get(id)?.user) : undefined;
      if (ephemeral) {
        // The clicked message was an ephemeral: it is replaced (whole) or removed, for its one viewer.
        this.checkMessageBlocks(args);
        if (remove) this.ephemerals.splice(this.ephemerals.indexOf(ephemeral), 1);
        else this.replaceEphemeral(ephemeral, args);
      } else if (channel && ts && replace) {
        this.edit(this.existing(channel, ts), args);
      } else if (channel && ts && remove) {
        this.msgs.delete(this.key(channel, this.existing(channel, ts).ts));
      } else if (channel && args.response_type === "in_channel") {
        this.post(channel, args);
      } else {
        // An ephemeral answer: shown to whoever the response_url was handed to.
        const target = this.responseTargets.get(id);
        if (target?.user && (target.channel ?? channel)) {
          this.checkMessageBlocks(args);
          const ephemeral: FakeEphemeral = { channel: (target.channel ?? channel)!, user: target.user, ts: this.newTs() };
          if (target.threadTs) ephemeral.thread_ts = target.threadTs;
          if (args.text !== undefined) ephemeral.text = String(args.text).slice(0, 40_000);
          if (Array.isArray(args.blocks)) ephemeral.blocks = args.blocks;
          this.ephemerals.push(ephemeral);
        }
      }
    } catch (e) {
      if (e instanceof SlackError) return { status: 404, body: { ok: false, error: e.code } };
      throw e;
    }
    return { status: 200, body: { ok: true } };
  }

  /** The ephemeral shown in this channel with this ts (to this user, when the response_url names one). */
  private ephemeralAt(channel: string, ts: string, user: string | undefined): FakeEphemeral | undefined {
    return this.ephemerals.find((e) => e.channel === channel && e.ts === ts && (!user || e.user === user));
  }

  /** A replacement is a whole new message in the same place: what it does not carry is gone. */
  private replaceEphemeral(e: FakeEphemeral, args: Record<string, any>): void {
    delete e.text;
    delete e.blocks;
    if (args.text !== undefined) e.text = String(args.text).slice(0, 40_000);
    if (Array.isArray(args.blocks)) e.blocks = args.blocks;
    e.updated = Date.now();
  }

  /** oauth.v2.access: the answer Slack gives for a bot install (and a user token when user scopes were granted). */
  private exchangeInstallCode(args: Record<string, any>): Result {
    const client = this.opts.oauthClient;
    if (client && args.client_id !== client.clientId) fail("invalid_client_id");
    if (client && args.client_secret !== client.clientSecret) fail("bad_client_secret");
    const code = String(args.code ?? "");
    const grant = this.installCodes.get(code) ?? fail("invalid_code");
    this.installCodes.delete(code);
    // A reinstall keeps the workspace's bot token, as Slack does; a new workspace gets its own.
    const botToken = this.botTokenOf(grant.teamId) ?? `xoxb-${grant.teamId}-${nextSeq()}-${Math.random().toString(36).slice(2, 12)}`;
    const botUserId = `U0BOT${grant.teamId.slice(1)}`;
    const entry = { kind: "bot" as const, grant, botUserId, botId: `B${grant.teamId.slice(1)}` };
    this.issued.set(botToken, entry);
    const scopes = grant.scopes ?? [
      "commands",
      "chat:write",
      "channels:read",
      "groups:read",
      "im:read",
      "mpim:read",
      "im:write",
      "mpim:write",
      "channels:join",
      "files:write",
      "usergroups:read",
      "users:read",
      "users:read.email",
    ];
    const userId = grant.userId ?? "U0INSTALLER";
    const authedUser: Result = { id: userId };
    if (grant.userScopes?.length) {
      const userToken = `xoxp-${grant.teamId}-${nextSeq()}-${Math.random().toString(36).slice(2, 12)}`;
      this.issued.set(userToken, { ...entry, kind: "user" });
      Object.assign(authedUser, { scope: grant.userScopes.join(","), access_token: userToken, token_type: "user" });
    }
    return {
      app_id: "A0APP",
      authed_user: authedUser,
      scope: scopes.join(","),
      token_type: "bot",
      access_token: botToken,
      bot_user_id: botUserId,
      team: grant.isEnterpriseInstall ? null : { id: grant.teamId, name: grant.teamName ?? grant.teamId },
      enterprise: grant.enterpriseId ? { id: grant.enterpriseId, name: grant.enterpriseId } : null,
      is_enterprise_install: !!grant.isEnterpriseInstall,
    };
  }

  // ---------------------------------------------------------------- Web API methods

  socketModeUrl?: string;

  private readonly handlers: Record<string, Handler> = {
    // Socket Mode: called with the app-level token; answers the URL of a test WebSocket server.
    "apps.connections.open": () => (this.socketModeUrl ? { url: this.socketModeUrl } : fail("invalid_auth")),
    "api.test": (args) => ({ args }),
    "auth.test": (_args, call) => {
      // A token oauth.v2.access issued answers for its own workspace.
      const issued = call.token ? this.issued.get(call.token) : undefined;
      if (issued) {
        const { grant } = issued;
        return {
          url: `https://${grant.teamId.toLowerCase()}.example.slack.com/`,
          team: grant.teamName ?? grant.teamId,
          user: "crewline",
          team_id: grant.isEnterpriseInstall ? undefined : grant.teamId,
          ...(grant.enterpriseId ? { enterprise_id: grant.enterpriseId } : {}),
          user_id: issued.kind === "bot" ? issued.botUserId : (grant.userId ?? "U0INSTALLER"),
          ...(issued.kind === "bot" ? { bot_id: issued.botId } : {}),
          is_enterprise_install: !!grant.isEnterpriseInstall,
        };
      }
      return {
        url: "https://example.slack.com/",
        team: "Crewline Test",
        user: "crewline",
        team_id: this.teamId,
        user_id: this.botUserId,
        bot_id: "B0BOT",
        is_enterprise_install: false,
      };
    },
    // Answered in dispatch (it takes the client id and secret instead of a token).
    "oauth.v2.access": () => fail("invalid_code"),

    "chat.postMessage": (args) => {
      const channel = String(required(args, "channel", "channel_not_found"));
      this.checkChannel(channel);
      const msg = this.post(channel, args);
      return { channel, ts: msg.ts, message: this.messageJson(msg) };
    },
    "chat.update": (args) => {
      if (typeof args.channel === "string") this.checkChannel(args.channel);
      const msg = this.existing(args.channel, args.ts);
      this.edit(msg, args);
      return { channel: msg.channel, ts: msg.ts, text: msg.text ?? "", message: this.messageJson(msg) };
    },
    // Message streaming: a streamed reply in a thread, built by chunks (src/playground/slack-stream.ts).
    "chat.startStream": (args, call) => {
      this.checkStreaming(call);
      const channel = String(required(args, "channel", "channel_not_found"));
      this.checkChannel(channel);
      const threadTs = String(required(args, "thread_ts", "invalid_arguments"));
      // Outside a direct message a stream is addressed to someone: both recipient fields are required.
      if (!channel.startsWith("D") && (!args.recipient_user_id || !args.recipient_team_id)) fail("invalid_arguments");
      const problem = chunksProblem(args.chunks, args.markdown_text);
      if (problem) fail(problem);
      const stream: FakeStream = {
        state: "streaming",
        recipientUserId: args.recipient_user_id ? String(args.recipient_user_id) : undefined,
        recipientTeamId: args.recipient_team_id ? String(args.recipient_team_id) : undefined,
        displayMode: args.task_display_mode ? String(args.task_display_mode) : undefined,
        tasks: [],
        text: "",
        appends: 0,
      };
      applyChunks(stream, args.chunks, args.markdown_text);
      const msg: FakeMessage = { channel, ts: this.newTs(), user: this.botUserId, thread_ts: threadTs, stream, text: streamText(stream) };
      this.msgs.set(this.key(channel, msg.ts), msg);
      return { channel, ts: msg.ts };
    },
    "chat.appendStream": (args, call) => this.continueStream(args, call, false),
    "chat.stopStream": (args, call) => this.continueStream(args, call, true),
    "chat.postEphemeral": (args) => {
      const channel = String(required(args, "channel", "channel_not_found"));
      required(args, "user", "user_not_found");
      this.checkChannel(channel);
      if (args.text === undefined && args.blocks === undefined) fail("no_text");
      this.checkMessageBlocks(args);
      const ephemeral: FakeEphemeral = { channel, user: String(args.user), ts: this.newTs() };
      if (args.thread_ts) ephemeral.thread_ts = String(args.thread_ts);
      if (args.text !== undefined) ephemeral.text = String(args.text).slice(0, 40_000);
      if (Array.isArray(args.blocks)) ephemeral.blocks = args.blocks;
      this.ephemerals.push(ephemeral);
      return { message_ts: ephemeral.ts };
    },
    "chat.delete": (args) => {
      const msg = this.existing(args.channel, args.ts);
      this.msgs.delete(this.key(msg.channel, msg.ts));
      return { channel: msg.channel, ts: msg.ts };
    },
    "chat.getPermalink": (args) => {
      const channel = String(required(args, "channel", "channel_not_found"));
      const ts = String(required(args, "message_ts", "message_not_found"));
      const msg = this.msgs.get(this.key(channel, ts));
      const thread = msg?.thread_ts && msg.thread_ts !== ts ? `?thread_ts=${msg.thread_ts}&cid=${channel}` : "";
      return { channel, permalink: `https://example.slack.com/archives/${channel}/p${ts.replace(".", "")}${thread}` };
    },

    "conversations.replies": (args) => {
      const channel = String(required(args, "channel", "channel_not_found"));
      const ts = String(required(args, "ts", "thread_not_found"));
      this.checkChannel(channel);
      const thread = this.messages(channel).filter((m) => m.ts === ts || m.thread_ts === ts);
      if (!thread.length) fail("thread_not_found");
      return { messages: thread.map((m) => this.historyJson(m, args.include_all_metadata)), has_more: false };
    },
    "conversations.history": (args) => {
      const channel = String(required(args, "channel", "channel_not_found"));
      this.checkChannel(channel);
      const top = this.messages(channel)
        .filter((m) => !m.thread_ts || m.thread_ts === m.ts)
        .reverse()
        .slice(0, Number(args.limit ?? 100));
      return { messages: top.map((m) => this.historyJson(m, args.include_all_metadata)), has_more: false };
    },
    "conversations.info": (args) => {
      const id = String(required(args, "channel", "channel_not_found"));
      const denied = this.denied.get(id);
      if (denied && denied !== "not_in_channel") fail(denied);
      const isIm = id.startsWith("D");
      return {
        channel: {
          id,
          name: isIm ? undefined : id.toLowerCase(),
          is_channel: !isIm,
          is_im: isIm,
          is_private: false,
          is_archived: false,
          is_member: !denied,
          user: isIm ? "U0USER" : undefined,
        },
      };
    },
    "conversations.members": (args) => {
      const id = String(required(args, "channel", "channel_not_found"));
      const denied = this.denied.get(id);
      if (denied) fail(denied === "not_in_channel" ? "channel_not_found" : denied);
      // Pages of `limit` (default 100) with a numeric cursor, as Slack paginates.
      const all = this.members.get(id) ?? [];
      const limit = Math.max(1, Number(args.limit ?? 100));
      const from = Number(args.cursor || 0);
      const next = from + limit < all.length ? String(from + limit) : "";
      return { members: all.slice(from, from + limit), response_metadata: { next_cursor: next } };
    },
    // A direct message with one user (D…), or a group DM with several (G…, up to 8), opened once per set of users.
    "conversations.open": (args) => {
      if (args.channel) return { channel: { id: String(args.channel) } };
      const users = [
        ...new Set(
          String(args.users ?? "")
            .split(",")
            .map((u) => u.trim())
            .filter(Boolean),
        ),
      ];
      if (!users.length) fail("users_list_not_supplied");
      if (users.length > 8) fail("too_many_users");
      for (const u of users) if (!/^[UW][A-Z0-9]+$/.test(u) || u === this.botUserId) fail(u === this.botUserId ? "cannot_dm_bot" : "user_not_found");
      const key = [...users].sort().join(",");
      let id = this.conversations.get(key);
      if (!id) {
        id = `${users.length === 1 ? "D" : "G"}${pad(nextSeq())}`;
        this.conversations.set(key, id);
        this.members.set(id, [...users, this.botUserId]);
      }
      return { channel: { id }, already_open: false, no_op: false };
    },
    "conversations.join": (args) => {
      const id = String(required(args, "channel", "channel_not_found"));
      const denied = this.denied.get(id);
      if (denied && denied !== "not_in_channel") fail(denied);
      this.denied.delete(id);
      return { channel: { id, name: id.toLowerCase(), is_channel: true, is_private: false, is_member: true } };
    },

    "views.open": (args) => {
      this.useTrigger(args);
      return this.storeView(args.view, undefined, this.triggerUsers.get(String(args.trigger_id)));
    },
    "views.push": (args) => {
      this.useTrigger(args);
      const pushed = this.storeView(args.view, undefined, this.triggerUsers.get(String(args.trigger_id)));
      const below = [...this.views.values()].filter((v) => v.user && v.user === this.triggerUsers.get(String(args.trigger_id)) && v.view.type !== "home").at(-2);
      if (below) (pushed.view as Record<string, unknown>).previous_view_id = below.id;
      return pushed;
    },
    "views.update": (args) => {
      const entry = this.findView(args);
      this.checkHash(entry, args.hash);
      return this.storeView(args.view, entry);
    },
    "views.publish": (args) => {
      const user = String(required(args, "user_id", "user_not_found"));
      const entry = [...this.views.values()].find((v) => v.user === user && v.view.type === "home");
      this.checkHash(entry, args.hash);
      return this.storeView({ ...(args.view ?? {}), type: "home" }, entry, user);
    },

    "users.info": (args) => {
      const id = String(required(args, "user", "user_not_found"));
      if (!/^[UW]/.test(id)) fail("user_not_found");
      const name = id.toLowerCase();
      return {
        user: {
          id,
          team_id: this.teamId,
          name,
          real_name: name,
          tz: "UTC",
          is_bot: id === this.botUserId,
          deleted: false,
          profile: { display_name: name, real_name: name },
          ...this.users.get(id),
        },
      };
    },
    "users.lookupByEmail": (args) => {
      const email = String(required(args, "email", "invalid_email")).toLowerCase();
      for (const [id, user] of this.users) {
        const profile = (user.profile ?? {}) as Record<string, unknown>;
        if (String(profile.email ?? user.email ?? "").toLowerCase() === email) {
          return { user: { id, team_id: this.teamId, name: id.toLowerCase(), deleted: false, is_bot: false, ...user, profile: { ...profile, email } } };
        }
      }
      return fail("users_not_found");
    },
    "usergroups.users.list": (args) => {
      const users = this.usergroups.get(String(required(args, "usergroup", "no_such_subteam")));
      return { users: users ?? fail("no_such_subteam") };
    },

    "files.getUploadURLExternal": (args) => {
      const filename = String(required(args, "filename"));
      const file_id = `F${pad(nextSeq())}`;
      this.uploads.set(file_id, { filename, length: Number(args.length) });
      return { upload_url: this.url.replace(/\/api\/$/, `/upload/${file_id}`), file_id };
    },
    "files.completeUploadExternal": (args) => {
      const list = required(args, "files") as { id: string; title?: string }[];
      if (!Array.isArray(list)) fail("invalid_arguments");
      if (args.channel_id) this.checkChannel(String(args.channel_id));
      const done = list.map((f) => {
        const up = this.uploads.get(f.id);
        if (!up?.bytes) return fail("file_not_found");
        const file: FakeFile = { id: f.id, ts: this.newTs(), filename: up.filename, content: up.bytes.toString("utf8") };
        if (f.title !== undefined) file.title = f.title;
        if (args.channel_id) file.channel = String(args.channel_id);
        if (args.thread_ts) file.thread_ts = String(args.thread_ts);
        if (args.initial_comment) file.initial_comment = String(args.initial_comment);
        return file;
      });
      this.files.push(...done);
      return { files: done.map((f) => ({ id: f.id, name: f.filename, title: f.title ?? f.filename, size: Buffer.byteLength(f.content) })) };
    },
  };
}

// ---------------------------------------------------------------- parsing & limits

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

async function parseArgs(raw: Buffer, contentType: string): Promise<Record<string, unknown>> {
  let args: Record<string, unknown> = {};
  if (raw.length === 0) return args;
  if (contentType.includes("application/json")) {
    args = JSON.parse(raw.toString("utf8")) as Record<string, unknown>;
  } else if (contentType.includes("multipart/form-data")) {
    const form = await new Response(raw, { headers: { "content-type": contentType } }).formData();
    for (const [k, v] of form) args[k] = typeof v === "string" ? v : Buffer.from(await v.arrayBuffer());
  } else if (contentType.includes("application/x-www-form-urlencoded")) {
    args = Object.fromEntries(new URLSearchParams(raw.toString("utf8")));
  } else {
    return { body: raw };
  }
  for (const [k, v] of Object.entries(args)) {
    if (JSON_FIELDS.has(k) && typeof v === "string" && /^\s*[[{]/.test(v)) {
      try {
        args[k] = JSON.parse(v);
      } catch {
        /* leave as sent */
      }
    }
  }
  return args;
}

function checkBlockLimits(blocks: any[], code: string): void {
  for (const [i, b] of blocks.entries()) {
    const tooLong = (len: number | undefined, max: number, where: string) => {
      if ((len ?? 0) > max) fail(code, { response_metadata: { messages: [`[ERROR] must be less than ${max + 1} characters [json-pointer:/blocks/${i}/${where}]`] } });
    };
    if (b?.type === "section") {
      tooLong(b.text?.text?.length, 3000, "text/text");
      if ((b.fields?.length ?? 0) > 10) fail(code);
      for (const f of b.fields ?? []) tooLong(f?.text?.length, 2000, "fields");
    }
    if (b?.type === "header") tooLong(b.text?.text?.length, 150, "text/text");
    if (b?.type === "markdown") tooLong(b.text?.length, 12_000, "text");
    if (typeof b?.block_id === "string") tooLong(b.block_id.length, 255, "block_id");
  }
}

/** Sum of all `text` strings in a block tree (Slack rejects large totals with msg_blocks_too_long). */
function blockTextLength(node: unknown): number {
  if (Array.isArray(node)) return node.reduce((n: number, x) => n + blockTextLength(x), 0);
  if (!node || typeof node !== "object") return 0;
  return Object.entries(node).reduce((n, [k, v]) => n + (k === "text" && typeof v === "string" ? v.length : blockTextLength(v)), 0);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startFakeSlack(opts: FakeSlackOptions = {}): Promise<FakeSlack> {
  return new FakeSlackServer(opts).listen();
}
