// Prometheus figures (GET /metrics). One instance per bot, made in the composition root: a listener of
// the events the use cases, the outbox and the HTTP routes emit (usecases/telemetry.ts), and the
// wrapper of the two outside clients it times (the crew clients, the Slack Web API client's fetch).
// Nothing but the composition root imports it (a dependency-cruiser rule): a leaf.
//
// Labels never carry ids, tokens or user names, and every label takes values from a fixed set:
// callback kinds, HTTP answers, Slack method names, configured crew names, crew operations and error
// kinds; anything else becomes "other". Per-event work is a counter increment or a Map write, never a
// query. Figures about the shared database (reviews waiting, pending Slack effects, poll leases) are
// read from it when scraped, so every replica reports the same truth; counters and histograms are
// this process's own.

import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { isCrewError } from "../protocols/crew/errors.js";
import type { CrewApi } from "../protocols/crew/types.js";
import type { DatabaseFigures } from "../store/figures.js";
import type { Telemetry } from "../usecases/telemetry.js";

/** Figures describing the shared database, read at scrape time (see shared-figures.ts; store/figures.ts says what each counts). */
export type SharedFigures = DatabaseFigures;

/** Slack effects stored but not yet done, and how long the oldest has waited. */
export interface PendingEffects {
  count: number;
  oldestAgeSeconds: number;
}

export interface MetricsOptions {
  /** Configured crew names: the only values of the `crew` label (others: "other"). */
  crews: string[];
  /** The Slack Web API base URL the bot calls (method names are read from request URLs under it). */
  slackApiUrl?: string;
  /** Reads the shared figures from the database; unset: they are not reported. */
  shared?: () => Promise<SharedFigures>;
  /** Slack effects due in the outbox (all replicas). */
  pendingEffects?: () => Promise<PendingEffects>;
  /** Node.js process figures (memory, CPU, event loop); default true. */
  processMetrics?: boolean;
}

const CALLBACK_KINDS = new Set(["step", "task", "crew", "input", "events", "flow"]);
const ANSWERS = new Set([200, 201, 202, 204, 400, 401, 403, 404, 405, 409, 413, 415, 422, 429, 500, 502, 503]);
const CREW_OPERATIONS = ["inputs", "kickoff", "status", "resume", "stop"] as const;
const CREW_ERROR_KINDS = new Set(["bad_request", "unauthorized", "not_found", "missing_inputs", "server", "timeout", "unreachable", "invalid_response"]);
/** Slack error codes worth telling apart on a dashboard; any other code counts as "other". */
const SLACK_ERRORS = new Set([
  "ratelimited",
  "channel_not_found",
  "not_in_channel",
  "is_archived",
  "msg_too_long",
  "invalid_blocks",
  "invalid_auth",
  "not_authed",
  "token_revoked",
  "token_expired",
  "account_inactive",
  "missing_scope",
  "message_not_found",
  "cant_update_message",
  "user_not_found",
  "users_not_found",
  "no_permission",
  "restricted_action",
  "expired_trigger_id",
  "invalid_trigger_id",
  "view_not_found",
  "hash_conflict",
  "invalid_arguments",
  "internal_error",
  "fatal_error",
  "request_timeout",
  "service_unavailable",
]);
/** A Web API method name: `chat.postMessage`, `usergroups.users.list`. */
const SLACK_METHOD = /^[a-z][a-zA-Z]*(?:\.[a-zA-Z]+){1,3}$/;

/** Seconds: fast HTTP work up to slow human decisions. */
const CALL_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const VISIBLE_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
const DECISION_BUCKETS = [10, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 259200];

/** Webhook arrivals waiting for their Slack effect, kept per execution; bounded. */
const MAX_ARRIVALS = 10_000;

type Fetch = typeof globalThis.fetch;

export class Metrics {
  readonly registry = new Registry();
  private readonly shared = new Registry();
  private readonly crewNames: Map<string, string>;
  private readonly slackApiUrl: string;
  private readonly readShared?: () => Promise<SharedFigures>;
  private pendingEffectsSource?: () => Promise<PendingEffects>;
  // One database read per scrape, whichever gauge asks first (cleared when a scrape begins).
  private sharedRead?: Promise<SharedFigures>;
  private effectsRead?: Promise<PendingEffects>;
  /** `${executionId}:task|input` → when the webhook was answered 202 (ms). Never a label. */
  private readonly arrivals = new Map<string, number>();

  private readonly callbacks: Counter<"kind" | "answer">;
  private readonly slackCalls: Counter<"method">;
  private readonly slackErrors: Counter<"method" | "error">;
  private readonly slackRateLimited: Counter<"method">;
  private readonly slackDuration: Histogram<"method">;
  private readonly crewCalls: Counter<"crew" | "operation">;
  private readonly crewErrors: Counter<"crew" | "operation" | "error">;
  private readonly crewDuration: Histogram<"crew" | "operation">;
  private readonly runsStarted: Counter<"crew">;
  private readonly runsFinished: Counter<"crew" | "outcome">;
  private readonly reviewVisible: Histogram<"source">;
  private readonly decisionTime: Histogram<"decision">;
  private readonly sharedUp: Gauge;
  private readonly effectsGivenUp: Counter<"effect">;
  private readonly budgetWaits: Counter<"method">;

  constructor(opts: MetricsOptions) {
    this.crewNames = new Map(opts.crews.map((name) => [name.toLowerCase(), name]));
    this.slackApiUrl = withSlash(opts.slackApiUrl ?? "https://slack.com/api/");
    this.readShared = opts.shared;
    this.pendingEffectsSource = opts.pendingEffects;
    const registers = [this.registry];
    if (opts.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });

    this.callbacks = new Counter({
      name: "crewline_callbacks_received_total",
      help: "Crew callbacks (step, task, crew, input, events) and flow feedback requests received, by kind and HTTP answer.",
      labelNames: ["kind", "answer"],
      registers,
    });
    this.slackCalls = new Counter({
      name: "crewline_slack_api_calls_total",
      help: "Slack Web API HTTP requests (each retry counts), by method.",
      labelNames: ["method"],
      registers,
    });
    this.slackErrors = new Counter({
      name: "crewline_slack_api_errors_total",
      help: "Slack Web API requests that failed: an ok:false answer (its Slack error code), an HTTP error (http) or no answer (network). 429s are counted apart.",
      labelNames: ["method", "error"],
      registers,
    });
    this.slackRateLimited = new Counter({
      name: "crewline_slack_api_rate_limited_total",
      help: "Slack Web API requests answered 429 (rate limited; the client waits Retry-After and retries), by method.",
      labelNames: ["method"],
      registers,
    });
    this.slackDuration = new Histogram({
      name: "crewline_slack_api_duration_seconds",
      help: "Time to Slack's HTTP answer, by method.",
      labelNames: ["method"],
      buckets: CALL_BUCKETS,
      registers,
    });
    this.crewCalls = new Counter({
      name: "crewline_crew_api_calls_total",
      help: "Calls to a crew's API (inputs, kickoff, status, resume, stop; retries inside one call included), by crew and operation.",
      labelNames: ["crew", "operation"],
      registers,
    });
    this.crewErrors = new Counter({
      name: "crewline_crew_api_errors_total",
      help: "Crew API calls that failed, by crew, operation and error kind.",
      labelNames: ["crew", "operation", "error"],
      registers,
    });
    this.crewDuration = new Histogram({
      name: "crewline_crew_api_duration_seconds",
      help: "Crew API call latency (retries included), by crew and operation.",
      labelNames: ["crew", "operation"],
      buckets: CALL_BUCKETS,
      registers,
    });
    this.effectsGivenUp = new Counter({
      name: "crewline_slack_effects_given_up_total",
      help: "Slack effects the outbox gave up (a permanent Slack error, or too many failed attempts), by kind of effect.",
      labelNames: ["effect"],
      registers,
    });
    this.budgetWaits = new Counter({
      name: "crewline_slack_budget_waits_total",
      help: "Web API calls the outbox held back because their workspace (or channel) had no budget left for them, by method; the effect waits for its token (src/outbox/budget.ts; not an attempt, nothing was sent).",
      labelNames: ["method"],
      registers,
    });
    this.runsStarted = new Counter({
      name: "crewline_runs_started_total",
      help: "Runs the crew accepted (kickoff answered with an id), by crew.",
      labelNames: ["crew"],
      registers,
    });
    this.runsFinished = new Counter({
      name: "crewline_runs_finished_total",
      help: "Runs that ended (counted when the completion notice is posted, or the thread says the run was stopped), by crew and outcome: completed, failed, lost, stopped or abandoned (no longer followed).",
      labelNames: ["crew", "outcome"],
      registers,
    });
    this.reviewVisible = new Histogram({
      name: "crewline_review_visible_seconds",
      help: "Time from a task webhook (source=task) or a human-input request (source=input) being answered to its message (or its decision controls) being in Slack.",
      labelNames: ["source"],
      buckets: VISIBLE_BUCKETS,
      registers,
    });
    this.decisionTime = new Histogram({
      name: "crewline_review_decision_seconds",
      help: "Time from a review being stored and posted to the decision that reached the crew, by decision.",
      labelNames: ["decision"],
      buckets: DECISION_BUCKETS,
      registers,
    });
    this.sharedUp = new Gauge({
      name: "crewline_shared_figures_up",
      help: "1 when the figures read from the shared database (reviews waiting, pending effects, poll leases) could be read at this scrape, else 0 (and they are left out).",
      registers,
    });
    this.defineSharedGauges();
  }

  /** Where pending Slack effects are counted (the coordinator points this at the outbox table). */
  setPendingEffectsSource(source: () => Promise<PendingEffects>): void {
    this.pendingEffectsSource = source;
    this.effectsRead = undefined;
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The exposition text: this process's figures, then the shared database's (left out if unreadable). */
  async scrape(): Promise<string> {
    this.sharedRead = undefined;
    this.effectsRead = undefined;
    let shared = "";
    try {
      shared = await this.shared.metrics();
      this.sharedUp.set(1);
    } catch {
      this.sharedUp.set(0);
    }
    return (await this.registry.metrics()) + shared;
  }

  // --- labels ---------------------------------------------------------------------------------

  crewLabel(name: string | undefined): string {
    return (name && this.crewNames.get(name.toLowerCase())) || "other";
  }

  slackMethodLabel(url: string): string {
    if (!url.startsWith(this.slackApiUrl)) return "other";
    const method = url.slice(this.slackApiUrl.length).split(/[?#]/)[0]!;
    return method.length <= 64 && SLACK_METHOD.test(method) ? method : "other";
  }

  // --- the listener ---------------------------------------------------------------------------

  /** What the use cases, the outbox and the HTTP routes report (usecases/telemetry.ts). */
  readonly telemetry: Telemetry = {
    emit: (event) => {
      switch (event.type) {
        case "callback.answered":
          return void this.callbacks.inc({ kind: CALLBACK_KINDS.has(event.kind) ? event.kind : "other", answer: answerLabel(event.status) });
        case "callback.accepted":
          // Task and input callbacks: their review's time to be visible (reviewShown) is measured from here.
          if (event.kind === "task" || event.kind === "input") this.noteArrival(`${event.executionId}:${event.kind}`, event.at);
          return;
        case "review.shown":
          return this.reviewShown(event.executionId, event.source, event.callStartedAt);
        case "run.ended":
          this.runsFinished.inc({ crew: this.crewLabel(event.crewName), outcome: outcomeLabel(event.outcome) });
          // Nothing more of this run is waited for.
          this.arrivals.delete(`${event.executionId}:task`);
          this.arrivals.delete(`${event.executionId}:input`);
          return;
        case "review.decided":
          return void this.decisionTime.observe({ decision: event.approve ? "approve" : "reject" }, event.waitedMs / 1000);
        case "effect.given_up":
          return void this.effectsGivenUp.inc({ effect: event.effect });
        case "effect.budget_wait":
          return void this.budgetWaits.inc({ method: event.method.length <= 64 && SLACK_METHOD.test(event.method) ? event.method : "other" });
      }
    },
  };

  // --- adapters -------------------------------------------------------------------------------

  /** A fetch for the Slack WebClient (`clientOptions.fetch`): every HTTP request to Slack is counted. */
  slackFetch(inner: Fetch = globalThis.fetch): Fetch {
    return async (input, init) => {
      const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
      const method = this.slackMethodLabel(url);
      this.slackCalls.inc({ method });
      const end = this.slackDuration.startTimer({ method });
      let res: Response;
      try {
        res = await inner(input, init);
      } catch (err) {
        this.slackErrors.inc({ method, error: "network" });
        throw err;
      } finally {
        end();
      }
      if (res.status === 429) this.slackRateLimited.inc({ method });
      else if (res.status !== 200) this.slackErrors.inc({ method, error: "http" });
      else if (method !== "other" && (res.headers.get("content-type") ?? "").includes("json")) {
        // Read from a copy; the WebClient reads the original. Answers are small.
        res
          .clone()
          .json()
          .then(
            (body: unknown) => {
              const b = body as { ok?: unknown; error?: unknown } | null;
              if (b && b.ok === false) this.slackErrors.inc({ method, error: typeof b.error === "string" && SLACK_ERRORS.has(b.error) ? b.error : "other" });
            },
            () => {},
          );
      }
      return res;
    };
  }

  /** A crew client whose calls are counted and timed; a kickoff the crew accepts counts as a run started. */
  instrumentCrew<T extends CrewApi & { close?: () => Promise<void> }>(crewName: string, api: T): CrewApi & { close?: () => Promise<void> } {
    const crew = this.crewLabel(crewName);
    const timed = <R>(operation: (typeof CREW_OPERATIONS)[number], call: () => Promise<R>): Promise<R> => {
      const labels = { crew, operation };
      this.crewCalls.inc(labels);
      const end = this.crewDuration.startTimer(labels);
      return call().then(
        (result) => {
          end();
          return result;
        },
        (err: unknown) => {
          end();
          this.crewErrors.inc({ ...labels, error: isCrewError(err) && CREW_ERROR_KINDS.has(err.kind) ? err.kind : "other" });
          throw err;
        },
      );
    };
    return {
      listInputs: () => timed("inputs", () => api.listInputs()),
      kickoff: async (req) => {
        const started = await timed("kickoff", () => api.kickoff(req));
        this.runsStarted.inc({ crew });
        return started;
      },
      status: (kickoffId) => timed("status", () => api.status(kickoffId)),
      resume: (req) => timed("resume", () => api.resume(req)),
      ...(api.stop ? { stop: (kickoffId: string) => timed("stop", () => api.stop!(kickoffId)) } : {}),
      ...(api.close ? { close: () => api.close!() } : {}),
    };
  }

  // --- internals ------------------------------------------------------------------------------

  /** An accepted task or input callback (see reviewShown); `at` is when its request arrived. */
  private noteArrival(key: string, at: number): void {
    // The latest arrival wins: a stale one (a duplicate's) is replaced by the webhook that leads to the next post.
    this.arrivals.delete(key);
    if (this.arrivals.size >= MAX_ARRIVALS) this.arrivals.delete(this.arrivals.keys().next().value!);
    this.arrivals.set(key, at);
  }

  /** A review message became visible; measured from its webhook when that came before the Slack call began. */
  private reviewShown(executionId: string, source: "task" | "input", callStarted: number): void {
    const key = `${executionId}:${source}`;
    const arrived = this.arrivals.get(key);
    if (arrived === undefined || arrived > callStarted) return;
    this.arrivals.delete(key);
    this.reviewVisible.observe({ source }, (Date.now() - arrived) / 1000);
  }

  private figures(): Promise<SharedFigures> {
    const read = this.readShared;
    if (!read) return Promise.reject(new Error("no shared figures"));
    this.sharedRead ??= read();
    return this.sharedRead;
  }

  private pendingEffects(): Promise<PendingEffects> {
    const source = this.pendingEffectsSource;
    if (!source) return Promise.reject(new Error("no pending effects source"));
    this.effectsRead ??= source();
    return this.effectsRead;
  }

  private defineSharedGauges(): void {
    const registers = [this.shared];
    const figures = () => this.figures();
    const gauge = (name: string, help: string, pick: (f: SharedFigures) => number) =>
      new Gauge({
        name,
        help,
        registers,
        async collect() {
          this.set(pick(await figures()));
        },
      });
    if (this.readShared) {
      gauge("crewline_reviews_waiting", "Crew reviews waiting for a decision (all replicas; read from the database).", (f) => f.reviewsWaiting);
      gauge(
        "crewline_decisions_in_flight",
        "Decisions being sent to the crew (all replicas). One that stays for minutes was cut off by a replica's death; see docs/deployment.md.",
        (f) => f.decisionsInFlight,
      );
      gauge("crewline_flow_requests_waiting", "Flow feedback requests waiting for an answer (all replicas).", (f) => f.flowRequestsWaiting);
      gauge("crewline_poll_leases_held", "Status-poll leases held right now by any replica.", (f) => f.pollLeasesHeld);
      gauge("crewline_callbacks_unprocessed", "Recorded crew callbacks not processed yet; they are retried (all replicas).", (f) => f.callbacksQueued);
      gauge("crewline_callbacks_given_up", "Recorded crew callbacks whose processing failed five times and is no longer retried.", (f) => f.callbacksGivenUp);
    }
    const read = () => this.pendingEffects();
    if (this.readShared || this.pendingEffectsSource) {
      new Gauge({
        name: "crewline_slack_effects_pending",
        help: "Slack effects due in the outbox and not done yet (posts, files, message updates, reminders, progress), all replicas.",
        registers,
        async collect() {
          this.set((await read()).count);
        },
      });
      new Gauge({
        name: "crewline_slack_effects_oldest_age_seconds",
        help: "Age of the oldest pending Slack effect (0 when none).",
        registers,
        async collect() {
          this.set((await read()).oldestAgeSeconds);
        },
      });
    }
  }
}

function withSlash(url: string): string {
  return url.endsWith("/") ? url : `${url}/`;
}

function answerLabel(status: number): string {
  return ANSWERS.has(status) ? String(status) : status >= 100 && status < 600 ? `${Math.floor(status / 100)}xx` : "other";
}

function outcomeLabel(state: string): string {
  return state === "completed" || state === "failed" || state === "lost" || state === "stopped" || state === "abandoned" ? state : "other";
}
