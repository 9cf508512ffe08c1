// The outbox as the rest of the bot sees it: ask for a Slack effect (inside the transaction that
// changes the state, or on its own), and let the worker of this process know there is work.
import crypto from "node:crypto";
import type { SqlRunner } from "../db/sql.js";
import type { Clock, RunMessages } from "../lifecycle/ports.js";
import { enqueueEffect } from "../store/effects.js";
import type { Sql } from "../store/sql.js";
import type { NewEffect } from "./effects.js";
import type { OutboxWorker } from "./worker.js";

export type { EffectKind, NewEffect } from "./effects.js";

export class Outbox {
  private worker?: OutboxWorker;

  constructor(
    readonly sql: SqlRunner,
    private readonly clock: Clock,
  ) {}

  attach(worker: OutboxWorker): void {
    this.worker = worker;
  }

  /** Enqueues on the caller's transaction (a runner's, or a store handle on one); call nudge() once it has committed. */
  add(tx: SqlRunner | Sql, effect: NewEffect): Promise<boolean> {
    return enqueueEffect(tx, effect, this.clock.now());
  }

  /** Enqueues on its own and wakes the worker. */
  async request(effect: NewEffect): Promise<void> {
    await enqueueEffect(this.sql, effect, this.clock.now());
    this.nudge();
  }

  /** Wakes this process's worker (other replicas find the work at their next tick). */
  nudge(): void {
    this.worker?.nudge();
  }
}

/** The Slack effects of the review rules (deadlines, escalation, reassignment), as outbox effects. */
export function outboxRunMessages(outbox: Outbox): RunMessages {
  return {
    // Each call is one message: its callers claim the event (escalation, reassignment) before asking.
    postThreadMessage: (execution, text) => outbox.request({ kind: "run.message", subjectId: execution.id, part: crypto.randomUUID(), payload: { text } }),
    // One notice of each kind per deadline, however often a retaken deadline asks again.
    postDeadlineNotice: (_execution, review, notice) =>
      outbox.request({ kind: "review.deadline", subjectId: review.id, part: `${notice.kind}:${review.decideBy?.getTime() ?? 0}`, payload: notice }),
    updateReview: (_execution, review) => outbox.request({ kind: "review.show", subjectId: review.id }),
  };
}
