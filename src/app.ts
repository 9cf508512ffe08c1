// Composition root: config → database → crews → use cases → jobs → Slack app and HTTP routes. Every
// part is built once, in dependency order, and handed what it needs: nothing is bound after it is made.

import crypto from "node:crypto";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type App, webApi } from "@slack/bolt";
import { CREW_GET_LONGEST_MS, CREW_POST_LONGEST_MS } from "./adapters/crew/client.js";
import { CrewRegistry } from "./adapters/crew/registry.js";
import { flowCallbackClient } from "./adapters/flows/callback-client.js";
import { flowIntakeHandler, flowWebhookUrl } from "./adapters/http/flow-intake.js";
import { metricsHandler } from "./adapters/http/metrics-route.js";
import { callbackHandler, healthHandler } from "./adapters/http/routes.js";
import { webhookUrlBuilder } from "./adapters/http/webhook-urls.js";
import { channelMembersCache, tokenWorkspace } from "./adapters/slack/access.js";
import { InstalledClients, type SlackClients, singleTokenClients } from "./adapters/slack/clients.js";
import { registerDecisionClicks } from "./adapters/slack/decisions/clicks.js";
import { registerDecisionEdit } from "./adapters/slack/decisions/edit.js";
import { registerDecisionReassign } from "./adapters/slack/decisions/reassign.js";
import type { FeatureDeps } from "./adapters/slack/deps.js";
import { SlackFlowEffects } from "./adapters/slack/flows/slack-effects.js";
import { homeRepublisher, registerAppHome } from "./adapters/slack/home/home.js";
import { DbInstallationStore } from "./adapters/slack/installations.js";
import { registerCrewCommand } from "./adapters/slack/kickoff/command.js";
import { registerCrewPicker } from "./adapters/slack/kickoff/modal.js";
import { registerMessageShortcut } from "./adapters/slack/kickoff/shortcut.js";
import { registerKickoffSubmission } from "./adapters/slack/kickoff/submit.js";
import { SlackRunNotifier } from "./adapters/slack/notifier.js";
import { registerReplyDecisions } from "./adapters/slack/reply/handlers.js";
import { registerStopActions } from "./adapters/slack/review/stop.js";
import { registerUninstall } from "./adapters/slack/uninstall.js";
import type { AppConfig, CrewConfig } from "./config/config.js";
import { TokenCipher } from "./crypto/token-cipher.js";
import { approvalPolicy } from "./domain/approvals.js";
import { createLogger, type Logger } from "./log/log.js";
import { Metrics } from "./metrics/metrics.js";
import { pendingEffectsReader, sharedFiguresReader } from "./metrics/shared-figures.js";
import { SlackBudget, type SlackCall } from "./outbox/budget.js";
import { DurableOutbox } from "./outbox/index.js";
import { slackEffectPerformer } from "./outbox/perform.js";
import { moveOnRefusal } from "./outbox/refused.js";
import { DEFAULT_OUTBOX_OPTIONS, effectCallTimeout, type OutboxOptions, OutboxWorker } from "./outbox/worker.js";
import type { CrewApi } from "./protocols/crew/types.js";
import { boltLogger, metricsServer as createMetricsServer, createSlackApp } from "./root/slack-app.js";
import { type Database, openDatabase } from "./store/db/database.js";
import { HomeStore } from "./store/home.js";
import { pingDatabase } from "./store/sql.js";
import { Audit } from "./usecases/audit.js";
import { FlowRequests } from "./usecases/flows.js";
import { type Job, Jobs } from "./usecases/jobs.js";
import { Lifecycle } from "./usecases/lifecycle.js";
import { type Clock, systemClock, type TeamRef } from "./usecases/ports.js";
import { type HeartbeatOptions, ReplicaHeartbeat } from "./usecases/replicas.js";
import { ReplyDecisions } from "./usecases/reply-decisions.js";
import { ApprovalRows } from "./usecases/review-context.js";
import { type DeadlineOf, ReviewRequests } from "./usecases/review-requests.js";
import { ReviewerRules } from "./usecases/reviewer-rules.js";
import { RunWatcher, type WatcherOptions } from "./usecases/watcher.js";

export { STREAM_EVENTS, webhookUrlBuilder } from "./adapters/http/webhook-urls.js";

/** The Web API retry policy of the clients that answer Slack requests: three tries within about 3 s. */
export const REQUEST_RETRIES = { retries: 2, factor: 2, minTimeout: 500, maxTimeout: 2000 };
/** A Web API call made while answering a request gives up after this long. */
const REQUEST_TIMEOUT_MS = 10_000;
/** How long a stop waits for Slack handlers already answered (a kickoff storing its crew's answer) before it goes on. */
const HANDLERS_GRACE_MS = 10_000;

export interface CrewlineOptions {
  log?: Logger;
  database?: Database;
  clock?: Clock;
  progressIntervalMs?: number;
  crewClient?: (crew: CrewConfig) => CrewApi;
  /** Web API retry policy (tests shorten it). */
  slackRetries?: { retries: number; factor?: number; minTimeout?: number; maxTimeout?: number };
  /** How long a Web API call made while answering a request may take (tests shorten it). */
  slackTimeoutMs?: number;
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
  /** Called when the bot cannot go on (its embedded database's engine stopped): the process entry exits so a supervisor restarts it. */
  onFatal?: (err: Error) => void;
}

export interface Crewline {
  app: App;
  database: Database;
  lifecycle: Lifecycle;
  crews: CrewRegistry;
  watcher: RunWatcher;
  reviewers: ReviewerRules;
  /** Review reminders, deadlines (decideWithin / onTimeout), escalation after the last reminder, and reassignment. */
  reviewRequests: ReviewRequests;
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
  /** Every periodic job (heartbeat, outbox, polling, reminders, deadlines, sweeps), started and stopped together. */
  jobs: Jobs;
  /** Applies migrations, resumes unfinished work, starts serving; resolves with the HTTP port (and the metrics port, when METRICS_PORT is set). */
  start(): Promise<{ port: number; metricsPort?: number }>;
  stop(): Promise<void>;
  /**
   * Work under way in this process that no queue shows: Slack events acknowledged and still being
   * handled, steps not yet handed to the outbox, a status polling round. Tests wait for none (test/support/harness.ts settled()).
   */
  busy(): boolean;
}

export function createCrewline(config: AppConfig, opts: CrewlineOptions = {}): Crewline {
  const log = opts.log ?? createLogger(config.logLevel);
  const clock = opts.clock ?? systemClock;
  const database =
    opts.database ??
    openDatabase({
      databaseUrl: config.databaseUrl,
      ...(config.preparedStatements === false ? { preparedStatements: false } : {}),
      onPreparedStatementsLost: () =>
        log.warn("a connection pooler lost a prepared statement: statements run unnamed from now on (DATABASE_PREPARED_STATEMENTS=false says so from the start)"),
      dataDir: config.dataDir,
      onConverted: (c) =>
        log.warn("embedded database converted to the current engine; the old folder is kept as a backup", { from: c.from, backup: c.backup, tables: c.tables, rows: c.rows }),
      // Nothing can be stored once the engine's thread is gone, and it does not come back: hand over to
      // the process entry, which exits so that a supervisor starts the bot again.
      onEngineStopped: (err) => {
        log.error("the embedded database stopped; Crewline cannot go on without it", { err });
        opts.onFatal?.(err);
      },
    });
  // A database handed in (tests, several bots on one database) is closed by whoever opened it.
  const ownsDatabase = !opts.database;
  const sql = database.sql;
  const metrics = new Metrics({
    crews: config.crews.map((c) => c.name),
    slackApiUrl: config.slack.apiUrl,
    // Read from the shared database at scrape time, so any replica tells the truth.
    shared: () => sharedFiguresReader(database.sql, () => clock.now())(),
    pendingEffects: () => pendingEffectsReader(sql, () => clock.now())(),
  });
  // What the use cases, the outbox and the routes report; the figures listen.
  const telemetry = metrics.telemetry;
  const crews = new CrewRegistry(config.crews, opts.crewClient, (crew, client) => metrics.instrumentCrew(crew.name, client));
  const webhookUrls = webhookUrlBuilder(config.publicUrl, (name) => !!config.crews.find((c) => c.name === name)?.eventStream);

  // --- Slack clients ---------------------------------------------------------------------------
  const clientOptions: webApi.WebClientOptions = {
    // Every Web API request (Bolt's per-request clients too, which copy these options) is counted.
    fetch: metrics.slackFetch(),
    ...(config.slack.apiUrl ? { slackApiUrl: config.slack.apiUrl } : {}),
    // A person waits on most of these calls (a form to open, a run to announce, a private answer):
    // retried briefly, never for the SDK's default half hour, which held a kickoff through an outage.
    retryConfig: opts.slackRetries ?? REQUEST_RETRIES,
    timeout: opts.slackTimeoutMs ?? REQUEST_TIMEOUT_MS,
  };
  const logger = boltLogger(log);
  // Distribution: tokens come from the installation store (sealed with ENCRYPTION_KEY), per workspace.
  const oauth = config.slack.oauth;
  if (oauth && !config.encryption) throw new Error("OAuth distribution needs ENCRYPTION_KEY (config.encryption)");
  const installations =
    oauth && config.encryption
      ? new DbInstallationStore({ db: database.sql, cipher: new TokenCipher(config.encryption.key, config.encryption.previous), log, clock: opts.clock })
      : undefined;
  const installedClients = installations ? new InstalledClients({ tokens: installations, clientOptions }) : undefined;
  // One bot token: the client Bolt's app.client would be (its options, its logger).
  const tokenClient = installedClients ? undefined : new webApi.WebClient(config.slack.botToken, { ...clientOptions, logger });
  // With one bot token, its workspace (who may start its crews: adapters/slack/access.ts), asked now.
  const installation = tokenClient ? tokenWorkspace(tokenClient, log) : undefined;
  const slackClients: SlackClients = installedClients ?? singleTokenClients(tokenClient!);
  // The same, without retries of their own: a post that may have reached Slack (a 5xx, no answer) is
  // looked for before it is sent again, where retrying blindly would show it twice (the run's announcement).
  const oneShotOptions = { ...clientOptions, retryConfig: { retries: 0 }, rejectRateLimitedCalls: true, logger };
  const installedOneShotClients = installations ? new InstalledClients({ tokens: installations, clientOptions: oneShotOptions }) : undefined;
  const oneShotClients: SlackClients = installedOneShotClients ?? singleTokenClients(new webApi.WebClient(config.slack.botToken, oneShotOptions));
  // The outbox's own Web API clients never retry by themselves (the outbox does, with its backoff and
  // lease), answer rate limits as errors with Retry-After, and give up a call well within the lease.
  // CLAIM_STALE_MS: how long a replica's claim on a Slack effect holds before another takes it over.
  // An effect makes up to four calls (a look-up's two pages after an interrupted attempt, a permalink,
  // the post; a file's three), each given up after the time-out: all of them end within four fifths of
  // the claim, so no other replica takes the effect over, and posts it again, while it still calls Slack
  // (60 s: 12 s a call). A lease too short for calls of a second is lengthened to hold them (effectCallTimeout).
  const { leaseMs, timeoutMs: effectCallTimeoutMs } = effectCallTimeout(opts.outbox?.leaseMs ?? config.polling?.claimStaleMs ?? DEFAULT_OUTBOX_OPTIONS.leaseMs);
  const effectsClientOptions = {
    ...clientOptions,
    retryConfig: { retries: 0 },
    rejectRateLimitedCalls: true,
    timeout: effectCallTimeoutMs,
    logger,
  };
  const installedEffectClients = installations ? new InstalledClients({ tokens: installations, clientOptions: effectsClientOptions }) : undefined;
  const effectClients: SlackClients = installedEffectClients ?? singleTokenClients(new webApi.WebClient(config.slack.botToken, effectsClientOptions));
  // User groups belong to a workspace: looked up with its token (single-workspace mode: the one client).
  const usergroupMembers = async (usergroup: string, team: TeamRef | undefined) => {
    if (oauth && !team) throw new Error("no workspace known for this user group lookup");
    const client = await slackClients.forTeam(team?.teamId ?? "", team?.enterpriseId);
    return (await client.usergroups.users.list({ usergroup })).users ?? [];
  };

  // --- use cases -------------------------------------------------------------------------------
  // One id per process in every claim it holds (outbox, status polling, decisions, deadlines, stops), announced by its heartbeat.
  const replica = new ReplicaHeartbeat({
    db: database.sql,
    replicaId: opts.watcher?.replicaId ?? crypto.randomUUID(),
    log,
    clock: opts.clock,
    options: { deadAfterMs: config.polling?.replicaDeadAfterMs, ...opts.heartbeat },
  });
  const deadAfterMs = replica.options.deadAfterMs;
  const outbox = new DurableOutbox(sql, clock);
  const audit = new Audit({ db: database.sql, log, clock });
  const reviewers = new ReviewerRules({ crews, lookup: usergroupMembers, log, clock: opts.clock });
  const reminderSettings = config.reviewReminders ?? { afterMinutes: 60, max: 3 };
  const deadlineOf: DeadlineOf = (name) => {
    const crew = crews.config(name);
    return crew?.decideWithinMs ? { withinMs: crew.decideWithinMs, onTimeout: crew.onTimeout ?? "remind" } : undefined;
  };
  const lifecycle = new Lifecycle({
    db: database.sql,
    crews,
    outbox,
    webhookUrls,
    log,
    clock: opts.clock,
    audit,
    gate: reviewers.gate,
    approvalPolicy: (crewName) => approvalPolicy(crews.config(crewName)),
    progressIntervalMs: opts.progressIntervalMs,
    // Measured (npm run bench -- task-intake): same processing rate, p99 intake at 200/s 180-260 -> 30-80 ms.
    processingConcurrency: database.kind === "embedded" ? 1 : undefined,
    webhookEventRetentionMs: config.webhookEventRetentionMs,
    deadlineOf,
    telemetry,
    holder: replica,
    // A stop under way is not taken over before its POST /stop could still answer, as decisions (below).
    longestCrewPostMs: CREW_POST_LONGEST_MS,
  });
  const reviewRequests = new ReviewRequests({
    db: database.sql,
    outbox,
    audit,
    log,
    clock: opts.clock,
    reminders: { afterMs: reminderSettings.afterMinutes * 60_000, max: reminderSettings.max },
    rulesOf: (name) => reviewers.rulesFor(name),
    escalateToOf: (name) => crews.config(name)?.escalateTo,
    deadlineOf,
    decide: (decision) => lifecycle.reviews.decide(decision),
    claimStaleMs: config.polling?.claimStaleMs,
    holder: replica,
  });
  // A decision is abandoned once older than the claim window and than its /resume call's longest time
  // (every retry included): taken over sooner, a late answer would meet a second decision at the crew.
  const abandonedDecisionMs = Math.max(config.polling?.claimStaleMs ?? 60_000, CREW_POST_LONGEST_MS);
  // A poll's lease holds its status call's longest time (every retry included), with a margin for the database.
  const pollLeaseMs = Math.max(config.polling?.leaseMs ?? 30_000, CREW_GET_LONGEST_MS + 5_000);
  if (config.polling?.leaseMs !== undefined && config.polling.leaseMs < pollLeaseMs)
    log.info("POLL_LEASE_MS is shorter than a status call with every retry: the longer lease is used", { configured: config.polling.leaseMs, used: pollLeaseMs });
  const watcher = new RunWatcher({
    db: database.sql,
    lifecycle,
    crews,
    log,
    clock: opts.clock,
    options: { ...config.polling, abandonedDecisionMs, leaseMs: pollLeaseMs, deadAfterMs, ...opts.watcher, replicaId: replica.replicaId },
  });
  const flowConfigs = config.flows ?? [];
  const flowRules = new ReviewerRules({
    crews: { config: (name) => flowConfigs.find((f) => f.name.toLowerCase() === name.toLowerCase()), all: () => flowConfigs },
    // A flow's groups are looked up in the flow's workspace (team: and enterprise: in CREWS_FILE, FLOW_TEAM, FLOW_ENTERPRISE).
    lookup: async (usergroup, team) => {
      const flow = flowConfigs.find((f) => f.team && (f.reviewers?.usergroups.includes(usergroup) || f.escalateTo?.usergroups.includes(usergroup)));
      return usergroupMembers(usergroup, team ?? (flow?.team ? { teamId: flow.team, enterpriseId: flow.enterprise } : undefined));
    },
    log,
    clock: opts.clock,
  });
  const flows = new FlowRequests({
    db: database.sql,
    flows: flowConfigs,
    outbox,
    rules: flowRules,
    audit,
    log,
    clock: opts.clock,
    abandonedAfterMs: config.polling?.claimStaleMs,
    reminders: { afterMs: reminderSettings.afterMinutes * 60_000, max: reminderSettings.max },
    callback: flowCallbackClient(),
    holder: replica,
  });

  // --- the outbox: every Slack effect outside a request's own answer -----------------------------
  const approvalRows = new ApprovalRows(database.sql);
  const outboxWorker = new OutboxWorker({
    db: sql,
    perform: slackEffectPerformer({
      sql,
      clock,
      notifier: new SlackRunNotifier(effectClients, log),
      flows: new SlackFlowEffects(effectClients, log),
      // What messages show beside their rows: approvals so far, the edit, the previous round.
      reviewContext: (execution, review, approvals) => approvalRows.context(review, approvalPolicy(crews.config(execution.crewName)), approvals),
      flowContext: (request) => flows.context(request),
      flowRecipients: (request) => flows.directRecipients(request),
      log,
      telemetry,
    }),
    log,
    clock,
    options: {
      replicaId: replica.replicaId,
      deadAfterMs,
      ...(config.polling?.outboxConcurrency ? { concurrency: config.polling.outboxConcurrency } : {}),
      ...opts.outbox,
      leaseMs,
    },
    // A message Slack refuses in its channel for good moves its run (or flow request) to a direct message.
    events: {
      gaveUp: (effect) => telemetry.emit({ type: "effect.given_up", effect }),
      deferred: (effect, method) => telemetry.emit({ type: "effect.budget_wait", effect, method }),
      onGiveUp: moveOnRefusal,
    },
  });
  outbox.attach(outboxWorker);
  // The same buckets for the calls made in a request's own answer (the announcement at kickoff).
  const slackBudget = outboxWorker.options.budget === false ? undefined : new SlackBudget(sql, outboxWorker.options.budget);

  // --- jobs: started in this order, stopped in reverse ------------------------------------------
  const takeOverClaims = async () => {
    await lifecycle.reviews.recoverAbandoned(watcher.options.abandonedDecisionMs);
    await reviewRequests.takeOver();
    await flows.takeOver();
  };
  const jobs = new Jobs(log, [
    {
      // Alive from here: claims carry this replica's id, and the others see its heartbeat. Alone in
      // its database (embedded, folder locked), whatever is claimed there was claimed by the process
      // before it (a crash, kill -9): taken back now rather than when its leases run out.
      name: "heartbeat",
      loop: {
        start: async () => {
          await replica.start();
          if (database.exclusive) await replica.takeBackClaims();
        },
        // Marked stopped last: whatever it still holds (an effect cut off by the outbox's drain) is taken over at once.
        stop: () => replica.stop(),
      },
    },
    // Slack effects left undone are simply due in the outbox: no recovery needed.
    { name: "outbox", loop: outboxWorker, drain: () => outboxWorker.idle() },
    { name: "progress updates", loop: { start: () => {}, stop: () => lifecycle.progress.drain().then(() => lifecycle.progress.stop()) } },
    // Recorded callbacks in flight finish (briefly) on stop; anything left is recovered at the next start.
    { name: "crew callbacks", drain: () => lifecycle.callbacks.drain() },
    // The reminders and deadlines of reviews and flow requests (the decision core), and the flows' sweep.
    ...(reminderSettings.max > 0 ? [{ name: "review reminders", every: { ms: opts.reminderIntervalMs ?? 60_000, run: () => reviewRequests.remindDue() } }] : []),
    { name: "review deadlines", every: { ms: opts.deadlineIntervalMs ?? 10_000, run: () => reviewRequests.deadlinesDue() } },
    // Among replicas (PostgreSQL), one gone (its heartbeat stale) leaves its decisions under way and its
    // deadline actions to the others within seconds, not after their stale time; its stops go to the
    // next asker. Alone in its database, a process took everything back at start instead.
    ...(database.exclusive ? [] : [{ name: "claims of gone replicas", every: { ms: replica.options.everyMs, run: () => takeOverClaims() } }]),
    ...flows.jobs({ reminderIntervalMs: opts.reminderIntervalMs, sweepMs: config.polling?.sweepMs, deadlineIntervalMs: opts.deadlineIntervalMs, earlierRun: database.exclusive }),
    // Callbacks recorded but not processed (a crash between answer and work), and decisions cut off
    // mid-call (at once when the database is this process's alone: the earlier incarnation left them),
    // first; then the runs are polled (the watcher's own loop, which sweeps again every sweepMs).
    { name: "status polling", atStart: () => watcher.recover(0, database.exclusive), loop: watcher },
  ] satisfies Job[]);

  // --- HTTP routes and the Slack app ------------------------------------------------------------
  const flowHooks = flowConfigs.map((f) => ({ name: f.name, webhookUrl: flowWebhookUrl(config.publicUrl, f.name), ...(f.team ? { team: f.team } : {}) }));
  const app = createSlackApp(config, {
    routes: {
      callbacks: callbackHandler(lifecycle, log, telemetry),
      flowIntake: flowIntakeHandler(flows, log, telemetry, () => clock.now().getTime()),
      health: healthHandler(() => pingDatabase(database.sql)),
      // The public port serves the figures only behind METRICS_TOKEN; METRICS_PORT serves them on loopback.
      metrics: metricsHandler(metrics, config.metricsToken ?? "off", log),
    },
    clientOptions,
    logger,
    log,
    ...(installations ? { installations } : {}),
  });
  const metricsServer = config.metricsPort !== undefined ? createMetricsServer(metricsHandler(metrics, undefined, log)) : undefined;

  const homeDeps = { store: new HomeStore(database.sql), clock: opts.clock, clients: slackClients };
  const features: FeatureDeps = {
    lifecycle,
    crews,
    log,
    webhooksEnabled: !!config.publicUrl,
    webhookUrls,
    reviewers,
    flows,
    flowHooks,
    // Seals kickoff forms to their user and channel (adapters/slack/kickoff/form-binding.ts); a secret the bot already has.
    formKey: config.slack.signingSecret ?? config.slack.appToken ?? config.slack.botToken,
    multiWorkspace: !!oauth,
    ...(installation ? { installation } : {}),
    reviewRequests,
    channelMembers: channelMembersCache(opts.clock),
    oneShotClients,
    ...(slackBudget ? { spendSlack: (call: SlackCall, maxWaitMs?: number) => slackBudget.spendNow(call, 0, clock, maxWaitMs) } : {}),
    onRunStarted: (execution) => void watcher.watch(execution.id).catch((err) => log.warn("could not schedule status polling", { err })),
  };
  const deps: FeatureDeps = { ...features, publishHome: homeRepublisher(features, homeDeps) };
  registerCrewCommand(app, deps);
  registerCrewPicker(app, deps);
  registerKickoffSubmission(app, deps);
  registerMessageShortcut(app, deps);
  registerDecisionClicks(app, deps);
  registerDecisionEdit(app, deps);
  registerDecisionReassign(app, deps);
  registerReplyDecisions(app, deps, new ReplyDecisions({ db: database.sql, reviews: lifecycle.reviews, flows, log, clock }));
  registerStopActions(app, deps);
  registerAppHome(app, deps, homeDeps);
  if (installations && installedClients)
    registerUninstall(app, {
      db: database.sql,
      installations,
      // Every client cache (request path, its one-shot posts, outbox) drops an uninstalled workspace at once.
      clients: { forget: (match) => [installedClients, installedOneShotClients, installedEffectClients].forEach((c) => c?.forget(match)) },
      runsEnded: () => lifecycle.callbacks.forgetLive(),
      log,
      clock: opts.clock,
    });
  app.error(async (error) => log.error("slack handler failed", { err: error }));
  // Bolt answers Slack on ack() and goes on handling the event; counted so that a stop (and a test)
  // can wait for the end.
  let handling = 0;
  const handled: (() => void)[] = [];
  app.use(async ({ next }) => {
    handling++;
    try {
      await next();
    } finally {
      handling--;
      if (handling === 0) handled.splice(0).forEach((resolve) => resolve());
    }
  });
  /** Handlers already answered and still working (a kickoff storing its crew's answer) finish first, for a while. */
  const handlersDone = (withinMs: number) =>
    handling === 0
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, withinMs);
          timer.unref();
          handled.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });

  let server: Server | undefined;
  let stopping: Promise<void> | undefined;
  return {
    app,
    database,
    lifecycle,
    crews,
    watcher,
    reviewers,
    reviewRequests,
    flows,
    metrics,
    outbox,
    outboxWorker,
    slackClients,
    replica,
    jobs,
    ...(installations ? { installations } : {}),
    async start() {
      const applied = await database.migrate();
      if (applied.length) log.info("database migrated", { applied });
      // Tokens sealed with an earlier key (ENCRYPTION_KEY_PREVIOUS) are re-sealed with the current one.
      if (installations) await installations.resealStale();
      // Which tasks crews waited on before (their task messages are held for the wait): known from the start.
      await lifecycle.reviews.recallAwaited();
      await jobs.start();
      // Installed in many workspaces, a crew's groups are read on first use, in the run's workspace.
      if (!oauth) reviewers.prefetch();
      flowRules.prefetch();
      const started = (await app.start(config.port)) as unknown;
      server = started && typeof (started as Server).address === "function" ? (started as Server) : undefined;
      const port = (server?.address() as AddressInfo | null)?.port ?? config.port;
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
    busy: () => handling > 0 || lifecycle.progress.unsent > 0 || watcher.polling,
    stop() {
      // Once, however often asked (a second SIGTERM, a test's close after its own stop).
      stopping ??= (async () => {
        // No new requests first; then the jobs stop in reverse order, each drained (polling, reminders
        // and deadlines, callbacks in flight, progress, the outbox's effects under way, the heartbeat).
        await app.stop().catch(() => {});
        // Within a supervisor's usual grace (Kubernetes gives 30 s in all).
        await handlersDone(HANDLERS_GRACE_MS);
        if (metricsServer?.listening) {
          metricsServer.closeAllConnections();
          await new Promise<void>((resolve) => metricsServer.close(() => resolve()));
        }
        await jobs.stop();
        await crews.close();
        if (ownsDatabase) await database.close();
      })();
      return stopping;
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
