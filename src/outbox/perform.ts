// What each kind of outbox effect does: read its subject as it is now, make the one Slack call, and
// say what to record and what comes next. The worker (worker.ts) commits that in one transaction.

import { EFFECT_KINDS, type EffectJob, effectKey, type NewEffect } from "../domain/effects.js";
import { planOf, STREAM_GONE, STREAMING_REFUSALS } from "../domain/plan.js";
import { isFinished, STOPPED_STATES, shownAs } from "../domain/states.js";
import type { Logger } from "../log/log.js";
import type { Db } from "../store/db/database.js";
import type { SqlRunner } from "../store/db/sql.js";
import {
  findExecution,
  findFlowRequest,
  findReview,
  forgetStream,
  planReviews,
  recordCompletionPosted,
  recordFlowAssignee,
  recordFlowFileAttached,
  recordFlowPosted,
  recordProgressPosted,
  recordReviewFileAttached,
  recordReviewPosted,
  recordReviewShown,
  recordStreamingRefused,
  recordStreamShown,
  streamingRefused,
} from "../store/effect-results.js";
import { enqueueEffect } from "../store/effects.js";
import { effectGivenUp, recordFlowMoved, recordRunMoved, reviewsToPostAgain } from "../store/moves.js";
import type { Sql } from "../store/sql.js";
import {
  type Clock,
  type DeadlineNotice,
  type Execution,
  type FlowNotice,
  type FlowNotifier,
  type FlowRequest,
  type FlowRequestContext,
  type Review,
  type ReviewContext,
  type RunNotice,
  type RunNotifier,
  systemClock,
} from "../usecases/ports.js";
import { reviewNote } from "../usecases/reviews.js";
import type { SlackGate } from "./budget.js";
import { GiveUp } from "./failures.js";
import { MOVED_PART } from "./refused.js";
import type { EffectOutcome, Performer } from "./worker.js";

export interface PerformerDeps {
  sql: Sql | SqlRunner | Db;
  /** The times written with Slack's answers (default: the system clock). */
  clock?: Clock;
  notifier: RunNotifier;
  flows?: FlowNotifier;
  /** What a review message shows beside its row (approvals so far, the edit, the previous round). */
  reviewContext?: (execution: Execution, review: Review) => Promise<ReviewContext>;
  /** What a flow request's message shows beside its row (approvals so far, the edit). */
  flowContext?: (request: FlowRequest) => Promise<FlowRequestContext>;
  /** Who a flow request goes to directly when Slack refuses its channel: its assignee (or reassignee), else the flow's reviewers. */
  flowRecipients?: (request: FlowRequest) => { users: string[]; usergroups: string[] };
  /** Where the performer says what it decided on its own (Slack refusing streaming in a workspace). */
  log?: Logger;
}

/** Who a flow request goes to directly without reviewer rules: whoever it is assigned or handed to. */
const assignees = (request: FlowRequest) => ({ users: [request.reassignedTo, request.assigneeUserId].filter((u): u is string => !!u), usergroups: [] });

export function slackEffectPerformer(deps: PerformerDeps): Performer {
  const { sql, notifier } = deps;
  const clock = deps.clock ?? systemClock;
  const contextOf = (e: Execution, r: Review): Promise<ReviewContext> => deps.reviewContext?.(e, r) ?? Promise.resolve({});
  const flowContextOf = (request: FlowRequest): Promise<FlowRequestContext> => deps.flowContext?.(request) ?? Promise.resolve({});
  const review = (id: string) => findReview(sql, id);
  const execution = (id: string) => findExecution(sql, id);
  const flowRequest = (id: string) => findFlowRequest(sql, id);

  async function reviewWithRun(id: string): Promise<{ review: Review; execution: Execution }> {
    const r = await review(id);
    const e = r && (await execution(r.executionId));
    if (!r || !e) throw new GiveUp("its review no longer exists");
    return { review: r, execution: e };
  }

  /** A post that may have reached Slack before its attempt was cut short is looked for first. */
  /** `found`: the message an interrupted attempt left was found; it shows what was true then, not now. */
  async function postOnce(job: EffectJob, find: () => Promise<string | undefined>, post: () => Promise<string>): Promise<{ ts: string; found: boolean }> {
    const found = job.interrupted ? await find() : undefined;
    return found !== undefined ? { ts: found, found: true } : { ts: await post(), found: false };
  }

  /**
   * Asks Slack's budget for the calls an effect is about to make (its kind's `calls`, or the ones given),
   * in its workspace and channel, once it knows it will make them. Without a gate (tests of a performer
   * alone) every call goes.
   */
  async function spend(
    gate: SlackGate | undefined,
    job: EffectJob,
    at: { teamId: string | null; channelId: string; movedTo?: string | null },
    calls: readonly string[] = EFFECT_KINDS[job.kind].calls,
  ) {
    // A run that moved to a direct message spends that conversation's pace, not its old channel's.
    const channel = at.movedTo ?? at.channelId;
    for (const method of calls) await gate?.({ team: at.teamId ?? "", channel, method });
  }

  /** A second effect of one kind for a subject that moved (its first was given up, or done, in the old channel). */
  const moved = (e: Execution) => (e.movedTo ? { part: MOVED_PART } : {});

  /**
   * Slack refused the run's channel for good: a direct message with its starter becomes the run's
   * place. Recorded once; in the same transaction the reviews not shown (or waiting for a decision
   * on a message in the refused channel) are posted again there, and the completion notice when the
   * channel refused it.
   */
  async function moveRun(job: EffectJob, gate?: SlackGate): Promise<EffectOutcome | undefined> {
    const e = await execution(job.subjectId);
    if (!e) throw new GiveUp("its run no longer exists");
    if (e.movedTo) return undefined;
    const reason = String(job.payload?.reason ?? "");
    if (!notifier.openConversation) throw new GiveUp("direct messages are not available");
    await spend(gate, job, e);
    const channel = await notifier.openConversation(e, [e.userId]);
    return {
      record: async (tx) => {
        const now = clock.now();
        if (!(await recordRunMoved(tx, { id: e.id, movedTo: channel, movedBecause: reason, now }))) return;
        for (const id of await reviewsToPostAgain(tx, e.id)) await enqueueEffect(tx, { kind: "review.post", subjectId: id, part: MOVED_PART }, now);
        if (await effectGivenUp(tx, effectKey({ kind: "run.completion", subjectId: e.id })))
          await enqueueEffect(tx, { kind: "run.completion", subjectId: e.id, part: MOVED_PART }, now);
      },
    };
  }

  /** The same for a flow request: a direct message with its assignee, else its reviewers; its message is posted again there. */
  async function moveFlowRequest(job: EffectJob, gate?: SlackGate): Promise<EffectOutcome | undefined> {
    const request = await flowRequest(job.subjectId);
    if (!request) throw new GiveUp("its flow request no longer exists");
    if (request.movedFrom) return undefined;
    const who = deps.flowRecipients?.(request) ?? assignees(request);
    if (who.users.length + who.usergroups.length === 0) throw new GiveUp("nobody to send it to directly: no assignee and no reviewers");
    if (!deps.flows?.openConversation) throw new GiveUp("direct messages are not available");
    await spend(gate, job, { teamId: request.teamId, channelId: request.channelId });
    const channel = await deps.flows.openConversation(request, who);
    return {
      record: async (tx) => {
        const now = clock.now();
        if (await recordFlowMoved(tx, { id: request.id, to: channel, because: String(job.payload?.reason ?? ""), now }))
          await enqueueEffect(tx, { kind: "flow.post", subjectId: request.id, part: MOVED_PART }, now);
      },
    };
  }

  /**
   * Whether the run's progress is its live plan (Slack's message streaming): the notifier streams,
   * the run has a thread to stream into and no progress message already (a run keeps the form it
   * started with), and Slack has not refused streaming in its workspace.
   */
  async function streams(e: Execution): Promise<boolean> {
    if (!notifier.planCall || !e.threadTs || e.progressTs) return false;
    return !(await streamingRefused(sql, e.teamId));
  }

  /** A task's output posted or its decision shown: its card in the live plan follows (no step may come to say so). */
  async function planFollows(e: Execution): Promise<NewEffect[]> {
    return !e.movedTo && !e.streamStoppedAt && (await streams(e)) ? [{ kind: "run.progress", subjectId: e.id }] : [];
  }

  /** The live plan: one streaming call that brings the run's streamed message up to what the run shows now. */
  async function streamPlan(job: EffectJob, gate: SlackGate | undefined, e: Execution, p: ProgressPayload): Promise<EffectOutcome | undefined> {
    const reviews = await planReviews(sql, e.id);
    const step = { latest: String(p.latest ?? ""), latestAt: Number(p.latestAt ?? 0), task: p.task ? String(p.task) : undefined, taskAt: Number(p.taskAt ?? 0) };
    const plan = planOf({ state: e.state, error: e.error, reviews, step });
    // No card yet: no stream (a run that shows nothing gets no message, as before).
    if (!e.streamTs && plan.tasks.length === 0) return undefined;
    const call = notifier.planCall!(e, plan, { ts: e.streamTs, shown: e.streamShown });
    if (!call) return undefined;
    await spend(gate, job, e, [call.method]);
    let ts: string;
    try {
      ({ ts } = await call.send());
    } catch (err) {
      const code = slackErrorCode(err);
      const again: NewEffect[] = [{ kind: "run.progress", subjectId: e.id }];
      if (code && STREAMING_REFUSALS.includes(code)) {
        // Not offered in this workspace: remembered for every replica; this run's progress goes on as a message.
        return {
          record: async (tx) => {
            if (await recordStreamingRefused(tx, { teamId: e.teamId, error: code, now: clock.now() }))
              deps.log?.warn("Slack refused message streaming in this workspace: progress is shown as one updated message there", {
                teamId: e.teamId,
                error: code,
                method: call.method,
              });
          },
          next: again,
        };
      }
      // Slack ended the stream itself (it was left idle too long): the next call starts a new one.
      if (code && e.streamTs && STREAM_GONE.includes(code)) return { record: (tx) => forgetStream(tx, e.id), next: again };
      throw err;
    }
    const stopped = call.method === "chat.stopStream";
    return {
      record: (tx) => recordStreamShown(tx, { executionId: e.id, ts, shown: call.shown, ...(stopped ? { stoppedAt: clock.now() } : {}) }),
      // Started for a run that had ended already: the stop follows.
      next: !stopped && plan.ended ? [{ kind: "run.progress", subjectId: e.id }] : [],
    };
  }

  /** Progress as one message (no streaming): posted once, then updated with the step count and the latest step. */
  async function progressMessage(job: EffectJob, gate: SlackGate | undefined, e: Execution, p: ProgressPayload): Promise<EffectOutcome | undefined> {
    const existing = e.progressTs;
    // Nothing to show yet (the run's end or a task output asked before any step): no message.
    if (!existing && !Number(p.steps ?? 0)) return undefined;
    await spend(gate, job, e, existing ? ["chat.update"] : ["chat.postMessage"]);
    // Read after the budget let it go: a wait for a token does not show older figures.
    const snapshot = { steps: Number(p.steps ?? 0), latest: String(p.latest ?? ""), done: !!p.done || isFinished(e.state), updatedAt: clock.now() };
    if (existing) {
      await notifier.showProgress(e, snapshot, existing, job.id);
      return undefined;
    }
    const { ts, found } = await postOnce(
      job,
      () => notifier.findPosted(e, e.threadTs, job.id),
      async () => (await notifier.showProgress(e, snapshot, null, job.id)).ts,
    );
    return {
      record: async (tx) => {
        await recordProgressPosted(tx, e.id, ts);
        // Found again after an interruption: it shows the figures of then, so it is updated once
        // more (the last figures may already be in, with no step left to come).
        if (found) await enqueueEffect(tx, { kind: "run.progress", subjectId: e.id, payload: { steps: 0, latest: "" } }, clock.now());
      },
    };
  }

  const performers: Record<Exclude<EffectJob["kind"], "run.move" | "flow.move">, (job: EffectJob, gate?: SlackGate) => Promise<EffectOutcome | undefined>> = {
    async "review.post"(job, gate) {
      const { review: r, execution: e } = await reviewWithRun(job.subjectId);
      if (r.messageTs) return undefined;
      const context = await contextOf(e, r);
      await spend(gate, job, e);
      const { ts, found } = await postOnce(
        job,
        () => notifier.findPosted(e, e.threadTs, job.id),
        async () => (await notifier.postReview(e, r, job.id, context)).ts,
      );
      const files = notifier.reviewFiles(r, context);
      return {
        record: async (tx) => {
          const now = clock.now();
          // A message found again shows the state of the earlier attempt, unknown here: shownState null.
          // In the direct message the run moved to, the review records that channel (clicks are checked against it).
          const state = await recordReviewPosted(tx, { id: r.id, messageTs: ts, channelId: e.movedTo, shownState: found ? null : shownAs(r.state), now });
          // It became a review, or was decided, while being posted (or the message found again may
          // show an older state): show what it is now.
          if (state !== undefined && (found || shownAs(state) !== shownAs(r.state))) await enqueueEffect(tx, { kind: "review.show", subjectId: r.id }, now);
        },
        next: [
          ...(files.output ? [{ kind: "review.file" as const, subjectId: r.id, ...moved(e) }] : []),
          ...(files.diff ? [{ kind: "review.diff" as const, subjectId: r.id, ...moved(e) }] : []),
          ...(await planFollows(e)),
        ],
      };
    },
    async "review.diff"(job, gate) {
      const { review: r, execution: e } = await reviewWithRun(job.subjectId);
      const { previous } = await contextOf(e, r);
      if (!previous) return undefined;
      await spend(gate, job, e);
      await notifier.attachRoundDiff(e, r, previous);
      return undefined;
    },
    async "review.edited"(job, gate) {
      const { review: r, execution: e } = await reviewWithRun(job.subjectId);
      const { edit } = await contextOf(e, r);
      if (!edit || !notifier.editNeedsFile(r, edit)) return undefined;
      await spend(gate, job, e);
      await notifier.attachEditedOutput(e, r, edit);
      return undefined;
    },
    async "review.file"(job, gate) {
      const { review: r, execution: e } = await reviewWithRun(job.subjectId);
      if (r.fileAttached) return undefined;
      await spend(gate, job, e);
      await notifier.attachReviewFile(e, r);
      return { record: (tx) => recordReviewFileAttached(tx, r.id) };
    },
    async "review.show"(job, gate) {
      const { review: r, execution: e } = await reviewWithRun(job.subjectId);
      // Not posted yet: the post shows the state it finds, and asks for an update if that changes.
      if (!r.messageTs) return undefined;
      await spend(gate, job, e);
      await notifier.updateReview(e, r, reviewNote(r), await contextOf(e, r));
      return { record: (tx) => recordReviewShown(tx, r.id, shownAs(r.state)), next: await planFollows(e) };
    },
    async "review.reminder"(job, gate) {
      const { review: r, execution: e } = await reviewWithRun(job.subjectId);
      // Decided (or the run ended) since it was due: nobody needs reminding any more.
      if (r.state !== "pending" || (!e.threadTs && !e.movedTo)) return undefined;
      await spend(gate, job, e);
      const reminder = job.payload as { who: string; waitedMs: number };
      await postOnce(
        job,
        () => notifier.findPosted(e, e.threadTs, job.id),
        async () => {
          await notifier.postReminder(e, r, reminder, job.id);
          return "";
        },
      );
      return undefined;
    },
    async "review.deadline"(job, gate) {
      const { review: r, execution: e } = await reviewWithRun(job.subjectId);
      await spend(gate, job, e);
      const notice = job.payload as unknown as DeadlineNotice;
      await postOnce(
        job,
        () => notifier.findPosted(e, e.threadTs, job.id),
        async () => {
          await notifier.postDeadlineNotice(e, r, notice, job.id);
          return "";
        },
      );
      return undefined;
    },
    async "run.message"(job, gate) {
      const e = await execution(job.subjectId);
      if (!e) throw new GiveUp("its run no longer exists");
      await spend(gate, job, e);
      const notice = noticeOf<RunNotice>(job.payload);
      await postOnce(
        job,
        () => notifier.findPosted(e, e.threadTs, job.id),
        async () => {
          await notifier.postThreadNotice(e, notice, job.id);
          return "";
        },
      );
      return undefined;
    },
    async "run.completion"(job, gate) {
      const e = await execution(job.subjectId);
      if (!e) throw new GiveUp("its run no longer exists");
      if (e.completionTs) return undefined;
      await spend(gate, job, e);
      const { ts } = await postOnce(
        job,
        () => notifier.findPosted(e, null, job.id),
        async () => (await notifier.postCompletion(e, job.id)).ts,
      );
      // The announcement stays in the channel that refused the run: not updated once the run moved.
      const next: NewEffect[] = e.movedTo ? [] : [{ kind: "run.announcement", subjectId: e.id }];
      if (notifier.completionNeedsFile(e)) next.push({ kind: "run.file", subjectId: e.id, ...moved(e) });
      return { record: (tx) => recordCompletionPosted(tx, { executionId: e.id, completionTs: ts, now: clock.now() }), next };
    },
    async "run.file"(job, gate) {
      const e = await execution(job.subjectId);
      if (!e) throw new GiveUp("its run no longer exists");
      await spend(gate, job, e);
      await notifier.attachCompletionFile(e);
      return undefined;
    },
    async "run.announcement"(job, gate) {
      const e = await execution(job.subjectId);
      if (!e) throw new GiveUp("its run no longer exists");
      if (e.movedTo) return undefined;
      await spend(gate, job, e);
      await notifier.updateAnnouncement(e);
      return undefined;
    },
    async "run.progress"(job, gate) {
      const e = await execution(job.subjectId);
      if (!e) throw new GiveUp("its run no longer exists");
      // Progress is a courtesy of the run's thread: a run that moved to a direct message does without.
      // A stopped stream showed the run's end: nothing more to show.
      if (e.movedTo || e.streamStoppedAt) return undefined;
      const p = (job.payload ?? {}) as ProgressPayload;
      // A run someone stopped shows no progress after its stop (steps still on their way when it was
      // stopped); a live plan it had is ended, showing the stop.
      const stopped = STOPPED_STATES.includes(e.state as (typeof STOPPED_STATES)[number]);
      if (await streams(e)) return stopped && !e.streamTs ? undefined : streamPlan(job, gate, e, p);
      if (stopped) return undefined;
      return progressMessage(job, gate, e, p);
    },
    async "flow.post"(job, gate) {
      const flows = deps.flows!;
      let request = await flowRequest(job.subjectId);
      if (!request) throw new GiveUp("its flow request no longer exists");
      if (request.messageTs) return undefined;
      const lookup = !!request.assignedEmail && !request.assigneeUserId;
      await spend(gate, job, request, lookup ? ["users.lookupByEmail", ...EFFECT_KINDS[job.kind].calls] : undefined);
      const assignee = lookup && request.assignedEmail ? await flows.lookupByEmail(request.assignedEmail, request.teamId) : undefined;
      if (assignee) {
        await recordFlowAssignee(sql, request.id, assignee);
        request = { ...request, assigneeUserId: assignee };
      }
      const current = request;
      const { ts, found } = await postOnce(
        job,
        () => flows.findPosted(current, null, job.id),
        async () => (await flows.postRequest(current, job.id)).ts,
      );
      return {
        record: async (tx) => {
          const now = clock.now();
          const state = await recordFlowPosted(tx, { id: current.id, messageTs: ts, now });
          // Decided while being posted, or found again showing an older state: show what it is now.
          if (state !== undefined && (found || state !== current.state)) await enqueueEffect(tx, { kind: "flow.show", subjectId: current.id }, now);
        },
        next: flows.requestNeedsFile(current) ? [{ kind: "flow.file", subjectId: current.id, ...(current.movedFrom ? { part: MOVED_PART } : {}) }] : [],
      };
    },
    async "flow.file"(job, gate) {
      const request = await flowRequest(job.subjectId);
      if (!request?.messageTs) throw new GiveUp("its flow request has no message");
      if (request.fileAttached) return undefined;
      await spend(gate, job, request);
      await deps.flows!.attachRequestFile(request);
      return { record: (tx) => recordFlowFileAttached(tx, request.id) };
    },
    async "flow.show"(job, gate) {
      const request = await flowRequest(job.subjectId);
      if (!request) throw new GiveUp("its flow request no longer exists");
      if (!request.messageTs) return undefined;
      await spend(gate, job, request);
      await deps.flows!.updateRequest(request, await flowContextOf(request));
      return undefined;
    },
    async "flow.edited"(job, gate) {
      const request = await flowRequest(job.subjectId);
      if (!request?.messageTs) throw new GiveUp("its flow request has no message");
      const { edit } = await flowContextOf(request);
      if (!edit || !deps.flows!.editNeedsFile(request, edit)) return undefined;
      await spend(gate, job, request);
      await deps.flows!.attachEditedOutput(request, edit);
      return undefined;
    },
    async "flow.reminder"(job, gate) {
      const request = await flowRequest(job.subjectId);
      if (!request) throw new GiveUp("its flow request no longer exists");
      if (request.state !== "pending" || !request.messageTs) return undefined;
      await spend(gate, job, request);
      const notice = noticeOf<FlowNotice>(job.payload);
      await postOnce(
        job,
        () => deps.flows!.findPosted(request, request.messageTs, job.id),
        async () => {
          await deps.flows!.postNotice(request, notice, job.id);
          return "";
        },
      );
      return undefined;
    },
  };

  return async (job, gate) => {
    if (job.kind.startsWith("flow.") && !deps.flows) throw new GiveUp("flows are not configured");
    if (job.kind === "run.move") return moveRun(job, gate);
    if (job.kind === "flow.move") return moveFlowRequest(job, gate);
    const perform = performers[job.kind];
    if (!perform) throw new GiveUp(`unknown effect kind ${job.kind}`);
    return perform(job, gate);
  };
}

/** The run.progress row's payload: steps coalesced so far, the latest step and when it came, the task a task_started event named. */
interface ProgressPayload {
  steps?: number;
  latest?: string;
  latestAt?: number;
  task?: string;
  taskAt?: number;
  done?: boolean;
}

/** Slack's error code of a failed Web API call (an error answer), if it is one. */
function slackErrorCode(err: unknown): string | undefined {
  const e = err as { code?: string; data?: { error?: unknown } };
  return e?.code === "slack_webapi_platform_error" && typeof e.data?.error === "string" ? e.data.error : undefined;
}

/** A reply's facts from its effect's payload ({ notice }); a row enqueued by an earlier version holds its words ({ text }). */
function noticeOf<N extends RunNotice | FlowNotice>(payload: Record<string, unknown> | null): N {
  const notice = payload?.notice;
  if (notice && typeof notice === "object" && typeof (notice as { kind?: unknown }).kind === "string") return notice as N;
  return { kind: "text", text: String(payload?.text ?? "") } as N;
}
