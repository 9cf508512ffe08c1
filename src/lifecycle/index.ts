// The execution and review lifecycle, assembled. No Slack and no HTTP in here: those arrive through
// the RunNotifier and CrewDirectory ports.
import type { Db } from "../db/database.js";
import type { Logger } from "../log.js";
import { Audit } from "./audit.js";
import { Callbacks } from "./callbacks.js";
import { type DeadlineDeps, type DeadlinePolicy, ReviewDeadlines } from "./deadlines.js";
import { type Clock, type CrewDirectory, type Execution, type RunNotifier, systemClock, type WebhookUrls } from "./ports.js";
import { ProgressCoalescer } from "./progress.js";
import { anyoneMayDecide, type ReviewerGate, Reviews } from "./reviews.js";
import { Runs } from "./runs.js";

export interface LifecycleDeps {
  db: Db;
  crews: CrewDirectory;
  notifier: RunNotifier;
  /** Webhook URLs for an execution, or undefined when the bot has no public URL. */
  webhookUrls: (execution: Execution) => WebhookUrls | undefined;
  log: Logger;
  clock?: Clock;
  gate?: ReviewerGate;
  progressIntervalMs?: number;
  /** How long a claim on a Slack post holds before another replica may retake it. */
  claimStaleMs?: number;
  /** Recorded callbacks processed at once (default 2; see Callbacks). */
  processingConcurrency?: number;
  /** Per-crew review deadlines (decideWithin / onTimeout); unset: no deadlines. */
  deadlinePolicy?: DeadlinePolicy;
  /** After a review's reminder (escalation). */
  afterReminder?: DeadlineDeps["afterReminder"];
}

export class Lifecycle {
  readonly runs: Runs;
  readonly reviews: Reviews;
  readonly progress: ProgressCoalescer;
  readonly callbacks: Callbacks;
  readonly audit: Audit;
  readonly deadlines: ReviewDeadlines;

  constructor(deps: LifecycleDeps) {
    const clock = deps.clock ?? systemClock;
    this.audit = new Audit(deps.db, deps.log);
    this.progress = new ProgressCoalescer(deps.db, deps.notifier, deps.log, clock, deps.progressIntervalMs);
    this.runs = new Runs(deps.db, deps.notifier, deps.log, clock, this.progress, this.audit, deps.claimStaleMs);
    this.deadlines = new ReviewDeadlines({
      db: deps.db,
      notifier: deps.notifier,
      audit: this.audit,
      log: deps.log,
      clock,
      policy: deps.deadlinePolicy,
      decide: (decision) => this.reviews.decide(decision),
      afterReminder: (execution, review, sent) => deps.afterReminder?.(execution, review, sent) ?? Promise.resolve(),
      claimStaleMs: deps.claimStaleMs,
    });
    this.reviews = new Reviews(deps.db, this.runs, deps.crews, deps.notifier, deps.webhookUrls, deps.log, clock, deps.gate ?? anyoneMayDecide, this.audit, this.deadlines.stamp);
    this.callbacks = new Callbacks(deps.db, this.runs, this.reviews, this.progress, deps.log, deps.processingConcurrency);
  }
}

export type { CrewDirectory, Execution, ProgressSnapshot, Review, RunNotifier, WebhookUrls } from "./ports.js";
export type { Decision, DecisionOutcome } from "./reviews.js";
