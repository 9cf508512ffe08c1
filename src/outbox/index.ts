// The outbox as the rest of the bot sees it: ask for a Slack effect (inside the transaction that
// changes the state, or on its own), and let the worker of this process know there is work.

import type { NewEffect } from "../domain/effects.js";
import { enqueueEffect, hurryEffect } from "../store/effects.js";
import type { Sql } from "../store/sql.js";
import type { Clock, Outbox } from "../usecases/ports.js";
import type { OutboxWorker } from "./worker.js";

export type { EffectKind, NewEffect } from "../domain/effects.js";

/** The durable outbox (table SlackEffect) behind the use cases' Outbox port. */
export class DurableOutbox implements Outbox {
  private worker?: OutboxWorker;

  constructor(
    readonly sql: Sql,
    private readonly clock: Clock,
  ) {}

  attach(worker: OutboxWorker): void {
    this.worker = worker;
  }

  add(tx: Sql, effect: NewEffect): Promise<boolean> {
    return enqueueEffect(tx, effect, this.clock.now());
  }

  async hurry(tx: Sql, effect: Pick<NewEffect, "kind" | "subjectId" | "part">): Promise<void> {
    await hurryEffect(tx, effect, this.clock.now());
  }

  async request(effect: NewEffect): Promise<void> {
    await enqueueEffect(this.sql, effect, this.clock.now());
    this.nudge();
  }

  nudge(): void {
    this.worker?.nudge();
  }
}
