// A crew's review round as a decision request (the core's port, core.ts): table Review, audited under
// its run with its task and round, shown by review.show, its notices replies in the run's thread.
import crypto from "node:crypto";
import type { ReviewerRules as RulesConfig } from "../../config/config.js";
import type { ReviewWithExecution } from "../../store/reviews.js";
import type { DeadlineNotice, Review } from "../ports.js";
import type { DecisionTarget } from "./core.js";

/** A review and its run (the notices go to the run's thread). */
export type CrewReview = ReviewWithExecution;

export function crewReviewTarget(escalateToOf?: (crewName: string) => RulesConfig | undefined): DecisionTarget<CrewReview> {
  return {
    table: "Review",
    audited: (r) => ({ executionId: r.executionId, taskKey: r.taskKey, round: r.round, outputHash: r.outputHash, ref: { reviewId: r.id } }),
    show: (r) => ({ kind: "review.show", subjectId: r.id }),
    edited: (r, by) => ({ kind: "review.edited", subjectId: r.id, payload: { by } }),
    // Each reply in the thread is its own message (its caller claimed the event that calls for it).
    notice: (r, notice) => ({
      kind: "run.message",
      subjectId: r.execution.id,
      part: crypto.randomUUID(),
      payload: { notice: { ...notice, taskName: r.taskName, round: r.round } },
    }),
    reminder: (r, count, facts) => ({ kind: "review.reminder", subjectId: r.id, part: count, payload: facts }),
    deadlineNotice: (r, { who, withinMs }) => deadlineNoticeEffect(r, { kind: "reminder", who, withinMs }),
    escalateTo: (r) => escalateToOf?.(r.execution.crewName),
  };
}

/** The outbox effect of a deadline notice: one of each kind per deadline, however often a retaken deadline asks again. */
export function deadlineNoticeEffect(review: Pick<Review, "id" | "decideBy">, notice: DeadlineNotice) {
  return { kind: "review.deadline", subjectId: review.id, part: `${notice.kind}:${review.decideBy?.getTime() ?? 0}`, payload: notice } as const;
}
