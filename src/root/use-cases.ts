// The composition root's use cases: the replica heartbeat, the durable outbox, the audit trail, the
// reviewer rules of crews and flows, a run's lifecycle, review requests, status polling and flow
// requests, built in that order.
import crypto from "node:crypto";
import { CREW_GET_LONGEST_MS, CREW_POST_LONGEST_MS } from "../adapters/crew/client.js";
import type { CrewRegistry } from "../adapters/crew/registry.js";
import { flowCallbackClient } from "../adapters/flows/callback-client.js";
import type { AppConfig, FlowConfig } from "../config/config.js";
import { approvalPolicy } from "../domain/approvals.js";
import type { Logger } from "../log/log.js";
import { DurableOutbox } from "../outbox/index.js";
import type { Database } from "../store/db/database.js";
import { Audit } from "../usecases/audit.js";
import { FlowRequests } from "../usecases/flows.js";
import { Lifecycle } from "../usecases/lifecycle.js";
import type { Clock, Execution, TeamRef, WebhookUrls } from "../usecases/ports.js";
import { type HeartbeatOptions, ReplicaHeartbeat } from "../usecases/replicas.js";
import { type DeadlineOf, ReviewRequests } from "../usecases/review-requests.js";
import { ReviewerRules } from "../usecases/reviewer-rules.js";
import type { Telemetry } from "../usecases/telemetry.js";
import { RunWatcher, type WatcherOptions } from "../usecases/watcher.js";

export interface UseCasesOptions {
  config: AppConfig;
  database: Database;
  log: Logger;
  clock: Clock;
  telemetry: Telemetry;
  crews: CrewRegistry;
  webhookUrls: (execution: Execution) => WebhookUrls | undefined;
  /** A user group's members, looked up in its workspace (root/slack-clients.ts). */
  usergroupMembers: (usergroup: string, team: TeamRef | undefined) => Promise<string[]>;
  progressIntervalMs?: number;
  /** Status polling intervals (tests shorten them); overrides config.polling. */
  watcher?: Partial<WatcherOptions>;
  /** Heartbeat tuning (tests shorten it); overrides config.polling.replicaDeadAfterMs. */
  heartbeat?: Partial<HeartbeatOptions>;
}

export interface UseCases {
  /** This process among the replicas: its heartbeat, and its id in every claim it holds. */
  replica: ReplicaHeartbeat;
  outbox: DurableOutbox;
  reviewers: ReviewerRules;
  /** Who decides a flow's requests (its groups prefetched at start). */
  flowRules: ReviewerRules;
  lifecycle: Lifecycle;
  reviewRequests: ReviewRequests;
  watcher: RunWatcher;
  flows: FlowRequests;
  flowConfigs: FlowConfig[];
  /** Wait before the first review reminder, and reminders at most (0: none). */
  reminders: { afterMinutes: number; max: number };
}

export function createUseCases(o: UseCasesOptions): UseCases {
  const { config, database, log, clock, crews } = o;
  // One id per process in every claim it holds (outbox, status polling, decisions, deadlines, stops), announced by its heartbeat.
  const replica = new ReplicaHeartbeat({
    db: database.sql,
    replicaId: o.watcher?.replicaId ?? crypto.randomUUID(),
    log,
    clock,
    options: { deadAfterMs: config.polling?.replicaDeadAfterMs, ...o.heartbeat },
  });
  const deadAfterMs = replica.options.deadAfterMs;
  const outbox = new DurableOutbox(database.sql, clock);
  const audit = new Audit({ db: database.sql, log, clock });
  const reviewers = new ReviewerRules({ crews, lookup: o.usergroupMembers, log, clock });
  const reminders = config.reviewReminders ?? { afterMinutes: 60, max: 3 };
  const deadlineOf: DeadlineOf = (name) => {
    const crew = crews.config(name);
    return crew?.decideWithinMs ? { withinMs: crew.decideWithinMs, onTimeout: crew.onTimeout ?? "remind" } : undefined;
  };
  const lifecycle = new Lifecycle({
    db: database.sql,
    crews,
    outbox,
    webhookUrls: o.webhookUrls,
    log,
    clock,
    audit,
    gate: reviewers.gate,
    approvalPolicy: (crewName) => approvalPolicy(crews.config(crewName)),
    progressIntervalMs: o.progressIntervalMs,
    // Measured (npm run bench -- task-intake): same processing rate, p99 intake at 200/s 180-260 -> 30-80 ms.
    processingConcurrency: database.kind === "embedded" ? 1 : undefined,
    webhookEventRetentionMs: config.webhookEventRetentionMs,
    deadlineOf,
    telemetry: o.telemetry,
    holder: replica,
    // A stop under way is not taken over before its POST /stop could still answer, as decisions (below).
    longestCrewPostMs: CREW_POST_LONGEST_MS,
  });
  const reviewRequests = new ReviewRequests({
    db: database.sql,
    outbox,
    audit,
    log,
    clock,
    reminders: { afterMs: reminders.afterMinutes * 60_000, max: reminders.max },
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
    clock,
    options: { ...config.polling, abandonedDecisionMs, leaseMs: pollLeaseMs, deadAfterMs, ...o.watcher, replicaId: replica.replicaId },
  });
  const flowConfigs = config.flows ?? [];
  const flowRules = new ReviewerRules({
    crews: { config: (name) => flowConfigs.find((f) => f.name.toLowerCase() === name.toLowerCase()), all: () => flowConfigs },
    // A flow's groups are looked up in the flow's workspace (team: and enterprise: in CREWS_FILE, FLOW_TEAM, FLOW_ENTERPRISE).
    lookup: async (usergroup, team) => {
      const flow = flowConfigs.find((f) => f.team && (f.reviewers?.usergroups.includes(usergroup) || f.escalateTo?.usergroups.includes(usergroup)));
      return o.usergroupMembers(usergroup, team ?? (flow?.team ? { teamId: flow.team, enterpriseId: flow.enterprise } : undefined));
    },
    log,
    clock,
  });
  const flows = new FlowRequests({
    db: database.sql,
    flows: flowConfigs,
    outbox,
    rules: flowRules,
    audit,
    log,
    clock,
    abandonedAfterMs: config.polling?.claimStaleMs,
    reminders: { afterMs: reminders.afterMinutes * 60_000, max: reminders.max },
    callback: flowCallbackClient(),
    holder: replica,
  });
  return { replica, outbox, reviewers, flowRules, lifecycle, reviewRequests, watcher, flows, flowConfigs, reminders };
}
