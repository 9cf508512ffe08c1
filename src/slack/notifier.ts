// The lifecycle's RunNotifier, in Slack: every message the run's thread and channel receive.
import type { WebClient } from "@slack/web-api";
import type { TimeoutAction } from "../config.js";
import type { DeadlineNotice, Execution, ProgressSnapshot, Review, RunNotifier } from "../lifecycle/ports.js";
import type { Logger } from "../log.js";
import {
  announcementMessage,
  completionMessage,
  deadlineNotDeliveredText,
  deadlineReminderText,
  errorNotice,
  outputNeedsFile,
  pendingReviewNotes,
  progressMessage,
  type RunState,
  reviewMessage,
  type SlackMessage,
} from "./blocks/index.js";

const RUN_STATE: Record<string, RunState> = {
  starting: "starting",
  running: "running",
  waiting: "waiting",
  completed: "completed",
  failed: "failed",
  kickoff_failed: "failed",
  lost: "lost",
};

export function announcementFor(execution: Execution): SlackMessage {
  return announcementMessage({
    crewName: execution.crewName,
    userId: execution.userId,
    inputs: execution.inputs as Record<string, string>,
    kickoffId: execution.kickoffId ?? undefined,
    state: RUN_STATE[execution.state] ?? "running",
    startedAt: execution.startedAt ?? execution.createdAt,
    finishedAt: execution.finishedAt ?? undefined,
    summary: execution.state === "failed" || execution.state === "lost" ? (execution.error ?? undefined) : undefined,
  });
}

function reviewFor(review: Review, note?: string, now = new Date()): SlackMessage {
  const state = review.state === "deciding" ? "pending" : (review.state as "posted" | "pending" | "approved" | "rejected" | "closed");
  // A deadline already acted on (a reminder posted) is no longer announced.
  const deadline = review.decideBy && review.onTimeout && !review.deadlineHandledAt ? { at: review.decideBy, action: review.onTimeout as TimeoutAction } : undefined;
  return reviewMessage({
    pendingNotes: pendingReviewNotes({
      deadline,
      escalatedTo: review.escalatedAt && review.escalatedTo ? review.escalatedTo.split(",").filter(Boolean) : undefined,
      reassignedTo: review.reassignedTo ?? undefined,
      now,
    }),
    reassignable: true,
    byDeadline: review.decidedByDeadline,
    reviewId: review.id,
    taskName: review.taskName,
    agent: review.agent ?? undefined,
    round: review.round,
    output: review.output,
    state,
    decidedBy: review.decidedBy ?? undefined,
    feedback: review.feedback ?? undefined,
    note,
    outputTruncated: outputNeedsFile(review.output),
  });
}

function safeFilename(name: string): string {
  return (
    name
      .replace(/[^A-Za-z0-9._-]+/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 60) || "output"
  );
}

export class SlackRunNotifier implements RunNotifier {
  constructor(
    private readonly client: WebClient,
    private readonly log: Logger,
  ) {}

  async postReview(execution: Execution, review: Review): Promise<{ ts: string; fileAttached: boolean }> {
    const message = reviewFor(review);
    const posted = await this.client.chat.postMessage({ channel: execution.channelId, thread_ts: execution.threadTs ?? undefined, ...message });
    const fileAttached = outputNeedsFile(review.output);
    if (fileAttached) {
      await this.attach(execution, review.output, `${safeFilename(review.taskName)}-round-${review.round}.md`, `${review.taskName} (round ${review.round}): full output`);
    }
    return { ts: posted.ts!, fileAttached };
  }

  async updateReview(execution: Execution, review: Review, note?: string): Promise<void> {
    if (!review.messageTs) return;
    await this.client.chat.update({ channel: execution.channelId, ts: review.messageTs, ...reviewFor(review, note) });
  }

  async postCompletion(execution: Execution): Promise<{ ts: string }> {
    const permalink = execution.threadTs
      ? await this.client.chat
          .getPermalink({ channel: execution.channelId, message_ts: execution.threadTs })
          .then((r) => r.permalink)
          .catch(() => undefined)
      : undefined;
    const output = execution.output ?? undefined;
    const outcome = execution.state === "completed" ? "succeeded" : execution.state === "lost" ? "lost" : "failed";
    const started = execution.startedAt ?? execution.createdAt;
    const message = completionMessage({
      crewName: execution.crewName,
      userId: execution.userId,
      outcome,
      durationMs: (execution.finishedAt ?? new Date()).getTime() - started.getTime(),
      output,
      error: execution.error ?? undefined,
      threadPermalink: permalink,
      outputTruncated: output ? outputNeedsFile(output) : false,
    });
    const posted = await this.client.chat.postMessage({ channel: execution.channelId, ...message });
    if (output && outputNeedsFile(output)) {
      await this.attach(execution, output, `${safeFilename(execution.crewName)}-final-output.md`, `${execution.crewName}: final output`);
    }
    if (execution.threadTs) {
      await this.client.chat
        .update({ channel: execution.channelId, ts: execution.threadTs, ...announcementFor(execution) })
        .catch((err) => this.log.warn("could not update the run's announcement", { executionId: execution.id, err }));
    }
    return { ts: posted.ts! };
  }

  async showProgress(execution: Execution, progress: ProgressSnapshot, ts: string | null): Promise<{ ts: string }> {
    const message = progressMessage(progress);
    if (ts) {
      await this.client.chat.update({ channel: execution.channelId, ts, ...message });
      return { ts };
    }
    const posted = await this.client.chat.postMessage({ channel: execution.channelId, thread_ts: execution.threadTs ?? undefined, ...message });
    return { ts: posted.ts! };
  }

  async postThreadMessage(execution: Execution, text: string): Promise<void> {
    await this.client.chat.postMessage({
      channel: execution.channelId,
      thread_ts: execution.threadTs ?? undefined,
      text,
      blocks: [{ type: "section", text: { type: "mrkdwn", text } }],
    });
  }

  async postDeadlineNotice(execution: Execution, review: Review, notice: DeadlineNotice): Promise<void> {
    const text =
      notice.kind === "reminder"
        ? deadlineReminderText({ who: notice.who, taskName: review.taskName, round: review.round, withinMs: notice.withinMs, crewName: execution.crewName })
        : deadlineNotDeliveredText({ taskName: review.taskName, action: notice.action, message: notice.message });
    await this.postThreadMessage(execution, text);
  }

  async postThreadNotice(execution: Execution, text: string): Promise<void> {
    await this.client.chat.postMessage({ channel: execution.channelId, thread_ts: execution.threadTs ?? undefined, ...errorNotice(text) });
  }

  /** The whole text as a file in the run's thread: nothing is cut off silently. */
  private async attach(execution: Execution, content: string, filename: string, title: string): Promise<void> {
    const thread = execution.threadTs ? { thread_ts: execution.threadTs } : {};
    await this.client.filesUploadV2({ channel_id: execution.channelId, ...thread, content, filename, title });
  }
}
