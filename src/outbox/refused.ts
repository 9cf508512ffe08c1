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
import { forgetMessageInOldChannel } from "../store/moves.js";
import type { Sql } from "../store/sql.js";

/**
 * What an effect given up for `reason` asks for (read on the give-up's transaction): the move of its
 * run or request, once. An effect that raced with the move (it read the old place just before the
 * move committed) is posted again where the run moved, under its one-time "moved" key, which a
 * refusal met in the direct message itself finds taken: no loop.
 */
export async function movesFor(tx: Sql, job: Pick<EffectJob, "kind" | "subjectId">, reason: string): Promise<NewEffect[]> {
  if (!isChannelRefusal(reason) || job.kind === "run.move" || job.kind === "flow.move") return [];
  if (job.kind.startsWith("flow.")) {
    const request = await findFlowRequest(tx, job.subjectId);
    return request && !request.movedFrom ? [{ kind: "flow.move", subjectId: request.id, payload: { reason } }] : [];
  }
  const review = job.kind.startsWith("review.") ? await findReview(tx, job.subjectId) : undefined;
  const execution = await findExecution(tx, review ? review.executionId : job.subjectId);
  if (!execution) return [];
  if (!execution.movedTo) return [{ kind: "run.move", subjectId: execution.id, payload: { reason } }];
  if (job.kind === "review.post" && review && !review.messageTs) return [{ kind: "review.post", subjectId: review.id, part: MOVED_PART }];
  // A review that came to wait for a decision on its message in the old channel after the move read it.
  if (review && (await forgetMessageInOldChannel(tx, review.id))) return [{ kind: "review.post", subjectId: review.id, part: MOVED_PART }];
  if (job.kind === "run.completion" && !execution.completionTs) return [{ kind: "run.completion", subjectId: execution.id, part: MOVED_PART }];
  return [];
}

/** The outbox worker's give-up hook (OutboxEvents.onGiveUp). */
export async function moveOnRefusal(job: EffectJob, reason: string, tx: Sql, now: Date): Promise<void> {
  for (const effect of await movesFor(tx, job, reason)) await enqueueEffect(tx, effect, now);
}

/** The key of a one-time effect posted again where its subject moved. */
export const MOVED_PART = "moved";

export const movedKey = (kind: NewEffect["kind"], subjectId: string) => effectKey({ kind, subjectId, part: MOVED_PART });
