// The lifecycle's RunNotifier, in Slack: every message the run's thread and channel receive.
import type { WebClient } from "@slack/web-api";
import type { RunPlan } from "../../domain/plan.js";
import { reviewChannel, runPlace } from "../../domain/refusals.js";
import { type ExecutionState, LIVE_STATES, STOPPED_STATES } from "../../domain/states.js";
import type { Logger } from "../../log/log.js";
import type { DeadlineNotice, Execution, PlanCall, ProgressSnapshot, Review, ReviewContext, RunNotice, RunNotifier } from "../../usecases/ports.js";
import {
  announcementMessage,
  completionMessage,
  deadlineNotDeliveredText,
  deadlineReminderText,
  earlyProgressMessage,
  editNeedsFile,
  outputNeedsFile,
  pendingNotesOf,
  planChunks,
  planShownOf,
  planTitle,
  progressMessage,
  type RefusedChannelFacts,
  reminderText,
  reviewMessage,
  reviewReserve,
  roundDiffNeedsFile,
  roundDiffTooLarge,
  runNoticeText,
  type SlackMessage,
  unifiedDiff,
  withRefusedHeader,
} from "./blocks/index.js";
import type { SlackClients } from "./clients.js";

export function announcementFor(execution: Execution): SlackMessage {
  return announcementMessage({
    crewName: execution.crewName,
    userId: execution.userId,
    inputs: execution.inputs as Record<string, string>,
    kickoffId: execution.kickoffId ?? undefined,
    state: execution.state as ExecutionState,
    startedAt: execution.startedAt ?? execution.createdAt,
    finishedAt: execution.finishedAt ?? undefined,
    summary: ["failed", "lost", "kickoff_failed", "uninstalled"].includes(execution.state) ? (execution.error ?? undefined) : undefined,
    stoppedBy: execution.stoppedBy ?? undefined,
    // A live run has its Stop button from the first post (a click before the crew answered the kickoff
    // is told the run is still starting), so the kickoff's update is not needed to stop it.
    stoppable: LIVE_STATES.includes(execution.state as ExecutionState) ? execution.id : undefined,
  });
}

/** How a run someone ended from Slack shows on its closed reviews (undefined: it was not). */
function runStopped(execution: Execution): { how: "stopped" | "abandoned"; by?: string } | undefined {
  if (!STOPPED_STATES.includes(execution.state as ExecutionState)) return undefined;
  return { how: execution.state === "stopped" ? "stopped" : "abandoned", ...(execution.stoppedBy ? { by: execution.stoppedBy } : {}) };
}

/**
 * Whether a review's output goes in a file (its message keeps room for its names, diffs, approvals and
 * notes: the same parts reviewFor shows); also when it changed too much since the previous round to
 * compare: the new version is the file.
 */
function reviewOutputNeedsFile(review: Review, context: ReviewContext = {}): boolean {
  const { approvals, edit, previous } = context;
  const shown = { approvals, edit, previous, taskName: review.taskName, agent: review.agent ?? undefined, round: review.round, output: review.output };
  // Pending notes count at their longest (run.ts reviewOutputRoom): the decision does not read the clock.
  const reserve = reviewReserve({ ...shown, reassignable: true });
  return outputNeedsFile(review.output, reserve) || roundDiffTooLarge(previous, review.output);
}

/** Whether an edit and approve attaches the edited version as a file (too long to read in the message): reviews and flow requests. */
export function editFileNeeded(original: string, edited: string): boolean {
  return editNeedsFile(original, edited, (t) => outputNeedsFile(t));
}

function reviewFor(review: Review, note?: string, context: ReviewContext = {}, outputFile?: boolean, stopped?: ReturnType<typeof runStopped>): SlackMessage {
  const state = review.state === "deciding" ? "pending" : (review.state as "posted" | "pending" | "approved" | "rejected" | "closed");
  return reviewMessage({
    ...(context.approvals ? { approvals: context.approvals } : {}),
    ...(context.edit ? { edit: context.edit, editFileAttached: editFileNeeded(review.output, context.edit.text) } : {}),
    ...(context.previous ? { previous: context.previous, diffFileAttached: roundDiffNeedsFile(context.previous, review.output) } : {}),
    pendingNotes: pendingNotesOf(review, new Date()),
    reassignable: true,
    byDeadline: review.decidedByDeadline,
    // Closed by the stop, not by the crew's "not waiting" answer (which records its message).
    ...(stopped && review.state === "closed" && !review.resumeMessage ? { runStopped: stopped } : {}),
    reviewId: review.id,
    taskName: review.taskName,
    agent: review.agent ?? undefined,
    round: review.round,
    output: review.output,
    state,
    decidedBy: review.decidedBy ?? undefined,
    feedback: review.feedback ?? undefined,
    note,
    outputTruncated: outputFile ?? (review.fileAttached || reviewOutputNeedsFile(review, context)),
  });
}

/** What a message of a run that moved to a direct message says on top (undefined: the run is in its channel). */
function runRefusal(execution: Execution): RefusedChannelFacts | undefined {
  return execution.movedTo
    ? { channelId: execution.channelId, reason: execution.movedBecause ?? "", subject: { kind: "run", crewName: execution.crewName, startedBy: execution.userId } }
    : undefined;
}

/** A message's link, or undefined when Slack does not give one. */
export function permalinkOf(client: WebClient, channel: string, ts: string): Promise<string | undefined> {
  return client.chat
    .getPermalink({ channel, message_ts: ts })
    .then((r) => r.permalink)
    .catch(() => undefined);
}

/**
 * Opens (or finds) the direct message with these users (a group DM with several): its channel id.
 * Several users make one group conversation, so that one message (one ts) is the one every click
 * is checked against.
 */
export async function openConversation(client: WebClient, userIds: string[]): Promise<string> {
  const opened = await client.conversations.open({ users: userIds.join(","), return_im: false });
  const id = opened.channel?.id;
  if (!id) throw new Error("conversations.open answered no channel");
  return id;
}

export function safeFilename(name: string): string {
  return (
    name
      .replace(/[^A-Za-z0-9._-]+/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 60) || "output"
  );
}

/** Message metadata naming the outbox effect that posted it, so an interrupted post can be found again. */
export const EFFECT_EVENT_TYPE = "crewline_effect";

/**
 * Posts carry crew and flow text: Slack shows no preview of the links in it (a preview would give a
 * crew's link the look of the app's own content). Slack decides unfurls when a message is posted.
 */
const NO_UNFURLS = { unfurl_links: false, unfurl_media: false } as const;

/** The metadata of a post (see EFFECT_EVENT_TYPE), and no link previews. */
export function effectMetadata(effectId: string) {
  return { metadata: { event_type: EFFECT_EVENT_TYPE, event_payload: { effect: effectId } }, ...NO_UNFURLS };
}

/**
 * The lifecycle's Slack effects, one Web API call each (a file upload is its own effect), performed
 * by the outbox worker. The client given here must not retry by itself: the outbox retries.
 */
export class SlackRunNotifier implements RunNotifier {
  constructor(
    private readonly clients: SlackClients,
    private readonly log: Logger,
  ) {}

  /** The client of the run's own workspace. */
  private clientFor(execution: Execution): Promise<WebClient> {
    return this.clients.forTeam(execution.teamId, execution.enterpriseId);
  }

  async postReview(execution: Execution, review: Review, effectId: string, context: ReviewContext = {}): Promise<{ ts: string }> {
    const message = reviewFor(review, undefined, context, reviewOutputNeedsFile(review, context));
    return this.postInRun(await this.clientFor(execution), execution, withRefusedHeader(message, runRefusal(execution)), effectId);
  }

  async attachReviewFile(execution: Execution, review: Review, title = "full output"): Promise<void> {
    await this.attach(execution, review.output, `${safeFilename(review.taskName)}-round-${review.round}.md`, `${review.taskName} (round ${review.round}): ${title}`);
  }

  async attachRoundDiff(execution: Execution, review: Review, previous: NonNullable<ReviewContext["previous"]>): Promise<void> {
    const patch = unifiedDiff(previous.output, review.output, `round-${previous.round}`, `round-${review.round}`);
    // Too many changes for a diff within its bounds: the new version, whole, stands in for it.
    if (patch === undefined) return this.attachReviewFile(execution, review, `changed too much since round ${previous.round} to compare; the new version`);
    await this.attach(
      execution,
      patch,
      `${safeFilename(review.taskName)}-round-${previous.round}-to-${review.round}.diff`,
      `${review.taskName}: changes from round ${previous.round} to round ${review.round}`,
    );
  }

  async updateReview(execution: Execution, review: Review, note?: string, context?: ReviewContext): Promise<void> {
    if (!review.messageTs) return;
    const client = await this.clientFor(execution);
    const message = reviewFor(review, note, context, undefined, runStopped(execution));
    // In a direct message the run moved to, a review says why on top.
    const refusal = review.channelId ? runRefusal(execution) : undefined;
    await client.chat.update({ channel: reviewChannel(review, execution), ts: review.messageTs, ...withRefusedHeader(message, refusal) });
  }

  async attachEditedOutput(execution: Execution, review: Review, edit: { by: string; text: string }): Promise<void> {
    await this.attach(execution, edit.text, `${safeFilename(review.taskName)}-round-${review.round}-edited.md`, `${review.taskName} (round ${review.round}): edited version`);
  }

  async postCompletion(execution: Execution, effectId: string): Promise<{ ts: string }> {
    const client = await this.clientFor(execution);
    const permalink = execution.threadTs && !execution.movedTo ? await permalinkOf(client, execution.channelId, execution.threadTs) : undefined;
    const output = execution.output ?? undefined;
    const outcome = execution.state === "completed" ? "succeeded" : execution.state === "lost" ? "lost" : "failed";
    const message = completionMessage({
      crewName: execution.crewName,
      userId: execution.userId,
      outcome,
      durationMs: (execution.finishedAt ?? new Date()).getTime() - (execution.startedAt ?? execution.createdAt).getTime(),
      output,
      error: execution.error ?? undefined,
      threadPermalink: permalink,
      outputTruncated: output ? outputNeedsFile(output) : false,
    });
    const posted = await client.chat.postMessage({ channel: runPlace(execution).channel, ...withRefusedHeader(message, runRefusal(execution)), ...effectMetadata(effectId) });
    return { ts: posted.ts! };
  }

  async attachCompletionFile(execution: Execution): Promise<void> {
    if (!execution.output) return;
    await this.attach(execution, execution.output, `${safeFilename(execution.crewName)}-final-output.md`, `${execution.crewName}: final output`);
  }

  async updateAnnouncement(execution: Execution): Promise<void> {
    const client = await this.clientFor(execution);
    const ts = execution.announcementTs ?? execution.threadTs;
    if (!ts) return;
    await client.chat.update({ channel: execution.channelId, ts, ...announcementFor(execution) });
  }

  showProgress(execution: Execution, progress: ProgressSnapshot, ts: string | null, effectId: string): Promise<{ ts: string }> {
    return this.postOrUpdate(execution, progressMessage(progress), ts, effectId);
  }

  showEarlyProgress(execution: Execution, plan: RunPlan, shown: { stepAt: Date; stopped?: boolean }, ts: string | null, effectId: string): Promise<{ ts: string }> {
    const title = planTitle({ crewName: execution.crewName, inputs: execution.inputs as Record<string, unknown> });
    return this.postOrUpdate(execution, earlyProgressMessage({ title, plan, ...shown }), ts, effectId);
  }

  /** The run's one progress message in its thread: posted (ts null), or updated in place. */
  private async postOrUpdate(execution: Execution, message: SlackMessage, ts: string | null, effectId: string): Promise<{ ts: string }> {
    const client = await this.clientFor(execution);
    if (ts) {
      await client.chat.update({ channel: execution.channelId, ts, ...message });
      return { ts };
    }
    const posted = await client.chat.postMessage({ channel: execution.channelId, thread_ts: execution.threadTs ?? undefined, ...message, ...effectMetadata(effectId) });
    return { ts: posted.ts! };
  }

  planCall(execution: Execution, plan: RunPlan, stream: { ts: string | null; shown: unknown; appendOnly?: boolean }): PlanCall | undefined {
    const title = planTitle({ crewName: execution.crewName, inputs: execution.inputs as Record<string, unknown>, plan });
    const { chunks, shown } = planChunks(title, plan, stream.ts ? planShownOf(stream.shown) : {});
    const channel = execution.channelId;
    const ts = stream.ts;
    // One call per effect, each on the outbox's client (no retries of its own): the SDK's chatStream()
    // helper buffers text and keeps the stream's ts in memory, which a run whose steps reach several
    // replicas, and an outbox that may perform its next effect on another one, cannot share.
    if (!ts) {
      return {
        method: "chat.startStream",
        shown,
        send: async () => {
          const client = await this.clientFor(execution);
          const started = await client.chat.startStream({
            channel,
            thread_ts: execution.threadTs ?? "",
            // A stream in a channel is addressed to the person who asked: the run's starter.
            recipient_user_id: execution.userId,
            recipient_team_id: execution.teamId,
            task_display_mode: "plan",
            chunks,
          });
          return { ts: String(started.ts ?? "") };
        },
      };
    }
    if (plan.ended && !stream.appendOnly) {
      return {
        method: "chat.stopStream",
        shown,
        bare: chunks.length === 0,
        send: async () => {
          const client = await this.clientFor(execution);
          await client.chat.stopStream({ channel, ts, ...(chunks.length ? { chunks } : {}) });
          return { ts };
        },
      };
    }
    if (!chunks.length) return undefined;
    return {
      method: "chat.appendStream",
      shown,
      send: async () => {
        const client = await this.clientFor(execution);
        await client.chat.appendStream({ channel, ts, chunks });
        return { ts };
      },
    };
  }

  async postReminder(execution: Execution, review: Review, reminder: { who: string; waitedMs: number }, effectId: string): Promise<void> {
    const client = await this.clientFor(execution);
    const link = review.messageTs ? await permalinkOf(client, reviewChannel(review, execution), review.messageTs) : undefined;
    await this.postInRun(client, execution, { text: reminderText(execution, review, reminder.who, reminder.waitedMs, link) }, effectId);
  }

  async findPosted(execution: Execution, threadTs: string | null, effectId: string, since: Date): Promise<string | undefined> {
    const place = runPlace(execution);
    return findPostedMessage(await this.clientFor(execution), this.log, place.channel, place.moved ? null : threadTs, effectId, since);
  }

  async openConversation(execution: Execution, userIds: string[]): Promise<string> {
    return openConversation(await this.clientFor(execution), userIds);
  }

  async postThreadNotice(execution: Execution, notice: RunNotice, effectId: string): Promise<void> {
    await this.postThreadText(execution, runNoticeText(notice), effectId);
  }

  reviewFiles(review: Review, context: ReviewContext): { output: boolean; diff: boolean } {
    return { output: reviewOutputNeedsFile(review, context), diff: roundDiffNeedsFile(context.previous, review.output) };
  }

  editNeedsFile(review: Review, edit: { text: string }): boolean {
    return editFileNeeded(review.output, edit.text);
  }

  completionNeedsFile(execution: Execution): boolean {
    return !!execution.output && outputNeedsFile(execution.output);
  }

  private async postThreadText(execution: Execution, text: string, effectId: string): Promise<void> {
    await this.postInRun(await this.clientFor(execution), execution, { text, blocks: [{ type: "section", text: { type: "mrkdwn", text } }] }, effectId);
  }

  /** A post where the run's messages go (its thread, or the direct message it moved to), carrying the effect's id. */
  private async postInRun(client: WebClient, execution: Execution, message: { text: string; blocks?: SlackMessage["blocks"] }, effectId: string): Promise<{ ts: string }> {
    const place = runPlace(execution);
    const posted = await client.chat.postMessage({ channel: place.channel, thread_ts: place.threadTs ?? undefined, ...message, ...effectMetadata(effectId) });
    return { ts: posted.ts! };
  }

  async postDeadlineNotice(execution: Execution, review: Review, notice: DeadlineNotice, effectId: string): Promise<void> {
    const text =
      notice.kind === "reminder"
        ? deadlineReminderText({ who: notice.who, taskName: review.taskName, round: review.round, withinMs: notice.withinMs, crewName: execution.crewName })
        : deadlineNotDeliveredText({ taskName: review.taskName, action: notice.action, message: notice.message });
    await this.postThreadText(execution, text, effectId);
  }

  /** The whole text as a file in the run's thread: nothing is cut off silently. */
  private async attach(execution: Execution, content: string, filename: string, title: string): Promise<void> {
    const place = runPlace(execution);
    const thread = place.threadTs ? { thread_ts: place.threadTs } : {};
    const client = await this.clientFor(execution);
    await client.filesUploadV2({ channel_id: place.channel, ...thread, content, filename, title });
  }
}

/** How much earlier than its effect (or run) a post is looked for: Slack's clock and ours may disagree. */
const LOOKUP_CLOCK_SLACK_MS = 60_000;

/**
 * After an interrupted post (the process died, or its lease ran out, between Slack's answer and
 * storing the ts), looks for the message that post may have left: the messages of the thread (or the
 * recent ones of the channel) carrying this effect's id in their metadata, posted from `since` on
 * (when the effect was enqueued, or the run created: the post is no older), less a minute for the
 * clocks. Reading them needs the history scopes (channels:history, groups:history); without them this
 * answers undefined and the effect posts again, so at worst a rare crash shows a message twice
 * (README, "Outbox"). Any other failure to read the first page (a rate limit, Slack down, a time-out)
 * is thrown: the effect is retried later, and looks again first. A failure on the second page is
 * answered "not found", and the effect posts again: Slack gives commercially distributed apps outside
 * the Marketplace these methods at one call a minute, so a second page is always refused there, and
 * each retry would read the first page again and be refused again: the post would never be made (a
 * rate limit is not counted as an attempt), and would hold its thread meanwhile, worse than a message
 * shown twice.
 */
export async function findPostedMessage(client: WebClient, log: Logger, channel: string, threadTs: string | null, effectId: string, since: Date): Promise<string | undefined> {
  // Slack refusing to let the bot read this conversation (an install without the history scopes), or
  // saying the thread is gone (a reply made in it would have kept it): an answer, not a failure to
  // answer, so posting again is all that is left.
  const UNREADABLE = [
    "missing_scope",
    "not_allowed_token_type",
    "no_permission",
    "access_denied",
    "ekm_access_denied",
    "team_access_not_granted",
    "not_in_channel",
    "thread_not_found",
  ];
  // A thread lists its oldest replies first; `oldest` starts it about when the effect was enqueued, so
  // the post is nearly always on the first page, even of 15 messages (what Slack gives apps outside the
  // Marketplace). A second page is read at most: each is a call within the effect's claim
  // (MOST_CALLS_PER_EFFECT in src/outbox/worker.ts counts two).
  const PAGES = 2;
  const PAGE_SIZE = 200;
  const oldest = ((since.getTime() - LOOKUP_CLOCK_SLACK_MS) / 1000).toFixed(6);
  const read = (cursor: string | undefined) => {
    const args = { channel, oldest, inclusive: true, limit: PAGE_SIZE, include_all_metadata: true, ...(cursor ? { cursor } : {}) };
    return threadTs ? client.conversations.replies({ ...args, ts: threadTs }) : client.conversations.history(args);
  };
  const ours = (m: unknown) => {
    const meta = (m as { metadata?: { event_type?: string; event_payload?: { effect?: unknown } } }).metadata;
    return meta?.event_type === EFFECT_EVENT_TYPE && meta.event_payload?.effect === effectId;
  };
  let cursor: string | undefined;
  for (let page = 0; page < PAGES; page++) {
    let answer: Awaited<ReturnType<typeof read>>;
    try {
      answer = await read(cursor);
    } catch (err) {
      const code = (err as { code?: string; data?: { error?: string } }).code === "slack_webapi_platform_error" ? (err as { data?: { error?: string } }).data?.error : undefined;
      if (page > 0) {
        // The first page held the part of the conversation `oldest` starts with; waiting for the next
        // (a rate limit) would only read the first again.
        const error = code ?? (err as { code?: string }).code ?? String(err);
        log.warn("could not read further looking for an interrupted post; posting again", { page: page + 1, error });
        return undefined;
      }
      if (!code || !UNREADABLE.includes(code)) throw err;
      log.warn("could not look for an interrupted post; posting again", { error: code });
      return undefined;
    }
    const found = (answer.messages ?? []).find(ours);
    if (found?.ts) return found.ts;
    cursor = answer.response_metadata?.next_cursor || undefined;
    if (!answer.has_more || !cursor) return undefined;
  }
  // Longer than what is read: the post, if Slack made it, is further on. Posted again, as without the scopes.
  log.warn("looked for an interrupted post in the first messages only; posting again", { pages: PAGES, pageSize: PAGE_SIZE });
  return undefined;
}
