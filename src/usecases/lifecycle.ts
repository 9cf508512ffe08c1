// The execution and review lifecycle, assembled. No Slack and no HTTP in here: Slack effects are
// enqueued in the outbox (performed by its worker), the crew is reached through CrewDirectory.

import type { Logger } from "../log/log.js";
import type { Sql } from "../store/sql.js";
import { Audit } from "./audit.js";
import { Callbacks } from "./callbacks.js";
import { type ClaimHolder, type Clock, type CrewDirectory, type Execution, type Outbox, systemClock, type WebhookUrls } from "./ports.js";
import { ProgressCoalescer } from "./progress.js";
import { type DeadlineOf, deadlineStamper } from "./review-requests.js";
import { type ApprovalPolicyOf, type ReviewerGate, Reviews } from "./reviews.js";
import { Runs } from "./runs.js";
import { RunStops } from "./stops.js";
import type { Telemetry } from "./telemetry.js";

export interface LifecycleDeps {
  db: Sql;
  crews: CrewDirectory;
  /** Where Slack effects are enqueued (src/outbox/). */
  outbox: Outbox;
  /** Webhook URLs for an execution, or undefined when the bot has no public URL. */
  webhookUrls: (execution: Execution) => WebhookUrls | undefined;
  log: Logger;
  clock?: Clock;
  gate?: ReviewerGate;
  /** Each crew's approval rules (approvals:, selfApproval:); default one approval, starters may approve. */
  approvalPolicy?: ApprovalPolicyOf;
  progressIntervalMs?: number;
  /** Recorded callbacks processed at once (default DEFAULT_PROCESSING_CONCURRENCY, callbacks.ts). */
  processingConcurrency?: number;
  /** How long the recorded callbacks of an ended run are kept (WEBHOOK_EVENT_RETENTION; default 7 days). */
  webhookEventRetentionMs?: number;
  /** Per-crew review deadlines (decideWithin / onTimeout), stamped when a round becomes a review; unset: no deadlines. */
  deadlineOf?: DeadlineOf;
  /** The audit trail (one shared with escalations and flow requests); default: one of its own. */
  audit?: Audit;
  /** Where use cases report what happened (metrics listen). */
  telemetry?: Telemetry;
  /** This replica, named in the claims of decisions, deadlines and stops (a gone holder's are taken over at once). */
  holder?: ClaimHolder;
  /** The longest a POST to a crew can take, every retry included: a stop claimed more recently is not taken over (stops.ts). */
  longestCrewPostMs?: number;
}

export class Lifecycle {
  readonly runs: Runs;
  readonly reviews: Reviews;
  readonly progress: ProgressCoalescer;
  readonly callbacks: Callbacks;
  readonly audit: Audit;
  readonly stops: RunStops;

  constructor(deps: LifecycleDeps) {
    const clock = deps.clock ?? systemClock;
    this.audit = deps.audit ?? new Audit({ db: deps.db, log: deps.log, clock });
    this.progress = new ProgressCoalescer({ outbox: deps.outbox, log: deps.log, clock, intervalMs: deps.progressIntervalMs });
    this.runs = new Runs({ db: deps.db, outbox: deps.outbox, clock, progress: this.progress, audit: this.audit });
    // Each gets deps whole: an option of theirs named as a field of LifecycleDeps takes that field
    // (check before adding one to either); the rest are set here.
    this.reviews = new Reviews({ ...deps, runs: this.runs, clock, audit: this.audit, onPending: deadlineStamper(deps.deadlineOf, clock) });
    this.callbacks = new Callbacks({ ...deps, runs: this.runs, reviews: this.reviews, progress: this.progress, clock, retentionMs: deps.webhookEventRetentionMs });
    this.stops = new RunStops({
      ...deps,
      clock,
      audit: this.audit,
      longestCallMs: deps.longestCrewPostMs,
      onEnded: (id) => {
        this.callbacks.forget(id);
        this.progress.forget(id);
      },
    });
  }
}

export type { DecisionOutcome } from "./reviews.js";
