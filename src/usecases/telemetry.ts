// What the bot tells an observer as it works (the Prometheus figures in src/metrics/ listen): typed
// events, emitted by the use cases, the outbox and the HTTP adapter. An emit never waits and never
// fails the work; the emitter knows nothing of who listens.
import type { EffectKind } from "../domain/effects.js";

export type TelemetryEvent =
  /** A crew callback or flow request was answered (`kind`: the URL's kind, or "flow"). */
  | { type: "callback.answered"; kind: string; status: number }
  /** A task or input callback was accepted (202), as the answer was written; `at`: when its request arrived (ms). */
  | { type: "callback.accepted"; kind: string; executionId: string; at: number }
  /** A review message reached Slack (posted, or given its decision controls); `callStartedAt`: when the Slack call began (ms). */
  | { type: "review.shown"; executionId: string; source: "task" | "input"; callStartedAt: number }
  /** A run's end was announced in Slack (its completion notice, or the thread's stop notice). */
  | { type: "run.ended"; executionId: string; crewName: string; outcome: string }
  /** A person's decision reached the crew (decided, or the crew was not waiting any more). */
  | { type: "review.decided"; approve: boolean; waitedMs: number }
  /** The outbox gave an effect up. */
  | { type: "effect.given_up"; effect: EffectKind }
  /** An effect found no Slack budget for its next Web API call and was put back until a token is there (not an attempt). */
  | { type: "effect.budget_wait"; effect: EffectKind; method: string };

export interface Telemetry {
  emit(event: TelemetryEvent): void;
}

export const noTelemetry: Telemetry = { emit: () => {} };
