// The composition root's outbox worker: every Slack effect outside a request's own answer, performed
// through the Slack side of the outbox, and the same Slack budget for the calls a request's own answer
// makes.

import type { CrewRegistry } from "../adapters/crew/registry.js";
import type { SlackClients } from "../adapters/slack/clients.js";
import type { TokenWorkspace } from "../adapters/slack/deps.js";
import { SlackFlowEffects } from "../adapters/slack/flows/slack-effects.js";
import { SlackRunNotifier } from "../adapters/slack/notifier.js";
import type { AppConfig } from "../config/config.js";
import { approvalPolicy } from "../domain/approvals.js";
import type { Logger } from "../log/log.js";
import { SlackBudget, type SlackCall } from "../outbox/budget.js";
import type { DurableOutbox } from "../outbox/index.js";
import { slackEffectPerformer } from "../outbox/perform.js";
import { moveOnRefusal } from "../outbox/refused.js";
import { type OutboxOptions, OutboxWorker } from "../outbox/worker.js";
import type { Sql } from "../store/sql.js";
import type { FlowRequests } from "../usecases/flows.js";
import type { Clock } from "../usecases/ports.js";
import type { ReplicaHeartbeat } from "../usecases/replicas.js";
import { ApprovalRows } from "../usecases/review-context.js";
import type { Telemetry } from "../usecases/telemetry.js";

export interface OutboxWorkerOptions {
  config: AppConfig;
  db: Sql;
  log: Logger;
  clock: Clock;
  telemetry: Telemetry;
  crews: CrewRegistry;
  flows: FlowRequests;
  /** The outbox the use cases enqueue into: the worker is attached to it (it nudges the worker). */
  outbox: DurableOutbox;
  /** Whose id the worker's claims carry, and when another replica counts as gone. */
  replica: ReplicaHeartbeat;
  /** The outbox's Web API clients (root/slack-clients.ts). */
  effectClients: SlackClients;
  /** The lease, lengthened to hold the clients' calls (root/slack-clients.ts). */
  leaseMs: number;
  /** With one bot token, its workspace (root/slack-clients.ts): flows without `team:` spend its budget. */
  installation?: TokenWorkspace;
  /** Outbox worker tuning (tests shorten the backoff). */
  tuning?: Partial<Omit<OutboxOptions, "replicaId">>;
}

export interface CrewlineOutbox {
  outboxWorker: OutboxWorker;
  /** Takes a token of the outbox's Slack budget for a call in a request's own answer; unset when the budget is off. */
  spendSlack?: (call: SlackCall, maxWaitMs?: number) => Promise<void>;
}

export function createOutboxWorker(o: OutboxWorkerOptions): CrewlineOutbox {
  const { config, db, log, clock, telemetry, crews, flows } = o;
  const approvalRows = new ApprovalRows(db);
  const worker = new OutboxWorker({
    db,
    perform: slackEffectPerformer({
      sql: db,
      clock,
      notifier: new SlackRunNotifier(o.effectClients, log),
      flows: new SlackFlowEffects(o.effectClients, log),
      // What messages show beside their rows: approvals so far, the edit, the previous round.
      reviewContext: (execution, review, approvals) => approvalRows.context(review, approvalPolicy(crews.config(execution.crewName)), approvals),
      flowContext: (request) => flows.context(request),
      flowRecipients: (request) => flows.directRecipients(request),
      log,
      telemetry,
      ...(o.installation ? { defaultTeam: () => o.installation?.known()?.teamId } : {}),
    }),
    log,
    clock,
    options: {
      replicaId: o.replica.replicaId,
      deadAfterMs: o.replica.options.deadAfterMs,
      ...(config.polling?.outboxConcurrency ? { concurrency: config.polling.outboxConcurrency } : {}),
      ...o.tuning,
      leaseMs: o.leaseMs,
    },
    // A message Slack refuses in its channel for good moves its run (or flow request) to a direct message.
    events: {
      gaveUp: (effect) => telemetry.emit({ type: "effect.given_up", effect }),
      deferred: (effect, method) => telemetry.emit({ type: "effect.budget_wait", effect, method }),
      onGiveUp: moveOnRefusal,
    },
  });
  o.outbox.attach(worker);
  // The same buckets for the calls made in a request's own answer (the announcement at kickoff).
  const slackBudget = worker.options.budget === false ? undefined : new SlackBudget(db, worker.options.budget);
  return {
    outboxWorker: worker,
    ...(slackBudget ? { spendSlack: (call: SlackCall, maxWaitMs?: number) => slackBudget.spendNow(call, 0, clock, maxWaitMs) } : {}),
  };
}
