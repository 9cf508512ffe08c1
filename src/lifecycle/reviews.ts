// Review rounds: one per task output, decided once, each decision resumed exactly once.
import crypto from "node:crypto";
import type { Db } from "../db/database.js";
import type { Logger } from "../log.js";
import { isCrewError } from "../crew/errors.js";
import type { ResumeResult, TaskEvent } from "../crew/types.js";
import { Prisma } from "../generated/prisma/client.js";
import { nextRound, reviewTransition, type ReviewEvent } from "./states.js";
import { CLAIM_STALE_MS, type Runs } from "./runs.js";
import type { Clock, CrewDirectory, Execution, Review, RunNotifier, WebhookUrls } from "./ports.js";

export type DecisionOutcome =
  | { kind: "unknown_review" }
  | { kind: "feedback_required" }
  | { kind: "not_allowed"; allowed: string }
  | { kind: "already_decided"; review: Review }
  | { kind: "decided"; review: Review; resume: ResumeResult }
  | { kind: "not_waiting"; review: Review; message: string }
  | { kind: "resume_failed"; review: Review; message: string };

export interface Decision {
  reviewId: string;
  userId: string;
  approve: boolean;
  feedback: string;
}

/** Decides whether a user may decide a review; issue-level rules plug in here. */
export type ReviewerGate = (execution: Execution, userId: string) => Promise<{ allowed: true } | { allowed: false; allowed_desc: string }>;

export const anyoneMayDecide: ReviewerGate = async () => ({ allowed: true });

export function hashOutput(output: string): string {
  return crypto.createHash("sha256").update(output).digest("hex");
}

export class Reviews {
  constructor(
    private readonly db: Db,
    private readonly runs: Runs,
    private readonly crews: CrewDirectory,
    private readonly notifier: RunNotifier,
    private readonly webhookUrls: (execution: Execution) => WebhookUrls | undefined,
    private readonly log: Logger,
    private readonly clock: Clock,
    private readonly gate: ReviewerGate = anyoneMayDecide,
  ) {}

  /** Stores the review round for a task output (idempotent), then posts it. */
  async open(execution: Execution, task: Pick<TaskEvent, "taskKey" | "name" | "agent" | "output">): Promise<Review | undefined> {
    const outputHash = hashOutput(task.output);
    const latest = await this.db.review.findFirst({
      where: { executionId: execution.id, taskKey: task.taskKey },
      orderBy: { round: "desc" },
    });
    const round = nextRound(latest ?? undefined, outputHash);
    if (round === undefined) return undefined;
    let review: Review;
    try {
      review = await this.db.review.create({
        data: {
          executionId: execution.id,
          taskKey: task.taskKey,
          taskName: task.name ?? task.taskKey,
          agent: task.agent ?? null,
          round,
          output: task.output,
          outputHash,
        },
      });
    } catch (err) {
      // Another delivery (or replica) stored this round first.
      if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === "P2002") return undefined;
      throw err;
    }
    await this.runs.transition(execution.id, "review_opened");
    await this.publish(review.id);
    return review;
  }

  /** Posts a stored review's message once, under a claim that a dead replica's successor can retake. */
  async publish(reviewId: string): Promise<void> {
    const now = this.clock.now();
    const { count } = await this.db.review.updateMany({
      where: {
        id: reviewId,
        messageTs: null,
        OR: [{ postClaimedAt: null }, { postClaimedAt: { lt: new Date(now.getTime() - CLAIM_STALE_MS) } }],
      },
      data: { postClaimedAt: now },
    });
    if (count === 0) return;
    const review = await this.db.review.findUniqueOrThrow({ where: { id: reviewId }, include: { execution: true } });
    const { ts, fileAttached } = await this.notifier.postReview(review.execution, review);
    await this.db.review.update({ where: { id: reviewId }, data: { messageTs: ts, fileAttached } });
  }

  get(reviewId: string) {
    return this.db.review.findUnique({ where: { id: reviewId }, include: { execution: true } });
  }

  /** The first decision wins atomically; the crew hears it exactly once. */
  async decide(decision: Decision): Promise<DecisionOutcome> {
    const found = isUuid(decision.reviewId) ? await this.get(decision.reviewId) : null;
    if (!found) return { kind: "unknown_review" };
    const { execution, ...review } = found;
    const feedback = decision.feedback.trim();
    if (!decision.approve && !feedback) return { kind: "feedback_required" };
    if (review.state !== "pending") return { kind: "already_decided", review };
    const gate = await this.gate(execution, decision.userId);
    if (!gate.allowed) return { kind: "not_allowed", allowed: gate.allowed_desc };

    const claimed = await this.move(review.id, "claimed", {
      decidedBy: decision.userId,
      decision: decision.approve ? "approve" : "reject",
      feedback: feedback || null,
      decidedAt: this.clock.now(),
    });
    if (!claimed) return { kind: "already_decided", review: (await this.db.review.findUniqueOrThrow({ where: { id: review.id } })) };

    const crew = this.crews.get(execution.crewName);
    try {
      if (!crew) throw new Error(`crew "${execution.crewName}" is no longer configured`);
      const resume = await crew.resume({
        executionId: execution.kickoffId!,
        taskId: review.taskKey,
        humanFeedback: feedback || (decision.approve ? "Approved" : ""),
        isApprove: decision.approve,
        ...this.webhookUrls(execution),
      });
      const decided = await this.settle(review.id, decision.approve ? "resume_ok_approve" : "resume_ok_reject", {
        resumeStatus: resume.status ?? null,
        resumeMessage: resume.message ?? null,
      });
      await this.runs.transition(execution.id, "review_decided");
      await this.showDecision(execution, decided, resume.message);
      return { kind: "decided", review: decided, resume };
    } catch (err) {
      return this.resumeFailed(execution, review, err);
    }
  }

  private async resumeFailed(execution: Execution, review: Review, err: unknown): Promise<DecisionOutcome> {
    const message = isCrewError(err) ? err.userMessage() : "Crewline could not send the decision to the crew.";
    if (isCrewError(err) && err.kind === "bad_request") {
      // 400: the crew is not waiting for this decision (it moved on, or another client decided).
      const closed = await this.settle(review.id, "not_waiting", { resumeMessage: err.serviceMessage ?? null });
      await this.showDecision(execution, closed, `The crew was not waiting for this decision: ${err.serviceMessage ?? "no reason given"}`);
      return { kind: "not_waiting", review: closed, message };
    }
    this.log.warn("resume failed; review is open again", { reviewId: review.id, err });
    const reopened = await this.settle(review.id, "resume_failed", { decidedBy: null, decision: null, feedback: null, decidedAt: null });
    return { kind: "resume_failed", review: reopened, message };
  }

  private async showDecision(execution: Execution, review: Review, note?: string): Promise<void> {
    if (!review.messageTs) return;
    await this.notifier.updateReview(execution, review, note).catch((err) => this.log.warn("could not update review message", { reviewId: review.id, err }));
  }

  private async move(id: string, event: ReviewEvent, data: Partial<Review>): Promise<boolean> {
    const { from, to } = reviewTransition(event);
    const { count } = await this.db.review.updateMany({ where: { id, state: { in: [...from] } }, data: { ...data, state: to } as never });
    return count === 1;
  }

  private async settle(id: string, event: ReviewEvent, data: Partial<Review>): Promise<Review> {
    await this.move(id, event, data);
    return this.db.review.findUniqueOrThrow({ where: { id } });
  }
}

function isUuid(text: string): boolean {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(text);
}
