// Configuration from the environment, parsed once at start-up. Every problem names the variable and
// what it is for; values (tokens!) are never echoed back.
import fs from "node:fs";
import path from "node:path";
import YAML from "yaml";
import { z } from "zod";
import { parseEncryptionKey } from "../crypto/token-cipher.js";
import { LOG_LEVELS, type LogLevel } from "../log/log.js";
import { parseDuration } from "../text/duration.js";

export interface ReviewerRules {
  users: string[];
  usergroups: string[];
}

export interface CrewConfig {
  name: string;
  baseUrl: string;
  token: string;
  userToken?: string;
  /** Channel ids where the crew may be started; unset: everywhere. */
  channels?: string[];
  /** Who may decide reviews; unset: anyone in the channel. */
  reviewers?: ReviewerRules;
  /** Ask the crew for its event stream (webhooks: {events, url, …}) on kickoff and resume. */
  eventStream?: boolean;
  /**
   * Workspace (team) ids that may use the crew; unset: every workspace. As parsed: `teams: ["*"]`
   * leaves it unset; a crew without `teams:` in OAuth mode gets [] (offered to no workspace).
   */
  teams?: string[];
  /** Distinct people who must approve a review before the crew is resumed (default 1). */
  approvals?: number;
  /** Whether the person who started a run may approve its reviews (default true; they may always reject). */
  selfApproval?: boolean;
  /** How long a review may wait for a decision (decideWithin / CREW_DECIDE_WITHIN); unset: no deadline. */
  decideWithinMs?: number;
  /** What happens at the deadline (onTimeout / CREW_ON_TIMEOUT); default remind. */
  onTimeout?: TimeoutAction;
  /** Who is mentioned, and may decide, once a review got its last reminder (escalateTo / CREW_ESCALATE_TO). */
  escalateTo?: ReviewerRules;
}

export const TIMEOUT_ACTIONS = ["reject", "approve", "remind"] as const;
export type TimeoutAction = (typeof TIMEOUT_ACTIONS)[number];

/** A flow deployment whose human feedback requests are answered in Slack (POST /hooks/flows/<name>). */
export interface FlowConfig {
  /** URL-safe name: the webhook path segment and the name shown in Slack. */
  name: string;
  /** The webhook signing secret from the flow's dashboard (Human in the Loop). */
  secret: string;
  /** Channel id where its requests are posted. */
  channel: string;
  /** Who may decide (besides the request's assignee); unset: anyone in the channel. */
  reviewers?: ReviewerRules;
  /** The workspace (team id T…) its channel belongs to; required when the app is installed by OAuth. */
  team?: string;
  /** The Enterprise Grid org (E…) of that workspace: finds the token of an org-wide install. */
  enterprise?: string;
  /** Distinct people who must choose an approve-like outcome before the flow gets the answer (default 1). */
  approvals?: number;
  /** How long a request may wait for an answer (decideWithin / FLOW_DECIDE_WITHIN); unset: no deadline. */
  decideWithinMs?: number;
  /** What happens at the deadline (onTimeout / FLOW_ON_TIMEOUT); default remind. */
  onTimeout?: TimeoutAction;
  /** Who is mentioned, and may answer, once a request got its last reminder (escalateTo / FLOW_ESCALATE_TO). */
  escalateTo?: ReviewerRules;
}

/** Distribution: every workspace installs the app (GET /slack/install); tokens come from the database. */
export interface OAuthConfig {
  clientId: string;
  clientSecret: string;
  stateSecret: string;
}

export interface AppConfig {
  slack: {
    /** Single-workspace mode; unset when `oauth` is set. */
    botToken?: string;
    signingSecret?: string;
    appToken?: string;
    apiUrl?: string;
    /** Distribution mode (SLACK_CLIENT_ID, SLACK_CLIENT_SECRET, SLACK_STATE_SECRET). */
    oauth?: OAuthConfig;
  };
  /** Keys sealing Slack tokens in the database (ENCRYPTION_KEY, ENCRYPTION_KEY_PREVIOUS); required with `slack.oauth`. */
  encryption?: { key: Buffer; previous: Buffer[] };
  port: number;
  publicUrl?: string;
  databaseUrl?: string;
  /** PostgreSQL only: false runs every statement unnamed (DATABASE_PREPARED_STATEMENTS=false, for a pooler that cannot keep them). */
  preparedStatements?: boolean;
  dataDir: string;
  crews: CrewConfig[];
  /** Flows whose feedback requests are answered in Slack (FLOW_* or `flows:` in CREWS_FILE). */
  flows?: FlowConfig[];
  /**
   * Status polling (src/usecases/watcher.ts). Optional tuning, mainly for tests and replicas:
   * POLL_INTERVAL_MS (tick, default 1000), POLL_MIN_BACKOFF_MS (2000), POLL_MAX_BACKOFF_MS (60000),
   * POLL_LEASE_MS (30000), POLL_LOST_GRACE_MS (120000), POLL_END_GRACE_MS (15000), POLL_SWEEP_MS (30000).
   * Unset values keep the defaults.
   */
  polling?: {
    tickMs?: number;
    minBackoffMs?: number;
    maxBackoffMs?: number;
    leaseMs?: number;
    lostGraceMs?: number;
    endGraceMs?: number;
    sweepMs?: number;
    claimStaleMs?: number;
    outboxConcurrency?: number;
    /** A replica silent this long is taken for dead: its claims are taken over (REPLICA_DEAD_AFTER_MS). */
    replicaDeadAfterMs?: number;
  };
  /** Reminders for undecided reviews (REVIEW_REMINDER_MINUTES, REVIEW_REMINDER_MAX); defaults 60 and 3. */
  reviewReminders?: { afterMinutes: number; max: number };
  /** Bearer token GET /metrics on the public port requires (METRICS_TOKEN); unset: /metrics is not served there. */
  metricsToken?: string;
  /** A separate port serving GET /metrics without a token (METRICS_PORT), on metricsHost (METRICS_HOST, default 127.0.0.1). */
  metricsPort?: number;
  metricsHost?: string;
  /** How long the recorded crew callbacks of an ended run are kept (WEBHOOK_EVENT_RETENTION, default 7 days). */
  webhookEventRetentionMs?: number;
  /** LOG_LEVEL (default info); unset in a config built by hand: info. */
  logLevel?: LogLevel;
}

/**
 * Which workspaces a crew is offered to. `teams: ["*"]`: every workspace (teams unset). No `teams:`:
 * in OAuth mode none (teams []), since anyone may install the app from the public /slack/install and
 * would spend the operator's crew budget; with one bot token, its workspace (unset, as before).
 */
function offerCrew(crew: CrewConfig, oauth: boolean, problems: string[]): CrewConfig {
  const { teams, ...rest } = crew;
  if (teams?.includes("*")) {
    if (teams.length > 1) problems.push(`crew "${crew.name}" teams: "*" (every workspace) cannot be listed together with workspace ids`);
    return rest;
  }
  return !teams && oauth ? { ...rest, teams: [] } : crew;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Crewline cannot start; fix its configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

const VARIABLES: Record<string, string> = {
  SLACK_BOT_TOKEN: "the bot token (xoxb-…) Crewline posts with in one workspace; Slack app settings → OAuth & Permissions",
  SLACK_CLIENT_ID:
    "the app's client id (Slack app settings → Basic Information); with SLACK_CLIENT_SECRET and SLACK_STATE_SECRET it makes Crewline installable in many workspaces (GET /slack/install)",
  SLACK_CLIENT_SECRET: "the app's client secret (Slack app settings → Basic Information), used to exchange an install's code for its tokens",
  SLACK_STATE_SECRET: "a random secret of at least 16 characters that signs the OAuth state of each install (CSRF protection)",
  ENCRYPTION_KEY: "32 random bytes (64 hex digits or base64; openssl rand -base64 32) that encrypt each workspace's Slack tokens in the database",
  ENCRYPTION_KEY_PREVIOUS: "comma-separated earlier ENCRYPTION_KEY values, only for reading tokens sealed before a key rotation",
  FLOW_TEAM: "the workspace (team id T…) of FLOW_CHANNEL; required when Crewline is installed by OAuth",
  FLOW_ENTERPRISE: "the Enterprise Grid org (E…) of FLOW_TEAM, when Crewline is installed org-wide there",
  SLACK_SIGNING_SECRET: "verifies that requests to /slack/events come from Slack; Slack app settings → Basic Information",
  SLACK_APP_TOKEN: "an app-level token (xapp-…, scope connections:write) that switches the bot to Socket Mode",
  SLACK_API_URL: "the Slack Web API base URL (default https://slack.com/api/)",
  PORT: "the HTTP port for /slack/events, crew webhooks and /healthz",
  PUBLIC_URL: "the externally reachable base URL of this server, used to build crew webhook URLs",
  DATABASE_URL: "a postgres:// URL; leave unset to use the embedded database in DATA_DIR",
  DATABASE_PREPARED_STATEMENTS: "true (default) or false: false runs statements unnamed on PostgreSQL, for a pooler that cannot keep prepared statements",
  DATA_DIR: "where the embedded database and other local state live",
  CREW_BASE_URL: "the crew's base URL (from the crew dashboard)",
  CREW_TOKEN: "the crew's organization bearer token (from the crew dashboard's Status tab)",
  CREW_NAME: "the crew's display name in Slack",
  CREW_USER_TOKEN: "an optional user-scoped bearer token used for read-only crew calls",
  CREW_REVIEWERS: "comma-separated Slack user ids (U…) and user group ids (S…) allowed to decide reviews",
  CREW_CHANNELS: "comma-separated channel ids where the crew may be started",
  CREW_TEAMS: 'comma-separated workspace (team) ids that may use the crew, or "*" for every workspace; with SLACK_CLIENT_ID unset means none',
  CREW_DECIDE_WITHIN: "how long a review may wait for a decision, e.g. 90s, 30m, 24h or 1h30m (unset: no deadline)",
  CREW_ON_TIMEOUT: "what happens when a review's deadline passes: reject, approve or remind (default remind)",
  CREW_ESCALATE_TO: "comma-separated Slack user ids (U…) and user group ids (S…) mentioned after a review's last reminder, who may then decide it too",
  CREW_EVENT_STREAM: "true to have the crew also send its event stream (task, tool and LLM events) to the bot (default false)",
  CREW_APPROVALS: "how many distinct people must approve a review before the crew goes on (a whole number from 1 to 10, default 1)",
  CREW_SELF_APPROVAL: "false to stop whoever started a run from approving its reviews (they may still reject; default true)",
  CREWS_FILE: "a YAML or JSON file listing several crews (crews:) and flows (flows:)",
  FLOW_NAME: "the flow's name in Slack and in its webhook URL /hooks/flows/<name> (default flow)",
  FLOW_WEBHOOK_SECRET: "the flow's webhook signing secret (flow dashboard → Settings → Human in the Loop)",
  FLOW_CHANNEL: "the channel id (C…) where the flow's feedback requests are posted",
  FLOW_DECIDE_WITHIN: "how long a flow feedback request may wait for an answer, e.g. 90s, 30m, 24h (unset: no deadline)",
  FLOW_ON_TIMEOUT: "what happens when a flow request's deadline passes: reject, approve (the flow's matching outcome) or remind (default remind)",
  FLOW_REVIEWERS: "comma-separated Slack user ids (U…) and user group ids (S…) allowed to answer the flow's requests",
  FLOW_ESCALATE_TO: "comma-separated Slack user ids (U…) and user group ids (S…) mentioned after a flow request's last reminder, who may then answer it too",
  POLL_INTERVAL_MS: "how often (ms) the bot looks for runs whose status is due to be polled (default 1000)",
  POLL_MIN_BACKOFF_MS: "first wait (ms) between status polls of a run, and the wait after a change (default 2000)",
  POLL_MAX_BACKOFF_MS: "longest wait (ms) between status polls of an unchanged run (default 60000)",
  POLL_LEASE_MS: "how long (ms) a replica holds a run while polling it; a dead replica's runs move on after this (default 30000)",
  POLL_LOST_GRACE_MS: "how long (ms) the crew may answer 404 for a run before it is declared lost (default 120000)",
  POLL_END_GRACE_MS:
    "how long (ms) a run with webhooks waits for the crew's own end callback once its status says it has ended, so its last task's message comes first (default 15000; 0: finish from the status at once)",
  POLL_SWEEP_MS: "how often (ms) unposted reviews and completion notices are re-posted after a crash (default 30000)",
  CLAIM_STALE_MS: "how long (ms) a replica's claim on a Slack effect holds before another replica takes it over (default 60000)",
  OUTBOX_CONCURRENCY: "how many Slack effects one replica performs at once (default 16)",
  REPLICA_DEAD_AFTER_MS: "how long (ms) a replica may go without announcing itself before the others take over its claims (default 8000; it announces itself every third of that)",
  REVIEW_REMINDER_MINUTES: "minutes a review may wait before its reviewers are reminded in the thread (default 60; later reminders back off ×2)",
  FLOW_APPROVALS: "how many distinct people must choose an approve-like outcome on a flow's feedback request before the flow gets the answer (1 to 10, default 1)",
  REVIEW_REMINDER_MAX: "how many reminders a waiting review gets at most (default 3; 0 turns reminders off)",
  WEBHOOK_EVENT_RETENTION: "how long the crew callbacks of a finished run are kept in the database, e.g. 7d, 36h (default 7d; at least 1h)",
  METRICS_TOKEN: "a bearer token that GET /metrics on PORT requires (Authorization: Bearer <token>); unset: /metrics is not served on PORT",
  METRICS_PORT: "a separate port that serves GET /metrics without a token, on METRICS_HOST (default 127.0.0.1, this machine only)",
  METRICS_HOST: "the address METRICS_PORT listens on (default 127.0.0.1; 0.0.0.0 exposes the figures to every network the host is on)",
  LOG_LEVEL: "how much the bot logs: debug, info (default), warn or error",
};

const describe = (name: string) => `${name} (${VARIABLES[name] ?? "see README"})`;

const httpUrl = z
  .string()
  .trim()
  .url()
  .refine((u) => /^https?:\/\//i.test(u), "must start with http:// or https://");
/** A URL Crewline shows or logs (PUBLIC_URL is in /crew help and App Home): no user name or password in it. */
const shownHttpUrl = httpUrl.refine((u) => {
  const url = new URL(u);
  return !url.username && !url.password;
}, "must not carry a user name or password (the URL is shown and logged)");
/** PUBLIC_URL: webhook URLs are built by appending /hooks/… to it, which a query or fragment would swallow. */
const publicBaseUrl = shownHttpUrl.refine((u) => !/[?#]/.test(u), "must not have a query string (?…) or fragment (#…): crew webhook URLs are built by appending /hooks/… to it");
const idList = z.union([z.string(), z.array(z.string())]).transform((v) => (Array.isArray(v) ? v : v.split(",")).map((s) => s.trim()).filter(Boolean));

const crewFileEntry = z
  .object({
    name: z.string().trim().min(1).max(80),
    baseUrl: httpUrl.optional(),
    base_url: httpUrl.optional(),
    token: z.string().min(1).optional(),
    tokenEnv: z.string().min(1).optional(),
    userToken: z.string().min(1).optional(),
    userTokenEnv: z.string().min(1).optional(),
    channels: idList.optional(),
    reviewers: idList.optional(),
    eventStream: z.boolean().optional(),
    teams: idList.optional(),
    approvals: z.number().int().min(1).max(10).optional(),
    selfApproval: z.boolean().optional(),
    decideWithin: z.union([z.string(), z.number()]).optional(),
    onTimeout: z.string().optional(),
    escalateTo: idList.optional(),
  })
  .strict();

/** "90s", "30m", "24h", "1h30m", "2d" (a bare number is seconds), between 10 seconds and 30 days. */
const decideWithin = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const ms = typeof value === "number" ? value * 1000 : /^\s*\d+\s*$/.test(value) ? Number(value) * 1000 : parseDuration(value);
  if (ms === undefined || !Number.isFinite(ms)) {
    ctx.addIssue({ code: "custom", message: 'use a duration such as "90s", "30m", "24h" or "1h30m"' });
    return z.NEVER;
  }
  if (ms < 10_000 || ms > 30 * 86_400_000) {
    ctx.addIssue({ code: "custom", message: "use between 10s and 30d" });
    return z.NEVER;
  }
  return ms;
});

/**
 * Ids Slack compares (a reviewer's click, the channel and workspace of a /crew): a name (@alice,
 * #general, acme) would match nothing, leaving every review undecidable or the crew usable nowhere.
 */
const slackIds = (id: RegExp, want: string) =>
  z.array(z.string()).superRefine((ids, ctx) => {
    const bad = ids.filter((i) => !id.test(i));
    if (bad.length > 0) ctx.addIssue({ code: "custom", message: `${want}, not names: ${bad.map((b) => `"${b.slice(0, 40)}"`).join(", ")}` });
  });
// Users are U… or W… (Enterprise Grid), user groups S… (parseReviewers tells them apart).
const PERSON_OR_GROUP_ID = /^[UWS][A-Z0-9]{2,}$/;
const CHANNEL_ID = /^[CGD][A-Z0-9]{2,}$/;
const reviewerIds = slackIds(PERSON_OR_GROUP_ID, "use Slack user ids like U0123ABCD and user group ids like S0123ABCD");
const channelIds = slackIds(CHANNEL_ID, "use Slack channel ids like C0123ABCD");
const teamIds = slackIds(/^(?:[TE][A-Z0-9]{2,}|\*)$/, 'use Slack workspace (team) ids like T0123ABCD, or "*" for every workspace');

/** `ids` checked by `schema`; a problem goes to `report`, and nothing is returned. */
function checkedIds(schema: z.ZodType<string[]>, ids: string[] | undefined, report: (message: string) => void): string[] | undefined {
  if (ids === undefined) return undefined;
  const parsed = schema.safeParse(ids);
  if (!parsed.success) report(parsed.error.issues[0]?.message ?? "invalid");
  return parsed.success ? parsed.data : undefined;
}

/** Escalation ids: users (U…, W…) and user groups (S…). */
const escalationIds = z.array(z.string().regex(PERSON_OR_GROUP_ID, "must be user ids (U…) or user group ids (S…)"));

const flowName = z
  .string()
  .trim()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, "use 1-64 letters, digits, - or _ (it is part of the webhook URL)");
const channelId = z.string().trim().regex(CHANNEL_ID, "must be a channel id such as C0123ABCD");

const teamId = z
  .string()
  .trim()
  .regex(/^T[A-Z0-9]{2,}$/, "must be a workspace (team) id such as T0123ABCD");

const enterpriseId = z
  .string()
  .trim()
  .regex(/^E[A-Z0-9]{2,}$/, "must be an Enterprise Grid org id such as E0123ABCD");

const flowFileEntry = z
  .object({
    name: flowName,
    team: teamId.optional(),
    enterprise: enterpriseId.optional(),
    secret: z.string().min(1).optional(),
    secretEnv: z.string().min(1).optional(),
    channel: channelId,
    reviewers: idList.optional(),
    approvals: z.number().int().min(1).max(10).optional(),
    decideWithin: z.union([z.string(), z.number()]).optional(),
    onTimeout: z.string().optional(),
    escalateTo: idList.optional(),
  })
  .strict();

/** Splits reviewer ids: user groups start with S, users with U or W. */
export function parseReviewers(ids: string[] | undefined): ReviewerRules | undefined {
  if (!ids || ids.length === 0) return undefined;
  return { users: ids.filter((id) => !id.startsWith("S")), usergroups: ids.filter((id) => id.startsWith("S")) };
}

/**
 * Why the crews file cannot be read or does not parse, without quoting it: it holds tokens, and
 * JSON.parse's message quotes the text around the fault ("… \"token\": sk-live-…"). A read error's
 * and YAML's first line say where, not what.
 */
function unreadableBecause(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  if (!(err instanceof SyntaxError)) return message.split("\n")[0]!;
  const at = /position (\d+)/.exec(message);
  return `not valid JSON${at ? ` (at character ${at[1]})` : ""}`;
}

function readCrewsFile(file: string, env: NodeJS.ProcessEnv, problems: string[]): { crews: CrewConfig[]; flows: FlowConfig[] } {
  let raw: unknown;
  try {
    const text = fs.readFileSync(file, "utf8");
    raw = /\.json$/i.test(file) ? JSON.parse(text) : YAML.parse(text);
  } catch (err) {
    problems.push(`${describe("CREWS_FILE")}: cannot read ${path.basename(file)}: ${unreadableBecause(err)}`);
    return { crews: [], flows: [] };
  }
  const flowList = Array.isArray(raw) ? undefined : (raw as { flows?: unknown } | null)?.flows;
  const flows = flowList === undefined ? [] : readFlowEntries(flowList, env, problems);
  const list = Array.isArray(raw) ? raw : ((raw as { crews?: unknown } | null)?.crews ?? (flowList !== undefined ? [] : undefined));
  // A flow-only file (flows: and no crews:) is valid.
  const parsed = z
    .array(crewFileEntry)
    .min(flowList !== undefined ? 0 : 1)
    .safeParse(list);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    problems.push(`${describe("CREWS_FILE")}: expected a list of crews (name, baseUrl, token or tokenEnv); at ${issue?.path.join(".") || "top level"}: ${issue?.message}`);
    return { crews: [], flows };
  }
  const crews: CrewConfig[] = [];
  for (const entry of parsed.data) {
    const baseUrl = entry.baseUrl ?? entry.base_url;
    // Trimmed as CREW_TOKEN is: a mounted secret often ends in a newline, which no HTTP header may carry.
    const token = (entry.token ?? (entry.tokenEnv ? env[entry.tokenEnv] : undefined))?.trim() || undefined;
    const userToken = (entry.userToken ?? (entry.userTokenEnv ? env[entry.userTokenEnv] : undefined))?.trim() || undefined;
    if (!baseUrl) problems.push(`${describe("CREWS_FILE")}: crew "${entry.name}" has no baseUrl`);
    if (!token) problems.push(`${describe("CREWS_FILE")}: crew "${entry.name}" has no token (set token, or tokenEnv naming a variable that is set)`);
    const decisions = readDecisionSettings({ decideWithin: entry.decideWithin, onTimeout: entry.onTimeout, escalateTo: entry.escalateTo }, (key, message) =>
      problems.push(`${describe("CREWS_FILE")}: crew "${entry.name}" ${key}: ${message}`),
    );
    const crewProblem = (key: string) => (message: string) => problems.push(`${describe("CREWS_FILE")}: crew "${entry.name}" ${key}: ${message}`);
    const channels = checkedIds(channelIds, entry.channels, crewProblem("channels"));
    const reviewers = checkedIds(reviewerIds, entry.reviewers, crewProblem("reviewers"));
    const teams = checkedIds(teamIds, entry.teams, crewProblem("teams"));
    if (baseUrl && token)
      crews.push({
        name: entry.name,
        baseUrl,
        token,
        userToken,
        channels,
        reviewers: parseReviewers(reviewers),
        eventStream: entry.eventStream,
        ...(teams ? { teams } : {}),
        ...(entry.approvals !== undefined ? { approvals: entry.approvals } : {}),
        ...(entry.selfApproval !== undefined ? { selfApproval: entry.selfApproval } : {}),
        ...decisions,
      });
  }
  const names = crews.map((c) => c.name.toLowerCase());
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup) problems.push(`${describe("CREWS_FILE")}: crew name "${dup}" appears twice`);
  return { crews, flows };
}

/** decideWithin / onTimeout / escalateTo of one crew, checked; problems go to `report` (key, message). */
function readDecisionSettings(
  raw: { decideWithin?: string | number; onTimeout?: string; escalateTo?: string[] },
  report: (key: string, message: string) => void,
): Pick<CrewConfig, "decideWithinMs" | "onTimeout" | "escalateTo"> {
  const out: Pick<CrewConfig, "decideWithinMs" | "onTimeout" | "escalateTo"> = {};
  if (raw.decideWithin !== undefined) {
    const parsed = decideWithin.safeParse(raw.decideWithin);
    if (parsed.success) out.decideWithinMs = parsed.data;
    else report("decideWithin", parsed.error.issues[0]?.message ?? "invalid");
  }
  if (raw.onTimeout !== undefined) {
    const parsed = z.enum(TIMEOUT_ACTIONS).safeParse(raw.onTimeout.trim().toLowerCase());
    if (parsed.success) out.onTimeout = parsed.data;
    else report("onTimeout", "use reject, approve or remind");
  }
  if (raw.escalateTo !== undefined && raw.escalateTo.length > 0) {
    const parsed = escalationIds.safeParse(raw.escalateTo);
    if (parsed.success) out.escalateTo = parseReviewers(parsed.data);
    else report("escalateTo", `${parsed.error.issues[0]?.message ?? "invalid"} (got "${String(raw.escalateTo[Number(parsed.error.issues[0]?.path[0] ?? 0)] ?? "").slice(0, 40)}")`);
  }
  if (out.onTimeout && out.decideWithinMs === undefined) report("onTimeout", "has no effect without decideWithin (set both)");
  return out;
}

function readFlowEntries(list: unknown, env: NodeJS.ProcessEnv, problems: string[]): FlowConfig[] {
  const parsed = z.array(flowFileEntry).safeParse(list);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    problems.push(
      `${describe("CREWS_FILE")}: expected flows: a list of flows (name, secret or secretEnv, channel, reviewers?); at flows.${issue?.path.join(".") || ""}: ${issue?.message}`,
    );
    return [];
  }
  const flows: FlowConfig[] = [];
  for (const entry of parsed.data) {
    const secret = entry.secret ?? (entry.secretEnv ? env[entry.secretEnv]?.trim() : undefined);
    const { decideWithinMs, onTimeout, escalateTo } = readDecisionSettings(
      { decideWithin: entry.decideWithin, onTimeout: entry.onTimeout, escalateTo: entry.escalateTo },
      (key, message) => problems.push(`${describe("CREWS_FILE")}: flow "${entry.name}" ${key}: ${message}`),
    );
    const reviewers = checkedIds(reviewerIds, entry.reviewers, (message) => problems.push(`${describe("CREWS_FILE")}: flow "${entry.name}" reviewers: ${message}`));
    if (!secret) problems.push(`${describe("CREWS_FILE")}: flow "${entry.name}" has no secret (set secret, or secretEnv naming a variable that is set)`);
    else if (secret.length < MIN_SECRET_LENGTH)
      problems.push(`${describe("CREWS_FILE")}: flow "${entry.name}" ${entry.secret !== undefined ? "secret" : `secretEnv (${entry.secretEnv})`} is too short: ${flowSecretRule}`);
    else
      flows.push({
        name: entry.name,
        secret,
        channel: entry.channel,
        reviewers: parseReviewers(reviewers),
        ...(entry.team ? { team: entry.team } : {}),
        ...(entry.enterprise ? { enterprise: entry.enterprise } : {}),
        ...(entry.approvals !== undefined ? { approvals: entry.approvals } : {}),
        ...(decideWithinMs ? { decideWithinMs, onTimeout } : {}),
        ...(escalateTo ? { escalateTo } : {}),
      });
  }
  const names = flows.map((f) => f.name.toLowerCase());
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup) problems.push(`${describe("CREWS_FILE")}: flow name "${dup}" appears twice`);
  return flows;
}

/** Shortest secret accepted where a guessed one would let requests be forged (SLACK_STATE_SECRET, flow signing secrets). */
export const MIN_SECRET_LENGTH = 16;
const flowSecretRule = `use the signing secret from the flow's dashboard (Settings → Human in the Loop), at least ${MIN_SECRET_LENGTH} characters`;

/** FLOW_NAME / FLOW_WEBHOOK_SECRET / FLOW_CHANNEL / FLOW_REVIEWERS: one flow, or none when unset. */
function readFlowEnv(env: NodeJS.ProcessEnv, problems: string[]): FlowConfig[] {
  const secret = optional(env, "FLOW_WEBHOOK_SECRET");
  const channel = optional(env, "FLOW_CHANNEL");
  const name = optional(env, "FLOW_NAME");
  const reviewers = optional(env, "FLOW_REVIEWERS");
  const team = optional(env, "FLOW_TEAM");
  const enterprise = optional(env, "FLOW_ENTERPRISE");
  const approvals = optional(env, "FLOW_APPROVALS");
  const escalate = optional(env, "FLOW_ESCALATE_TO");
  if (!secret && !channel && !name && !reviewers && !team && !enterprise && !approvals && !escalate) return [];
  const checkedApprovals = z.coerce
    .number()
    .int()
    .min(1)
    .max(10)
    .safeParse(approvals ?? "1");
  if (!checkedApprovals.success) problems.push(`${describe("FLOW_APPROVALS")} is invalid: ${checkedApprovals.error.issues[0]?.message}`);
  if (!secret) problems.push(`FLOW_WEBHOOK_SECRET is missing: ${VARIABLES.FLOW_WEBHOOK_SECRET} (needed because another FLOW_* variable is set)`);
  else if (secret.length < MIN_SECRET_LENGTH) problems.push(`${describe("FLOW_WEBHOOK_SECRET")} of flow "${name ?? "flow"}" is too short: ${flowSecretRule}`);
  if (!channel) problems.push(`FLOW_CHANNEL is missing: ${VARIABLES.FLOW_CHANNEL}`);
  const checkedName = flowName.safeParse(name ?? "flow");
  if (!checkedName.success) problems.push(`${describe("FLOW_NAME")} is invalid: ${checkedName.error.issues[0]?.message}`);
  const checkedChannel = channel ? channelId.safeParse(channel) : undefined;
  if (checkedChannel && !checkedChannel.success) problems.push(`${describe("FLOW_CHANNEL")} is invalid: ${checkedChannel.error.issues[0]?.message}`);
  const checkedTeam = team ? teamId.safeParse(team) : undefined;
  if (checkedTeam && !checkedTeam.success) problems.push(`${describe("FLOW_TEAM")} is invalid: ${checkedTeam.error.issues[0]?.message}`);
  const checkedEnterprise = enterprise ? enterpriseId.safeParse(enterprise) : undefined;
  if (checkedEnterprise && !checkedEnterprise.success) problems.push(`${describe("FLOW_ENTERPRISE")} is invalid: ${checkedEnterprise.error.issues[0]?.message}`);
  const checkedReviewers = checkedIds(reviewerIds, idList.parse(reviewers ?? ""), (message) => problems.push(`${describe("FLOW_REVIEWERS")} is invalid: ${message}`));
  const flowEnvName: Record<string, string> = { decideWithin: "FLOW_DECIDE_WITHIN", onTimeout: "FLOW_ON_TIMEOUT", escalateTo: "FLOW_ESCALATE_TO" };
  const { decideWithinMs, onTimeout, escalateTo } = readDecisionSettings(
    { decideWithin: optional(env, "FLOW_DECIDE_WITHIN"), onTimeout: optional(env, "FLOW_ON_TIMEOUT"), escalateTo: escalate ? idList.parse(escalate) : undefined },
    (key, message) => problems.push(`${describe(flowEnvName[key]!)} is invalid: ${message}`),
  );
  if (
    !secret ||
    secret.length < MIN_SECRET_LENGTH ||
    !checkedName.success ||
    !checkedChannel?.success ||
    (checkedTeam && !checkedTeam.success) ||
    (checkedEnterprise && !checkedEnterprise.success)
  )
    return [];
  return [
    {
      name: checkedName.data,
      secret,
      channel: checkedChannel.data,
      reviewers: parseReviewers(checkedReviewers),
      ...(checkedTeam?.success ? { team: checkedTeam.data } : {}),
      ...(checkedEnterprise?.success ? { enterprise: checkedEnterprise.data } : {}),
      ...(approvals && checkedApprovals.success ? { approvals: checkedApprovals.data } : {}),
      ...(decideWithinMs ? { decideWithinMs, onTimeout } : {}),
      ...(escalateTo ? { escalateTo } : {}),
    },
  ];
}

/** SLACK_CLIENT_ID / SLACK_CLIENT_SECRET / SLACK_STATE_SECRET: all three, or none (single workspace). */
function readOAuth(env: NodeJS.ProcessEnv, problems: string[]): OAuthConfig | undefined {
  const names = ["SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET", "SLACK_STATE_SECRET"] as const;
  const [clientId, clientSecret, stateSecret] = names.map((n) => optional(env, n));
  const set = names.filter((n) => optional(env, n));
  if (set.length === 0) return undefined;
  if (set.length < names.length) {
    for (const name of names.filter((n) => !set.includes(n)))
      problems.push(`${name} is missing: ${VARIABLES[name]} (needed because ${set.join(" and ")} ${set.length === 1 ? "is" : "are"} set: the three go together)`);
    return undefined;
  }
  if (!/^\d+\.\d+$/.test(clientId!)) problems.push(`${describe("SLACK_CLIENT_ID")} is invalid: a client id looks like 1234567890.1234567890`);
  if (stateSecret!.length < MIN_SECRET_LENGTH) problems.push(`${describe("SLACK_STATE_SECRET")} is invalid: use at least ${MIN_SECRET_LENGTH} random characters`);
  return { clientId: clientId!, clientSecret: clientSecret!, stateSecret: stateSecret! };
}

/** ENCRYPTION_KEY (required with OAuth; checked whenever set) and ENCRYPTION_KEY_PREVIOUS (comma-separated). */
function readEncryptionKeys(env: NodeJS.ProcessEnv, problems: string[], required: boolean): { key: Buffer; previous: Buffer[] } | undefined {
  const text = optional(env, "ENCRYPTION_KEY");
  const previousText = optional(env, "ENCRYPTION_KEY_PREVIOUS");
  if (!text) {
    if (required) problems.push(`ENCRYPTION_KEY is missing: ${VARIABLES.ENCRYPTION_KEY} (needed because SLACK_CLIENT_ID is set)`);
    else if (previousText) problems.push(`ENCRYPTION_KEY is missing: ${VARIABLES.ENCRYPTION_KEY} (needed because ENCRYPTION_KEY_PREVIOUS is set)`);
    return undefined;
  }
  const current = parseEncryptionKey(text);
  if ("problem" in current) problems.push(`${describe("ENCRYPTION_KEY")} is invalid: it ${current.problem}`);
  const previous: Buffer[] = [];
  for (const [i, item] of idList.parse(previousText ?? "").entries()) {
    const parsed = parseEncryptionKey(item);
    if ("problem" in parsed) problems.push(`${describe("ENCRYPTION_KEY_PREVIOUS")} is invalid: key ${i + 1} ${parsed.problem}`);
    else previous.push(parsed.key);
  }
  return "key" in current ? { key: current.key, previous } : undefined;
}

function optional(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  const problems: string[] = [];
  const need = (name: string) => {
    const value = optional(env, name);
    if (!value) problems.push(`${name} is missing: ${VARIABLES[name]}`);
    return value ?? "";
  };
  const check = <T>(name: string, schema: z.ZodType<T>, value: string | undefined): T | undefined => {
    if (value === undefined) return undefined;
    const parsed = schema.safeParse(value);
    if (!parsed.success) problems.push(`${describe(name)} is invalid: ${parsed.error.issues[0]?.message}`);
    return parsed.success ? parsed.data : undefined;
  };

  const oauth = readOAuth(env, problems);
  const oauthWanted = ["SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET", "SLACK_STATE_SECRET"].some((n) => optional(env, n));
  // Distribution (OAuth) or one workspace (SLACK_BOT_TOKEN): never both, so no token is silently ignored.
  if (oauthWanted && optional(env, "SLACK_BOT_TOKEN"))
    problems.push(
      "SLACK_BOT_TOKEN and SLACK_CLIENT_ID / SLACK_CLIENT_SECRET / SLACK_STATE_SECRET are both set: choose one. The bot token runs Crewline in one workspace; the OAuth variables make it installable in many (GET /slack/install), each workspace with its own token. Unset SLACK_BOT_TOKEN to distribute the app.",
    );
  const botToken = oauthWanted ? undefined : need("SLACK_BOT_TOKEN");
  if (botToken && !botToken.startsWith("xoxb-")) problems.push(`${describe("SLACK_BOT_TOKEN")} is invalid: a bot token starts with xoxb-`);
  const appToken = optional(env, "SLACK_APP_TOKEN");
  if (appToken && !appToken.startsWith("xapp-")) problems.push(`${describe("SLACK_APP_TOKEN")} is invalid: an app-level token starts with xapp-`);
  if (appToken && oauthWanted)
    problems.push(
      `SLACK_APP_TOKEN is set together with SLACK_CLIENT_ID: Crewline serves installs (/slack/install, /slack/oauth_redirect) in HTTP mode only; unset SLACK_APP_TOKEN`,
    );
  const encryption = readEncryptionKeys(env, problems, oauthWanted);
  // Socket Mode does not sign requests; HTTP mode cannot work without the secret.
  const signingSecret = appToken ? optional(env, "SLACK_SIGNING_SECRET") : need("SLACK_SIGNING_SECRET");
  const apiUrl = check("SLACK_API_URL", shownHttpUrl, optional(env, "SLACK_API_URL"));
  const port = check("PORT", z.coerce.number().int().min(0).max(65535), optional(env, "PORT")) ?? 3000;
  const publicUrl = check("PUBLIC_URL", publicBaseUrl, optional(env, "PUBLIC_URL"))?.replace(/\/+$/, "");
  const databaseUrl = check("DATABASE_URL", z.string().regex(/^postgres(ql)?:\/\//i, "must be a postgres:// URL"), optional(env, "DATABASE_URL"));
  const preparedStatements = check("DATABASE_PREPARED_STATEMENTS", z.enum(["true", "false"]), optional(env, "DATABASE_PREPARED_STATEMENTS") ?? "true") !== "false";
  const dataDir = path.resolve(optional(env, "DATA_DIR") ?? "./data");
  // In any case (LOG_LEVEL=WARN); an unknown level stops start-up instead of logging everything.
  const logLevel = check("LOG_LEVEL", z.string().toLowerCase().pipe(z.enum(LOG_LEVELS, "use debug, info, warn or error")), optional(env, "LOG_LEVEL")) ?? "info";
  const ms = (name: string, min: number) => check(name, z.coerce.number().int().min(min).max(86_400_000), optional(env, name));
  const polling = {
    tickMs: ms("POLL_INTERVAL_MS", 10),
    minBackoffMs: ms("POLL_MIN_BACKOFF_MS", 10),
    maxBackoffMs: ms("POLL_MAX_BACKOFF_MS", 10),
    leaseMs: ms("POLL_LEASE_MS", 100),
    lostGraceMs: ms("POLL_LOST_GRACE_MS", 0),
    endGraceMs: ms("POLL_END_GRACE_MS", 0),
    sweepMs: ms("POLL_SWEEP_MS", 100),
    claimStaleMs: ms("CLAIM_STALE_MS", 100),
    outboxConcurrency: check("OUTBOX_CONCURRENCY", z.coerce.number().int().min(1).max(256), optional(env, "OUTBOX_CONCURRENCY")),
    replicaDeadAfterMs: ms("REPLICA_DEAD_AFTER_MS", 300),
  };
  const reminderMinutes = check("REVIEW_REMINDER_MINUTES", z.coerce.number().positive().max(10_080), optional(env, "REVIEW_REMINDER_MINUTES")) ?? 60;
  const reminderMax = check("REVIEW_REMINDER_MAX", z.coerce.number().int().min(0).max(20), optional(env, "REVIEW_REMINDER_MAX")) ?? 3;
  const metricsToken = check(
    "METRICS_TOKEN",
    z
      .string()
      .regex(/^[\x21-\x7e]+$/, "use printable ASCII without spaces")
      .min(16, "use at least 16 characters"),
    optional(env, "METRICS_TOKEN"),
  );

  const metricsPort = check("METRICS_PORT", z.coerce.number().int().min(0).max(65535), optional(env, "METRICS_PORT"));
  const metricsHost = check("METRICS_HOST", z.union([z.ipv4(), z.ipv6(), z.literal("localhost")]), optional(env, "METRICS_HOST"));
  if (metricsHost && metricsPort === undefined) problems.push(`METRICS_HOST is set without METRICS_PORT: ${VARIABLES.METRICS_HOST}`);
  if (metricsPort !== undefined && metricsPort !== 0 && metricsPort === port) problems.push(`${describe("METRICS_PORT")} is invalid: it must differ from PORT`);
  const webhookEventRetentionMs = check(
    "WEBHOOK_EVENT_RETENTION",
    z.string().transform((value, ctx) => {
      const ms = parseDuration(value);
      if (ms === undefined) ctx.addIssue({ code: "custom", message: 'use a duration such as "7d", "36h" or "1d12h"' });
      else if (ms < 3_600_000) ctx.addIssue({ code: "custom", message: "use at least 1h" });
      return ms ?? z.NEVER;
    }),
    optional(env, "WEBHOOK_EVENT_RETENTION"),
  );

  let crews: CrewConfig[] = [];
  const flows = readFlowEnv(env, problems);
  const crewsFile = optional(env, "CREWS_FILE");
  if (crewsFile) {
    const file = readCrewsFile(crewsFile, env, problems);
    crews = file.crews;
    flows.push(...file.flows);
    const names = flows.map((f) => f.name.toLowerCase());
    const dup = names.find((n, i) => names.indexOf(n) !== i);
    if (dup && file.flows.length) problems.push(`${describe("FLOW_NAME")}: flow name "${dup}" is also in CREWS_FILE`);
  } else if (flows.length > 0 && !optional(env, "CREW_BASE_URL") && !optional(env, "CREW_TOKEN")) {
    // A flow-only set-up: no crew to start from Slack.
  } else {
    const baseUrl = optional(env, "CREW_BASE_URL");
    const token = optional(env, "CREW_TOKEN");
    if (!baseUrl) problems.push(`CREW_BASE_URL is missing: ${VARIABLES.CREW_BASE_URL} (or set CREWS_FILE for several crews)`);
    if (!token) problems.push(`CREW_TOKEN is missing: ${VARIABLES.CREW_TOKEN}`);
    const checkedUrl = check("CREW_BASE_URL", httpUrl, baseUrl);
    const envIds = (name: string, schema: z.ZodType<string[]>) => {
      const value = optional(env, name);
      return checkedIds(schema, value === undefined ? undefined : idList.parse(value), (message) => problems.push(`${describe(name)} is invalid: ${message}`));
    };
    const channels = envIds("CREW_CHANNELS", channelIds);
    const teams = envIds("CREW_TEAMS", teamIds);
    const reviewers = envIds("CREW_REVIEWERS", reviewerIds);
    const envName = { decideWithin: "CREW_DECIDE_WITHIN", onTimeout: "CREW_ON_TIMEOUT", escalateTo: "CREW_ESCALATE_TO" } as Record<string, string>;
    const escalateTo = optional(env, "CREW_ESCALATE_TO");
    const decisionEnv = readDecisionSettings(
      { decideWithin: optional(env, "CREW_DECIDE_WITHIN"), onTimeout: optional(env, "CREW_ON_TIMEOUT"), escalateTo: escalateTo ? idList.parse(escalateTo) : undefined },
      (key, message) => problems.push(`${describe(envName[key]!)} is invalid: ${message}`),
    );
    if (checkedUrl && token) {
      crews = [
        {
          name: optional(env, "CREW_NAME") ?? "crew",
          baseUrl: checkedUrl,
          token,
          userToken: optional(env, "CREW_USER_TOKEN"),
          channels,
          ...(teams ? { teams } : {}),
          reviewers: parseReviewers(reviewers),
          eventStream: check("CREW_EVENT_STREAM", z.enum(["true", "false"]), optional(env, "CREW_EVENT_STREAM") ?? "false") === "true",
          approvals: check("CREW_APPROVALS", z.coerce.number().int().min(1).max(10), optional(env, "CREW_APPROVALS") ?? "1") ?? 1,
          selfApproval: check("CREW_SELF_APPROVAL", z.enum(["true", "false"]), optional(env, "CREW_SELF_APPROVAL") ?? "true") !== "false",
          ...decisionEnv,
        },
      ];
    }
  }

  crews = crews.map((crew) => offerCrew(crew, oauthWanted, problems));

  // An org names which org a workspace is in: without the workspace it names nothing.
  for (const flow of flows)
    if (flow.enterprise && !flow.team)
      problems.push(`flow "${flow.name}" names its Grid org (enterprise:, FLOW_ENTERPRISE) but not its workspace: set team: T… in CREWS_FILE, or ${describe("FLOW_TEAM")}`);

  if (oauthWanted) {
    for (const flow of flows)
      if (!flow.team)
        problems.push(
          `flow "${flow.name}" has no workspace: with SLACK_CLIENT_ID (installs in many workspaces) each flow needs team: T… in CREWS_FILE, or ${describe("FLOW_TEAM")}`,
        );
  }

  if (problems.length > 0) throw new ConfigError(problems);
  return {
    slack: { ...(botToken ? { botToken } : {}), signingSecret, appToken, apiUrl, ...(oauth ? { oauth } : {}) },
    ...(encryption ? { encryption } : {}),
    port,
    publicUrl,
    databaseUrl,
    ...(preparedStatements ? {} : { preparedStatements }),
    dataDir,
    crews,
    flows,
    polling,
    reviewReminders: { afterMinutes: reminderMinutes, max: reminderMax },
    ...(metricsToken ? { metricsToken } : {}),
    ...(webhookEventRetentionMs ? { webhookEventRetentionMs } : {}),
    ...(metricsPort !== undefined ? { metricsPort, metricsHost: metricsHost ?? "127.0.0.1" } : {}),
    logLevel,
  };
}
