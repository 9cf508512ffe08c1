// The lifecycle's RunNotifier, in Slack: every message the run's thread and channel receive.
import type { Execution, ProgressSnapshot, Review, RunNotifier } from "../lifecycle/ports.js";
import type { Logger } from "../log.js";
import { announcementMessage, completionMessage, errorNotice, outputNeedsFile, progressMessage, type RunState, reviewMessage, type SlackMessage } from "./blocks/index.js";
import type { SlackClients } from "./clients.js";

const RUN_STATE: Record<string, RunState> = {
  starting: "starting",
  running: "running",
  waiting: "waiting",
  completed: "completed",
  failed: "failed",
  kickoff_failed: "failed",
  lost: "lost",
  // The app was removed from the workspace mid-run: Crewline lost track of it (the reason says why).
  uninstalled: "lost",
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
    summary: ["failed", "lost", "uninstalled"].includes(execution.state) ? (execution.error ?? undefined) : undefined,
  });
}

function reviewFor(review: Review, note?: string): SlackMessage {
  const state = review.state === "deciding" ? "pending" : (review.state as "posted" | "pending" | "approved" | "rejected" | "closed");
  return reviewMessage({
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
    private readonly clients: SlackClients,
    private readonly log: Logger,
  ) {}

  /** The client of the run's own workspace. */
  private clientFor(execution: Execution) {
    return this.clients.forTeam(execution.teamId, execution.enterpriseId);
  }

  async postReview(execution: Execution, review: Review): Promise<{ ts: string; fileAttached: boolean }> {
    const client = await this.clientFor(execution);
    const message = reviewFor(review);
    const posted = await client.chat.postMessage({ channel: execution.channelId, thread_ts: execution.threadTs ?? undefined, ...message });
    const fileAttached = outputNeedsFile(review.output);
    if (fileAttached) {
      await this.attach(execution, review.output, `${safeFilename(review.taskName)}-round-${review.round}.md`, `${review.taskName} (round ${review.round}): full output`);
    }
    return { ts: posted.ts!, fileAttached };
  }

  async updateReview(execution: Execution, review: Review, note?: string): Promise<void> {
    if (!review.messageTs) return;
    const client = await this.clientFor(execution);
    await client.chat.update({ channel: execution.channelId, ts: review.messageTs, ...reviewFor(review, note) });
  }

  async postCompletion(execution: Execution): Promise<{ ts: string }> {
    const client = await this.clientFor(execution);
    const permalink = execution.threadTs
      ? await client.chat
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
    const posted = await client.chat.postMessage({ channel: execution.channelId, ...message });
    if (output && outputNeedsFile(output)) {
      await this.attach(execution, output, `${safeFilename(execution.crewName)}-final-output.md`, `${execution.crewName}: final output`);
    }
    if (execution.threadTs) {
      await client.chat
        .update({ channel: execution.channelId, ts: execution.threadTs, ...announcementFor(execution) })
        .catch((err) => this.log.warn("could not update the run's announcement", { executionId: execution.id, err }));
    }
    return { ts: posted.ts! };
  }

  async showProgress(execution: Execution, progress: ProgressSnapshot, ts: string | null): Promise<{ ts: string }> {
    const client = await this.clientFor(execution);
    const message = progressMessage(progress);
    if (ts) {
      await client.chat.update({ channel: execution.channelId, ts, ...message });
      return { ts };
    }
    const posted = await client.chat.postMessage({ channel: execution.channelId, thread_ts: execution.threadTs ?? undefined, ...message });
    return { ts: posted.ts! };
  }

  async postThreadNotice(execution: Execution, text: string): Promise<void> {
    const client = await this.clientFor(execution);
    await client.chat.postMessage({ channel: execution.channelId, thread_ts: execution.threadTs ?? undefined, ...errorNotice(text) });
  }

  /** The whole text as a file in the run's thread: nothing is cut off silently. */
  private async attach(execution: Execution, content: string, filename: string, title: string): Promise<void> {
    const client = await this.clientFor(execution);
    const thread = execution.threadTs ? { thread_ts: execution.threadTs } : {};
    await client.filesUploadV2({ channel_id: execution.channelId, ...thread, content, filename, title });
  }
}
