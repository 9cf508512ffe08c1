// Composition root: config → database → crews → lifecycle → Slack app and HTTP routes.

import crypto from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { App, type Logger as BoltLogger, HTTPReceiver, LogLevel, webApi } from "@slack/bolt";
import { CrewRegistry } from "./adapters/crew/registry.js";
import { flowCallbackClient } from "./adapters/flows/callback-client.js";
import { metricsHandler } from "./adapters/http/metrics-route.js";
import { CALLBACK_PATH, callbackHandler, healthHandler, isCallbackPath, matchCallbackUrl } from "./adapters/http/routes.js";
import { channelMembersCache } from "./adapters/slack/access.js";
import { InstalledClients, type SlackClients, singleTokenClients } from "./adapters/slack/clients.js";
import { registerDecisionClicks } from "./adapters/slack/decisions/clicks.js";
import { registerDecisionEdit } from "./adapters/slack/decisions/edit.js";
import { registerDecisionReassign } from "./adapters/slack/decisions/reassign.js";
import type { FeatureDeps } from "./adapters/slack/deps.js";
import { FLOW_HOOK_PATH, FLOW_HOOK_PREFIX, flowIntakeHandler, flowWebhookUrl } from "./adapters/slack/flows/handlers.js";
import { SlackFlowEffects } from "./adapters/slack/flows/slack-effects.js";
import { answerHandlerError, guardSlackEvents } from "./adapters/slack/guard.js";
import { registerAppHome } from "./adapters/slack/home/home.js";
import { DbInstallationStore } from "./adapters/slack/installations.js";
import { registerCrewCommand } from "./adapters/slack/kickoff/command.js";
import { registerCrewPicker } from "./adapters/slack/kickoff/modal.js";
import { registerMessageShortcut } from "./adapters/slack/kickoff/shortcut.js";
import { registerKickoffSubmission } from "./adapters/slack/kickoff/submit.js";
import { SlackRunNotifier } from "./adapters/slack/notifier.js";
import { installerReceiverOptions } from "./adapters/slack/oauth.js";
import { registerReplyDecisions } from "./adapters/slack/reply/handlers.js";
import { registerStopActions } from "./adapters/slack/review/stop.js";
import { registerUninstall } from "./adapters/slack/uninstall.js";
import type { AppConfig, CrewConfig } from "./config/config.js";
import { TokenCipher } from "./crypto/token-cipher.js";
import { approvalPolicy } from "./domain/approvals.js";
import { createLogger, type Logger } from "./log/log.js";
import { Metrics } from "./metrics/metrics.js";
import { pendingEffectsReader, sharedFiguresReader } from "./metrics/shared-figures.js";
import { DurableOutbox } from "./outbox/index.js";
import { slackEffectPerformer } from "./outbox/perform.js";
import { moveOnRefusal } from "./outbox/refused.js";
import { DEFAULT_OUTBOX_OPTIONS, type OutboxOptions, OutboxWorker } from "./outbox/worker.js";
import type { CrewApi } from "./protocols/crew/types.js";
import { type Database, openDatabase } from "./store/db/database.js";
import { sqlRunnerFor } from "./store/db/sql.js";
import { HomeStore } from "./store/home.js";
import { pingDatabase } from "./store/sql.js";
import type { ReviewDeadlines } from "./usecases/deadlines.js";
import { DecisionLoops } from "./usecases/decisions/loops.js";
import { ReviewEscalations } from "./usecases/escalation.js";
import { FlowRequests } from "./usecases/flows.js";
import { Lifecycle } from "./usecases/lifecycle.js";
import type { TeamRef } from "./usecases/ports.js";
import { type Clock, type Execution, type Review, systemClock, type WebhookUrls } from "./usecases/ports.js";
import { ReviewReminders, reviewersStillWaited } from "./usecases/reminders.js";
import { type HeartbeatOptions, ReplicaHeartbeat } from "./usecases/replicas.js";
import { ReplyDecisions } from "./usecases/reply-decisions.js";
import { ApprovalRows } from "./usecases/review-context.js";
import { ReviewerRules } from "./usecases/reviewer-rules.js";
import { RunWatcher, type WatcherOptions } from "./usecases/watcher.js";

export interface CrewlineOptions {
  log?: Logger;
  database?: Database;
  clock?: Clock;
  progressIntervalMs?: number;
  crewClient?: (crew: CrewConfig) => CrewApi;
  /** Web API retry policy (tests shorten it). */
  slackRetries?: { retries: number; factor?: number; minTimeout?: number; maxTimeout?: number };
  /** Status polling intervals (tests shorten them); overrides config.polling. */
  watcher?: Partial<WatcherOptions>;
  /** How often due review reminders are looked for (default 60 s). */
  reminderIntervalMs?: number;
  /** Outbox worker tuning (tests shorten the backoff). */
  outbox?: Partial<Omit<OutboxOptions, "replicaId">>;
  /** How often passed review deadlines are looked for (default 10 s). */
  deadlineIntervalMs?: number;
  /** Heartbeat tuning (tests shorten it); overrides config.polling.replicaDeadAfterMs. */
  heartbeat?: Partial<HeartbeatOptions>;
}

export interface Crewline {
  app: App;
  database: Database;
  lifecycle: Lifecycle;
  crews: CrewRegistry;
  watcher: RunWatcher;
  reviewers: ReviewerRules;
  reminders: ReviewReminders;
  /** Review deadlines (decideWithin / onTimeout). */
  deadlines: ReviewDeadlines;
  /** Escalation after the last reminder, and reassignment. */
  escalations: ReviewEscalations;
  /** Flow feedback requests (POST /hooks/flows/<name>). */
  flows: FlowRequests;
  /** The figures GET /metrics serves. */
  metrics: Metrics;
  /** Every Slack effect outside a request's own answer, and the worker of this process that performs them. */
  outbox: DurableOutbox;
  outboxWorker: OutboxWorker;
  /** The Slack client of each workspace, for work outside a Slack request (one client unless installed by OAuth). */
  slackClients: SlackClients;
  /** Each workspace's installation (OAuth distribution only). */
  installations?: DbInstallationStore;
  /** This process among the replicas: its heartbeat, and its id in every claim it holds. */
  replica: ReplicaHeartbeat;
  /** Applies migrations, resumes unfinished work, starts serving; resolves with the HTTP port (and the metrics port, when METRICS_PORT is set). */
  start(): Promise<{ port: number; metricsPort?: number }>;
  stop(): Promise<void>;
}

/** The events Crewline reads from a crew's event stream (progress, task outputs, the end of the run). */
export const STREAM_EVENTS = [
  "crew_kickoff_started",
  "crew_kickoff_completed",
  "crew_kickoff_failed",
  "task_started",
  "task_completed",
  "task_failed",
  "agent_execution_started",
  "tool_usage_started",
  "tool_usage_finished",
  "tool_usage_error",
  "llm_call_started",
  "llm_call_completed",
];

export function webhookUrlBuilder(publicUrl: string | undefined, eventStream: (crewName: string) => boolean = () => false) {
  return (execution: Execution): WebhookUrls | undefined => {
    if (!publicUrl || !execution.webhooks) return undefined;
    const base = `${publicUrl}/hooks/${execution.id}`;
    return {
      stepWebhookUrl: `${base}/step/${execution.webhookSecret}`,
      taskWebhookUrl: `${base}/task/${execution.webhookSecret}`,
      crewWebhookUrl: `${base}/crew/${execution.webhookSecret}`,
      ...(execution.humanInputToken
        ? { humanInputWebhook: { url: `${base}/input/${execution.webhookSecret}`, authentication: { strategy: "bearer" as const, token: execution.humanInputToken } } }
        : {}),
      ...(execution.humanInputToken && eventStream(execution.crewName)
        ? {
            webhooks: {
              events: [...STREAM_EVENTS],
              url: `${base}/events/${execution.webhookSecret}`,
              realtime: false,
              authentication: { strategy: "bearer" as const, token: execution.humanInputToken },
            },
          }
        : {}),
    };
  };
}

/** The metrics port answers GET /metrics and nothing else. */
function metricsOnlyListener(handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>) {
  return (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === "GET" && (req.url ?? "").split("?")[0] === "/metrics") return void handle(req, res);
    req.resume();
    res.writeHead(404, { "content-type": "text/plain; charset=utf-8" }).end("not found\n");
  };
}

function boltLogger(log: Logger): BoltLogger {
  const join = (msg: unknown[]) => msg.map((m) => (m instanceof Error ? m.message : typeof m === "string" ? m : JSON.stringify(m))).join(" ");
  return {
    debug: (...msg) => log.debug(join(msg)),
    info: (...msg) => log.info(join(msg)),
    warn: (...msg) => log.warn(join(msg)),
    error: (...msg) => log.error(join(msg)),
    setLevel: () => {},
    getLevel: () => LogLevel.INFO,
    setName: () => {},
  };
}

/**
 * Crew callbacks (thousands of step POSTs in a burst) go straight to their handler; the rest to Bolt.
 * Every method and shape of a /hooks/ path gets the handler's answer (404, 405): Bolt would log the URL, secret included.
 */
function withCallbackFastPath(receiver: HTTPReceiver, handle: (req: IncomingMessage & { params: Record<string, string> }, res: ServerResponse) => void): HTTPReceiver {
  const boltListener = receiver.requestListener;
  receiver.requestListener = (req, res) => {
    if (isCallbackPath(req.url)) return handle(Object.assign(req, { params: matchCallbackUrl(req.url) ?? {} }), res);
    return boltListener(req, res);
  };
  return receiver;
}

export function createCrewline(config: AppConfig, opts: CrewlineOptions = {}): Crewline {
  const log = opts.log ?? createLogger();
  const database = opts.database ?? openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  // A database handed in (tests, several bots on one database) is closed by whoever opened it.
  const ownsDatabase = !opts.database;
  const metrics = new Metrics({
    crews: config.crews.map((c) => c.name),
    slackApiUrl: config.slack.apiUrl,
    // Read from the shared database at scrape time, so any replica tells the truth.
    shared: () => sharedFiguresReader(database.prisma, () => (opts.clock ?? systemClock).now())(),
    pendingEffects: () => pendingEffectsReader(sqlRunnerFor(database.prisma), () => (opts.clock ?? systemClock).now())(),
  });
  const crews = new CrewRegistry(config.crews, opts.crewClient, (crew, client) => metrics.instrumentCrew(crew.name, client));
  const webhookUrls = webhookUrlBuilder(config.publicUrl, (name) => !!config.crews.find((c) => c.name === name)?.eventStream);

  const customRoutes = [
    // Every method under /hooks/ is ours (405 for non-POST): Bolt would log the path, secret included.
    { path: CALLBACK_PATH, method: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], handler: (req: any, res: any) => callbacks(req, res) },
    {
      path: FLOW_HOOK_PATH,
      method: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
      handler: (req: any, res: any) => (req.method === "POST" ? flowIntake(req, res) : callbacks(req, res)),
    },
    { path: "/healthz", method: ["GET"], handler: (req: any, res: any) => health(req, res) },
    { path: "/metrics", method: ["GET"], handler: (req: any, res: any) => metricsRoute(req, res) },
  ];
  const clientOptions = {
    // Every Web API request (Bolt's per-request clients too, which copy these options) is counted.
    fetch: metrics.slackFetch(),
    ...(config.slack.apiUrl ? { slackApiUrl: config.slack.apiUrl } : {}),
    ...(opts.slackRetries ? { retryConfig: opts.slackRetries } : {}),
  };
  const logger = boltLogger(log);
  // Distribution: tokens come from the installation store (sealed with ENCRYPTION_KEY), per workspace.
  const oauth = config.slack.oauth;
  if (oauth && !config.encryption) throw new Error("OAuth distribution needs ENCRYPTION_KEY (config.encryption)");
  const installations =
    oauth && config.encryption ? new DbInstallationStore(database.prisma, new TokenCipher(config.encryption.key, config.encryption.previous), log, opts.clock) : undefined;
  const app = config.slack.appToken
    ? new App({
        token: config.slack.botToken,
        appToken: config.slack.appToken,
        socketMode: true,
        customRoutes,
        // The Socket Mode client has its own Web API client (apps.connections.open): same base URL.
        installerOptions: { port: config.port, clientOptions },
        clientOptions,
        logger,
      })
    : new App({
        token: config.slack.botToken,
        receiver: guardSlackEvents(
          withCallbackFastPath(
            new HTTPReceiver({
              signingSecret: config.slack.signingSecret!,
              endpoints: "/slack/events",
              customRoutes,
              logger,
              processEventErrorHandler: answerHandlerError,
              ...(oauth && installations ? installerReceiverOptions(oauth, installations, clientOptions, config.publicUrl) : {}),
            }),
            (req, res) => (req.url?.startsWith(FLOW_HOOK_PREFIX) && req.method === "POST" ? flowIntake(req, res) : callbacks(req, res)),
          ),
          log,
          config.slack.signingSecret!,
        ),
        clientOptions,
        logger,
      });

  const clock = opts.clock ?? systemClock;
  const sql = sqlRunnerFor(database.prisma);
  const installedClients = installations ? new InstalledClients(installations, clientOptions) : undefined;
  const slackClients: SlackClients = installedClients ?? singleTokenClients(app.client);
  // The outbox's own Web API clients never retry by themselves (the outbox does, with its backoff and
  // lease), answer rate limits as errors with Retry-After, and give up a call well within the lease.
  // CLAIM_STALE_MS: how long a replica's claim on a Slack effect holds before another takes it over.
  const leaseMs = opts.outbox?.leaseMs ?? config.polling?.claimStaleMs ?? DEFAULT_OUTBOX_OPTIONS.leaseMs;
  // One id per process in every claim it holds (outbox and status polling), announced by its heartbeat.
  const replica = new ReplicaHeartbeat(
    database.prisma,
    opts.watcher?.replicaId ?? crypto.randomUUID(),
    log,
    { deadAfterMs: config.polling?.replicaDeadAfterMs, ...opts.heartbeat },
    opts.clock,
  );
  const deadAfterMs = replica.options.deadAfterMs;
  const effectsClientOptions = {
    ...clientOptions,
    retryConfig: { retries: 0 },
    rejectRateLimitedCalls: true,
    // A call gives up well within its claim (an effect makes at most two), so no other replica takes
    // the effect over while it runs.
    timeout: Math.min(20_000, Math.max(2000, Math.floor(leaseMs / 3))),
    logger,
  };
  const installedEffectClients = installations ? new InstalledClients(installations, effectsClientOptions) : undefined;
  const effectClients: SlackClients = installedEffectClients ?? singleTokenClients(new webApi.WebClient(config.slack.botToken, effectsClientOptions));
  const outbox = new DurableOutbox(sql, clock);
  const approvalRows = new ApprovalRows(database.prisma);
  const outboxWorker = new OutboxWorker(
    sql,
    slackEffectPerformer({
      sql,
      clock,
      notifier: metrics.instrumentNotifier(new SlackRunNotifier(effectClients, log)),
      flows: new SlackFlowEffects(effectClients, log),
      // What messages show beside their rows: approvals so far, the edit, the previous round.
      reviewContext: (execution, review) => approvalRows.context(review, approvalPolicy(crews.config(execution.crewName))),
      flowContext: (request) => flows.context(request),
      flowRecipients: (request) => flows.directRecipients(request),
      log,
    }),
    log,
    clock,
    {
      replicaId: replica.replicaId,
      deadAfterMs,
      ...(config.polling?.outboxConcurrency ? { concurrency: config.polling.outboxConcurrency } : {}),
      ...opts.outbox,
      leaseMs,
    },
    // A message Slack refuses in its channel for good moves its run (or flow request) to a direct message.
    { ...metrics.outboxEvents(), onGiveUp: moveOnRefusal },
  );
  outbox.attach(outboxWorker);

  // User groups belong to a workspace: looked up with its token (single-workspace mode: the one client).
  const usergroupMembers = async (usergroup: string, team: TeamRef | undefined) => {
    if (oauth && !team) throw new Error("no workspace known for this user group lookup");
    const client = await slackClients.forTeam(team?.teamId ?? "", team?.enterpriseId);
    return (await client.usergroups.users.list({ usergroup })).users ?? [];
  };
  const reviewers = new ReviewerRules(crews, usergroupMembers, log, opts.clock);
  const reminderSettings = config.reviewReminders ?? { afterMinutes: 60, max: 3 };
  // Bound below, once the lifecycle (and its audit trail) exists.
  let escalations: ReviewEscalations | undefined;
  const afterReminder = async (execution: Execution, review: Review, sent: number) => void (await escalations?.afterReminder(execution, review, sent));
  const lifecycle = new Lifecycle({
    db: database.prisma,
    crews,
    outbox,
    webhookUrls,
    log,
    clock: opts.clock,
    gate: reviewers.gate,
    approvalPolicy: (crewName) => approvalPolicy(crews.config(crewName)),
    progressIntervalMs: opts.progressIntervalMs,
    // Measured (npm run bench -- task-intake): same processing rate, p99 intake at 200/s 180-260 -> 30-80 ms.
    processingConcurrency: database.kind === "embedded" ? 1 : undefined,
    webhookEventRetentionMs: config.webhookEventRetentionMs,
    deadlinePolicy: {
      deadlineOf: (name) => {
        const crew = crews.config(name);
        return crew?.decideWithinMs ? { withinMs: crew.decideWithinMs, onTimeout: crew.onTimeout ?? "remind" } : undefined;
      },
      // A deadline's remind, like a reminder, leaves out named reviewers who already approved.
      reviewersOf: async (name, reviewId) => (reviewId ? await reviewersStillWaited(database.prisma, reviewers.rulesFor(name), reviewId) : undefined) ?? reviewers.who(name),
    },
    afterReminder,
    claimStaleMs: config.polling?.claimStaleMs,
  });
  escalations = new ReviewEscalations({
    db: database.prisma,
    outbox,
    audit: lifecycle.audit,
    log,
    clock: opts.clock,
    escalateToOf: (name) => crews.config(name)?.escalateTo,
    reminderMax: reminderSettings.max,
  });
  const reminders = new ReviewReminders(
    { db: database.prisma, outbox, reviewersOf: (crew) => reviewers.who(crew), rulesOf: (crew) => reviewers.rulesFor(crew), log, clock: opts.clock, afterReminder },
    { afterMs: reminderSettings.afterMinutes * 60_000, max: reminderSettings.max },
  );
  // A decision is abandoned once older than the claim window and than twice a /resume call's longest wait (connect + read).
  const abandonedDecisionMs = Math.max(config.polling?.claimStaleMs ?? 60_000, 40_000);
  const watcher = new RunWatcher(
    database.prisma,
    lifecycle,
    crews,
    log,
    { ...config.polling, abandonedDecisionMs, deadAfterMs, ...opts.watcher, replicaId: replica.replicaId },
    opts.clock,
  );
  metrics.instrumentDecisions(lifecycle.reviews);
  const callbacks = metrics.instrumentCallbacks((req) => req.params?.kind ?? "", callbackHandler(lifecycle, log));
  const flowConfigs = config.flows ?? [];
  const flowRules = new ReviewerRules(
    { config: (name) => flowConfigs.find((f) => f.name.toLowerCase() === name.toLowerCase()), all: () => flowConfigs },
    // A flow's groups are looked up in the flow's workspace (team: in CREWS_FILE, FLOW_TEAM).
    async (usergroup, team) => {
      const flowTeam = flowConfigs.find((f) => f.team && (f.reviewers?.usergroups.includes(usergroup) || f.escalateTo?.usergroups.includes(usergroup)))?.team;
      return usergroupMembers(usergroup, team ?? (flowTeam ? { teamId: flowTeam } : undefined));
    },
    log,
    opts.clock,
  );
  const flows = new FlowRequests({
    db: database.prisma,
    flows: flowConfigs,
    outbox,
    rules: flowRules,
    audit: lifecycle.audit,
    log,
    clock: opts.clock,
    abandonedAfterMs: config.polling?.claimStaleMs,
    reminders: { afterMs: reminderSettings.afterMinutes * 60_000, max: reminderSettings.max },
    callback: flowCallbackClient(),
  });
  const flowIntake = metrics.instrumentCallbacks(() => "flow", flowIntakeHandler(flows, log));
  const flowHooks = flowConfigs.map((f) => ({ name: f.name, webhookUrl: flowWebhookUrl(config.publicUrl, f.name), ...(f.team ? { team: f.team } : {}) }));
  const health = healthHandler(() => pingDatabase(database.prisma));
  // The public port serves the figures only behind METRICS_TOKEN; METRICS_PORT serves them on loopback.
  const metricsRoute = metricsHandler(metrics, config.metricsToken ?? "off", log);
  const metricsServer = config.metricsPort !== undefined ? createServer(metricsOnlyListener(metricsHandler(metrics, undefined, log))) : undefined;

  // Seals kickoff forms to their user and channel (adapters/slack/kickoff/form-binding.ts); a secret the bot already has.
  const formKey = config.slack.signingSecret ?? config.slack.appToken ?? config.slack.botToken;
  const deps: FeatureDeps = {
    lifecycle,
    crews,
    log,
    webhooksEnabled: !!config.publicUrl,
    webhookUrls,
    reviewers,
    flows,
    flowHooks,
    formKey,
    multiWorkspace: !!oauth,
    escalations,
    channelMembers: channelMembersCache(opts.clock),
  };
  deps.onRunStarted = (execution) => void watcher.watch(execution.id).catch((err) => log.warn("could not schedule status polling", { err }));
  registerCrewCommand(app, deps);
  registerCrewPicker(app, deps);
  registerKickoffSubmission(app, deps);
  registerMessageShortcut(app, deps);
  registerDecisionClicks(app, deps);
  registerDecisionEdit(app, deps);
  registerDecisionReassign(app, deps);
  registerReplyDecisions(app, deps, new ReplyDecisions({ db: database.prisma, reviews: lifecycle.reviews, flows, log, clock }));
  registerStopActions(app, deps);
  registerAppHome(app, deps, { store: new HomeStore(database.prisma), clock: opts.clock, clients: slackClients });
  if (installations && installedClients)
    registerUninstall(app, {
      db: database.prisma,
      installations,
      // Both client caches (request path and outbox) drop an uninstalled workspace at once.
      clients: { forget: (match) => [installedClients, installedEffectClients].forEach((c) => c?.forget(match)) },
      log,
      clock: opts.clock,
    });
  app.error(async (error) => log.error("slack handler failed", { err: error }));

  // One loop for the reminders and deadlines of reviews and flow requests (the decision core).
  const decisionLoops = new DecisionLoops(log, [
    ...(reminderSettings.max > 0 ? [{ what: "review reminders", everyMs: opts.reminderIntervalMs ?? 60_000, run: () => reminders.tick() }] : []),
    { what: "review deadlines", everyMs: opts.deadlineIntervalMs ?? 10_000, run: () => lifecycle.deadlines.tick() },
    ...flows.jobs({ reminderIntervalMs: opts.reminderIntervalMs, sweepMs: config.polling?.sweepMs, deadlineIntervalMs: opts.deadlineIntervalMs }),
  ]);
  let server: Server | undefined;
  return {
    app,
    database,
    lifecycle,
    crews,
    watcher,
    reviewers,
    reminders,
    deadlines: lifecycle.deadlines,
    escalations,
    flows,
    metrics,
    outbox,
    outboxWorker,
    slackClients,
    replica,
    ...(installations ? { installations } : {}),
    async start() {
      const applied = await database.migrate();
      if (applied.length) log.info("database migrated", { applied });
      // Tokens sealed with an earlier key (ENCRYPTION_KEY_PREVIOUS) are re-sealed with the current one.
      if (installations) await installations.resealStale();
      // Alive from here: claims carry this replica's id, and the others see its heartbeat. Alone in
      // its database (embedded, folder locked), whatever is claimed there was claimed by the process
      // before it (a crash, kill -9): taken back now rather than when its leases run out.
      await replica.start();
      if (database.exclusive) await replica.takeBackClaims();
      // Callbacks recorded but not processed (a crash between answer and work); Slack effects left
      // undone are simply due in the outbox, which the worker picks up.
      await watcher.recover();
      await flows.recover();
      outboxWorker.start();
      // Installed in many workspaces, a crew's groups are read on first use, in the run's workspace.
      if (!oauth) reviewers.prefetch();
      flowRules.prefetch();
      decisionLoops.start();
      const started = (await app.start(config.port)) as unknown;
      server = started && typeof (started as Server).address === "function" ? (started as Server) : undefined;
      const port = (server?.address() as AddressInfo | null)?.port ?? config.port;
      watcher.start();
      let metricsPort: number | undefined;
      if (metricsServer) {
        await new Promise<void>((resolve, reject) => {
          metricsServer.once("error", reject);
          metricsServer.listen(config.metricsPort, config.metricsHost ?? "127.0.0.1", () => resolve());
        });
        metricsPort = (metricsServer.address() as AddressInfo).port;
      }
      log.info("crewline is serving", {
        port,
        mode: config.slack.appToken ? "socket" : oauth ? "http, installable (GET /slack/install)" : "http",
        database: database.kind,
        crews: crews.all().map((c) => c.name),
        metrics:
          metricsPort !== undefined
            ? `GET /metrics on ${config.metricsHost ?? "127.0.0.1"}:${metricsPort}`
            : config.metricsToken
              ? "GET /metrics with METRICS_TOKEN"
              : "off (set METRICS_TOKEN or METRICS_PORT)",
      });
      if (oauth) logCrewOffers(log, crews.all());
      // Installed in many workspaces, a flow is listed (help, App Home) only in its own workspace.
      const homeless = flowHooks.filter((hook) => !hook.team).map((hook) => hook.name);
      if (oauth && homeless.length) log.warn("flows with no workspace (team:) are listed in no workspace's /crew help or App Home", { flows: homeless });
      // The URL to paste into each flow's dashboard (Settings → Human in the Loop); never its secret.
      for (const hook of flowHooks)
        log.info("flow feedback webhook", { flow: hook.name, url: hook.webhookUrl, ...(config.publicUrl ? {} : { note: "set PUBLIC_URL to the externally reachable base URL" }) });
      return { port, ...(metricsPort !== undefined ? { metricsPort } : {}) };
    },
    async stop() {
      await watcher.stop();
      await decisionLoops.stop();
      await app.stop().catch(() => {});
      if (metricsServer?.listening) {
        metricsServer.closeAllConnections();
        await new Promise<void>((resolve) => metricsServer.close(() => resolve()));
      }
      // Let recorded callbacks in flight finish (briefly); anything left is recovered at the next start.
      await Promise.race([lifecycle.callbacks.drain(), new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
      await lifecycle.progress.drain();
      lifecycle.progress.stop();
      outboxWorker.stop();
      await Promise.race([outboxWorker.idle(), new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
      // Marked stopped: whatever it still holds (an effect cut off by the wait above) is taken over at once.
      await replica.stop();
      await crews.close();
      if (ownsDatabase) await database.close();
    },
  };
}

/**
 * Installable by anyone (OAuth): which crews every workspace may use (teams: ["*"]), and which none
 * may (no teams: in CREWS_FILE, or CREW_TEAMS, is offered to no workspace in this mode).
 */
function logCrewOffers(log: Logger, crews: CrewConfig[]): void {
  const open = crews.filter((c) => !c.teams).map((c) => c.name);
  const none = crews.filter((c) => c.teams?.length === 0).map((c) => c.name);
  if (open.length) log.warn('crews open to every workspace that installs Crewline (teams: ["*"]): each may start them', { crews: open });
  if (none.length)
    log.warn(
      'crews offered to no workspace: installable by anyone, Crewline offers a crew only to the workspaces its teams: lists (CREW_TEAMS for the one crew), or to all with teams: ["*"]',
      {
        crews: none,
      },
    );
}
