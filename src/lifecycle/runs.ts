// Execution records: creation before kickoff, the kickoff outcome, and the one-time finish.
import crypto from "node:crypto";
import type { Db } from "../db/database.js";
import type { Logger } from "../log.js";
import { type Audit, sha256 } from "./audit.js";
import type { Clock, Execution, RunNotifier } from "./ports.js";
import type { ProgressCoalescer } from "./progress.js";
import { type ExecutionPatch, ExecutionRows, ReviewRows } from "./rows.js";
import { type ExecutionEvent, executionTransition, FINISHED_STATES } from "./states.js";

export interface NewExecution {
  crewName: string;
  teamId: string;
  /** Enterprise Grid org of the workspace, when there is one (finds an org-wide installation's token). */
  enterpriseId?: string | null;
  channelId: string;
  userId: string;
  inputs: Record<string, string>;
  webhooks: boolean;
  /** Unique per run; a kickoff form's nonce, so one form starts one run. Default: random. */
  requestId?: string;
}

export interface FinishOutcome {
  event: Extract<ExecutionEvent, "succeeded" | "failed" | "lost">;
  output?: string;
  error?: string;
}

// A claim older than this is treated as abandoned (its replica died mid-post) and may be retaken.
// Keep it well above the time one Slack post can take, retries included.
export const DEFAULT_CLAIM_STALE_MS = 60_000;

export class Runs {
  private readonly rows: ExecutionRows;
  private readonly reviewRows: ReviewRows;

  constructor(
    private readonly db: Db,
    private readonly notifier: RunNotifier,
    private readonly log: Logger,
    private readonly clock: Clock,
    private readonly progress: ProgressCoalescer,
    private readonly audit?: Audit,
    readonly claimStaleMs = DEFAULT_CLAIM_STALE_MS,
  ) {
    this.rows = new ExecutionRows(db);
    this.reviewRows = new ReviewRows(db);
  }

  /** Stored before kickoff so that webhook URLs (and their secret) exist before the crew can call them. */
  create(input: NewExecution): Promise<Execution> {
    return this.rows.insert({
      ...input,
      requestId: input.requestId ?? crypto.randomUUID(),
      webhookSecret: crypto.randomBytes(32).toString("base64url"),
      humanInputToken: crypto.randomBytes(32).toString("base64url"),
      state: "starting",
    });
  }

  get(id: string): Promise<Execution | null> {
    return this.rows.find(id);
  }

  findByRequestId(requestId: string): Promise<Execution | null> {
    return this.db.execution.findUnique({ where: { requestId } });
  }

  findByKickoffId(kickoffId: string): Promise<Execution | null> {
    return this.db.execution.findUnique({ where: { kickoffId } });
  }

  /** Stores the kickoff id whatever happened meanwhile (a fast crew may already have called back). */
  async kickedOff(id: string, kickoffId: string): Promise<Execution> {
    const data = { kickoffId, startedAt: this.clock.now() };
    // One write in the usual case, so nobody sees a kickoff id on a run still marked "starting".
    const { from, to } = executionTransition("kicked_off");
    const started = await this.rows.updateReturning(id, { ...data, state: to }, { states: from });
    return started ?? (await this.rows.updateReturning(id, data))!;
  }

  async kickoffFailed(id: string, error: string): Promise<void> {
    await this.transition(id, "kickoff_failed", { error, finishedAt: this.clock.now() });
  }

  async setThread(id: string, threadTs: string): Promise<void> {
    await this.rows.update(id, { threadTs });
  }

  /** Applies a state event if the current state allows it; returns whether it applied. */
  async transition(id: string, event: ExecutionEvent, data: ExecutionPatch = {}): Promise<boolean> {
    const { from, to } = executionTransition(event);
    return (await this.rows.update(id, { ...data, state: to }, { states: from })) === 1;
  }

  /**
   * Ends a run once, whichever of webhook, poll or replica gets here first; then closes reviews left
   * pending and posts the completion notice (once, under a claim).
   */
  async finish(id: string, outcome: FinishOutcome): Promise<boolean> {
    // Steps still coalescing show their final count before the run is announced as over.
    await this.progress.finish(id);
    const won = await this.transition(id, outcome.event, {
      output: outcome.output ?? null,
      error: outcome.error ?? null,
      finishedAt: this.clock.now(),
    });
    if (won) {
      await this.audit?.record({
        executionId: id,
        kind: "completion",
        outputHash: outcome.output ? sha256(outcome.output) : null,
        detail: { event: outcome.event, ...(outcome.error ? { error: outcome.error } : {}) },
      });
      await this.announceFinish(id);
    }
    return won;
  }

  /** Posts the completion notice unless it was posted (or is being posted) already. */
  async announceFinish(id: string): Promise<void> {
    const now = this.clock.now();
    const execution = await this.rows.claimNotice(id, FINISHED_STATES, now, new Date(now.getTime() - this.claimStaleMs));
    if (!execution) return;
    await this.closePendingReviews(execution);
    const { ts } = await this.notifier.postCompletion(execution);
    await this.rows.update(id, { completionTs: ts });
  }

  private async closePendingReviews(execution: Execution): Promise<void> {
    const pending = await this.reviewRows.pendingOf(execution.id);
    for (const review of pending) {
      const { count } = await this.db.review.updateMany({ where: { id: review.id, state: "pending" }, data: { state: "closed" } });
      if (count === 1 && review.messageTs) {
        await this.notifier
          .updateReview(execution, { ...review, state: "closed" }, "The run finished without needing this decision.")
          .then(() => this.reviewRows.markShown(review.id, "closed"))
          .catch((err) => this.log.warn("could not close review message", { reviewId: review.id, err }));
      }
    }
  }

  recentInChannel(channelId: string, take = 10): Promise<Execution[]> {
    return this.db.execution.findMany({ where: { channelId }, orderBy: { createdAt: "desc" }, take });
  }
}
