// Composition root: config → database → metrics and crews → Slack clients → use cases → outbox → jobs →
// Slack app, HTTP routes and handlers. Every part is built once, in dependency order (each in src/root/,
// from one options object), and handed what it needs: nothing is bound after it is made.

import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { App } from "@slack/bolt";
import { CrewRegistry } from "./adapters/crew/registry.js";
import { flowIntakeHandler, flowWebhookUrl } from "./adapters/http/flow-intake.js";
import { metricsHandler } from "./adapters/http/metrics-route.js";
import { callbackHandler, healthHandler } from "./adapters/http/routes.js";
import { webhookUrlBuilder } from "./adapters/http/webhook-urls.js";
import type { SlackClients } from "./adapters/slack/clients.js";
import type { DbInstallationStore } from "./adapters/slack/installations.js";
import type { AppConfig, CrewConfig } from "./config/config.js";
import { createLogger, type Logger } from "./log/log.js";
import { Metrics } from "./metrics/metrics.js";
import { pendingEffectsReader, sharedFiguresReader } from "./metrics/shared-figures.js";
import type { DurableOutbox } from "./outbox/index.js";
import type { OutboxOptions, OutboxWorker } from "./outbox/worker.js";
import type { CrewApi } from "./protocols/crew/types.js";
import { createJobs } from "./root/jobs.js";
import { createOutboxWorker } from "./root/outbox.js";
import { logServing } from "./root/serving-log.js";
import { metricsServer as createMetricsServer, createSlackApp } from "./root/slack-app.js";
import { createSlackClients } from "./root/slack-clients.js";
import { registerSlackHandlers } from "./root/slack-handlers.js";
import { createUseCases } from "./root/use-cases.js";
import { type Database, openDatabase } from "./store/db/database.js";
import { pingDatabase } from "./store/sql.js";
import type { FlowRequests } from "./usecases/flows.js";
import type { Jobs } from "./usecases/jobs.js";
import type { Lifecycle } from "./usecases/lifecycle.js";
import { type Clock, systemClock } from "./usecases/ports.js";
import type { HeartbeatOptions, ReplicaHeartbeat } from "./usecases/replicas.js";
import type { ReviewRequests } from "./usecases/review-requests.js";
import type { ReviewerRules } from "./usecases/reviewer-rules.js";
import type { RunWatcher, WatcherOptions } from "./usecases/watcher.js";

export { STREAM_EVENTS, webhookUrlBuilder } from "./adapters/http/webhook-urls.js";
export { REQUEST_RETRIES } from "./root/slack-clients.js";

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
  const database = opts.database ?? openOwnDatabase(config, log, opts.onFatal);
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
  const slack = createSlackClients({
    config,
    db: sql,
    log,
    clock,
    fetch: metrics.slackFetch(),
    retries: opts.slackRetries,
    timeoutMs: opts.slackTimeoutMs,
    outboxLeaseMs: opts.outbox?.leaseMs,
  });
  const { installations } = slack;
  const useCases = createUseCases({
    config,
    database,
    log,
    clock,
    telemetry,
    crews,
    webhookUrls,
    usergroupMembers: slack.usergroupMembers,
    progressIntervalMs: opts.progressIntervalMs,
    watcher: opts.watcher,
    heartbeat: opts.heartbeat,
  });
  const { replica, outbox, reviewers, flowRules, lifecycle, reviewRequests, watcher, flows } = useCases;
  // The outbox: every Slack effect outside a request's own answer.
  const { outboxWorker, spendSlack } = createOutboxWorker({
    config,
    db: sql,
    log,
    clock,
    telemetry,
    crews,
    flows,
    outbox,
    replica,
    effectClients: slack.effects,
    ...(slack.installation ? { installation: slack.installation } : {}),
    leaseMs: slack.outboxLeaseMs,
    tuning: opts.outbox,
  });
  const jobs = createJobs({
    log,
    database,
    useCases,
    outboxWorker,
    outboxDrainMs: slack.outboxCallTimeoutMs,
    reminderIntervalMs: opts.reminderIntervalMs,
    deadlineIntervalMs: opts.deadlineIntervalMs,
    sweepMs: config.polling?.sweepMs,
  });

  // HTTP routes and the Slack app, then every Slack handler.
  const flowHooks = useCases.flowConfigs.map((f) => ({ name: f.name, webhookUrl: flowWebhookUrl(config.publicUrl, f.name), ...(f.team ? { team: f.team } : {}) }));
  const app = createSlackApp(config, {
    routes: {
      callbacks: callbackHandler(lifecycle, log, telemetry),
      flowIntake: flowIntakeHandler(flows, log, telemetry, () => clock.now().getTime()),
      health: healthHandler(() => pingDatabase(database.sql)),
      // The public port serves the figures only behind METRICS_TOKEN; METRICS_PORT serves them on loopback.
      metrics: metricsHandler(metrics, config.metricsToken ?? "off", log),
    },
    clientOptions: slack.clientOptions,
    logger: slack.logger,
    log,
    ...(installations ? { installations } : {}),
  });
  const metricsServer = config.metricsPort !== undefined ? createMetricsServer(metricsHandler(metrics, undefined, log)) : undefined;
  const handlers = registerSlackHandlers({
    app,
    config,
    db: sql,
    log,
    clock,
    crews,
    webhookUrls,
    flowHooks,
    useCases,
    slack,
    ...(spendSlack ? { spendSlack } : {}),
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
    slackClients: slack.clients,
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
      if (!config.slack.oauth) reviewers.prefetch();
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
      logServing({ log, config, port, ...(metricsPort !== undefined ? { metricsPort } : {}), database, crews: crews.all(), flowHooks });
      return { port, ...(metricsPort !== undefined ? { metricsPort } : {}) };
    },
    busy: () => handlers.busy() || lifecycle.progress.unsent > 0 || watcher.polling,
    stop() {
      // Once, however often asked (a second SIGTERM, a test's close after its own stop).
      stopping ??= (async () => {
        // No new requests first; then the jobs stop in reverse order, each drained (polling, reminders
        // and deadlines, callbacks in flight, progress, the outbox's effects under way, the heartbeat).
        await app.stop().catch(() => {});
        // Within a supervisor's usual grace (Kubernetes gives 30 s in all).
        await handlers.handlersDone(HANDLERS_GRACE_MS);
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

/** The database Crewline opens itself (none handed in): PGlite in DATA_DIR, or PostgreSQL at DATABASE_URL. */
function openOwnDatabase(config: AppConfig, log: Logger, onFatal: CrewlineOptions["onFatal"]): Database {
  return openDatabase({
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
      onFatal?.(err);
    },
  });
}
