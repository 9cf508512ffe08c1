// When Slack refuses a channel for good (archived, the bot removed, posting restricted…), the effect
// that met the refusal is given up, and in the same transaction its run (or flow request) is asked to
// move to a direct message: run.move / flow.move, performed like any other effect (perform.ts), keyed
// once per run or request. A refusal met after the move (in the direct message itself, or by an
// update of a message left in the old channel) finds the move done already: logged and counted as
// given up, nothing more, so there is no loop.
import { type EffectJob, effectKey, type NewEffect } from "../domain/effects.js";
import { isChannelRefusal } from "../domain/refusals.js";
import { findExecution, findFlowRequest, findReview } from "../store/effect-results.js";
import { enqueueEffect } from "../store/effects.js";
import type { Sql } from "../store/sql.js";

/** The move an effect given up for `reason` asks for, if any (read on the give-up's transaction). */
export async function moveFor(tx: Sql, job: Pick<EffectJob, "kind" | "subjectId">, reason: string): Promise<NewEffect | undefined> {
  if (!isChannelRefusal(reason) || job.kind === "run.move" || job.kind === "flow.move") return undefined;
  if (job.kind.startsWith("flow.")) {
    const request = await findFlowRequest(tx, job.subjectId);
    return request && !request.movedFrom ? { kind: "flow.move", subjectId: request.id, payload: { reason } } : undefined;
  }
  const executionId = job.kind.startsWith("review.") ? (await findReview(tx, job.subjectId))?.executionId : job.subjectId;
  const execution = executionId ? await findExecution(tx, executionId) : undefined;
  return execution && !execution.movedTo ? { kind: "run.move", subjectId: execution.id, payload: { reason } } : undefined;
}

/** The outbox worker's give-up hook (OutboxEvents.onGiveUp). */
export async function moveOnRefusal(job: EffectJob, reason: string, tx: Sql, now: Date): Promise<void> {
  const move = await moveFor(tx, job, reason);
  if (move) await enqueueEffect(tx, move, now);
}

/** The key of a one-time effect posted again where its subject moved. */
export const MOVED_PART = "moved";

export const movedKey = (kind: NewEffect["kind"], subjectId: string) => effectKey({ kind, subjectId, part: MOVED_PART });
