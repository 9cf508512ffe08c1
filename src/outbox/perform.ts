// What each kind of outbox effect does: read its subject as it is now, make the one Slack call, and
// say what to record and what comes next. The worker (worker.ts) commits that in one transaction.

import type { StoredApproval } from "../domain/approvals.js";
import { EFFECT_KINDS, type EffectJob, effectKey, type NewEffect, PROGRESS_SPACING_MS } from "../domain/effects.js";
import {
  appendSpacing,
  EARLY_PROGRESS_AFTER_MS,
  EARLY_PROGRESS_OVERDUE_MS,
  EARLY_PROGRESS_REFRESH_MS,
  type PlanStep,
  planOf,
  type RunPlan,
  STOP_YIELDS_MS,
  STREAM_GONE,
  STREAMING_REFUSALS,
} from "../domain/plan.js";
import { isFinished, STOPPED_STATES, shownAs } from "../domain/states.js";
import type { Logger } from "../log/log.js";
import {
  adoptEarlyProgress,
  countLiveStreams,
  findExecution,
  findFlowRequest,
  findReviewWithRun,
  forgetStream,
  planReviews,
  recordCompletionPosted,
  recordEarlyProgress,
  recordEarlyStopped,
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
import { enqueueEffect, holdsUrgentMessage } from "../store/effects.js";
import { effectGivenUp, recordFlowMoved, recordRunMoved, reviewsToPostAgain } from "../store/moves.js";
import { openReviewsOf } from "../store/reviews.js";
import type { Sql } from "../store/sql.js";
import {
  type Clock,
  type DeadlineNotice,
  type Execution,
  type FlowNotice,
  type FlowNotifier,
  type FlowRequest,
  type FlowRequestContext,
  type PlanCall,
  type Review,
  type ReviewContext,
  type RunNotice,
  type RunNotifier,
  systemClock,
} from "../usecases/ports.js";
import { reviewNote } from "../usecases/reviews.js";
import { noTelemetry, type Telemetry } from "../usecases/telemetry.js";
import { BudgetWait, type SlackCall, type SlackGate } from "./budget.js";
import { GiveUp, judgeFailure, NothingSent } from "./failures.js";
import { MOVED_PART } from "./refused.js";
import { cellRate, tierOf } from "./tiers.js";
import type { EffectOutcome, Performer } from "./worker.js";

export interface PerformerDeps {
  sql: Sql;
  /** The times written with Slack's answers (default: the system clock). */
  clock?: Clock;
  notifier: RunNotifier;
  flows?: FlowNotifier;
  /** What a review message shows beside its row (approvals so far, the edit, the previous round). */
  reviewContext?: (execution: Execution, review: Review, approvals: readonly StoredApproval[]) => Promise<ReviewContext>;
  /** What a flow request's message shows beside its row (approvals so far, the edit). */
  flowContext?: (request: FlowRequest) => Promise<FlowRequestContext>;
  /** Who a flow request goes to directly when Slack refuses its channel: its assignee (or reassignee), else the flow's reviewers. */
  flowRecipients?: (request: FlowRequest) => { users: string[]; usergroups: string[] };
  /** Where the performer says what it decided on its own (Slack refusing streaming in a workspace). */
  log?: Logger;
  /** Where what reached Slack is reported (metrics listen): reviews shown, runs ended. */
  telemetry?: Telemetry;
  /** With one bot token, its workspace: the budget an effect of no stored workspace (a flow without `team:`) spends, as the runs there do. */
  defaultTeam?: () => string | undefined;
}

/** A review effect's subject: the review, its run, and its approvals so far. */
type ReviewAndRun = { review: Review; execution: Execution; approvals: readonly StoredApproval[] };

/** One chat.appendStream token of Slack's Tier 4 (100 a minute per workspace): 600 ms. */
const APPEND_INTERVAL_MS = cellRate(tierOf("chat.appendStream") ?? { perMinute: 100, burst: 1 }).intervalMs;

/** Slack's answer to a streaming call's chunks it does not accept: the same chunks are refused again. */
const CHUNKS_REFUSED = "invalid_chunks";

/** How long a workspace that streams is believed to (refusedIn) before it is read again. */
const REFUSAL_RECHECK_MS = 30_000;
/**
 * Streams Slack may end by itself for one run within STREAM_RESTARTS_WINDOW_MS (on one replica) before
 * its progress goes on as one updated message: each new stream costs a Tier 2 token plans waiting to
 * start need, and Slack ending every stream it is given would otherwise spend them for ever.
 */
const STREAM_RESTARTS_MAX = 3;
const STREAM_RESTARTS_WINDOW_MS = 10 * 60_000;

/** Where an effect's calls go: a run or a flow request, in its workspace and channel. */
type Place = { teamId: string | null; channelId: string; movedTo?: string | null };

/** Who a flow request goes to directly without reviewer rules: whoever it is assigned or handed to. */
const assignees = (request: FlowRequest) => ({ users: [request.reassignedTo, request.assigneeUserId].filter((u): u is string => !!u), usergroups: [] });

export function slackEffectPerformer(deps: PerformerDeps): Performer {
  const { sql, notifier } = deps;
  const telemetry = deps.telemetry ?? noTelemetry;
  /** A review message is in Slack: as the task's (a post), and as the input's once its decision controls are (pending). */
  const shown = (e: Execution, r: Review, callStartedAt: number, asTask: boolean) => {
    if (asTask) telemetry.emit({ type: "review.shown", executionId: e.id, source: "task", callStartedAt });
    if (r.state === "pending") telemetry.emit({ type: "review.shown", executionId: e.id, source: "input", callStartedAt });
  };
  const clock = deps.clock ?? systemClock;
  const contextOf = ({ execution: e, review: r, approvals }: ReviewAndRun): Promise<ReviewContext> => deps.reviewContext?.(e, r, approvals) ?? Promise.resolve({});
  const flowContextOf = (request: FlowRequest): Promise<FlowRequestContext> => deps.flowContext?.(request) ?? Promise.resolve({});
  const execution = (id: string) => findExecution(sql, id);
  const flowRequest = (id: string) => findFlowRequest(sql, id);

  /** The review, its run and its approvals (read together: a review message shows them). */
  async function reviewWithRun(id: string): Promise<ReviewAndRun> {
    const found = await findReviewWithRun(sql, id);
    if (!found) throw new GiveUp("its review no longer exists");
    return found;
  }

  /**
   * Whether a thread notice is still worth posting when its turn comes (Slack may have held it for a
   * while). Escalations and reassignments ask someone to decide a review: not once it is decided or
   * the run ended. An interrupted decision, a stop, or words an earlier version stored report what
   * happened: always said.
   */
  async function stillWanted(e: Execution, notice: RunNotice): Promise<boolean> {
    if (notice.kind !== "escalation" && notice.kind !== "reassignment") return true;
    if (isFinished(e.state)) return false;
    // The notice names its review by task and round; none found to tell by: said, as before.
    const same = (await planReviews(sql, e.id)).filter((r) => r.taskName === notice.taskName && r.round === notice.round);
    return same.length === 0 || same.some((r) => r.state === "pending");
  }

  /**
   * Posts a message once. A post that may have reached Slack before its attempt was cut short is looked
   * for first, with a token of the look-up's own method (Tier 3: conversations.replies in a thread,
   * conversations.history in the channel), so that it waits for that method's budget and a 429 on it
   * pauses that method alone. The post's tokens (`take`) are asked for after the look-up, right before
   * the post (the worker puts a 429 on the method let through last), and not at all for a message found.
   * `found`: the message an interrupted attempt left was found; it shows what was true then, not now.
   */
  async function postOnce(
    job: EffectJob,
    look: { gate: SlackGate | undefined; at: Place; threadTs: string | null; find: () => Promise<string | undefined> },
    take: () => Promise<void>,
    post: () => Promise<string>,
  ): Promise<{ ts: string; found: boolean }> {
    if (job.interrupted) {
      // The notifiers look in the thread, or in the channel for a run moved to a direct message.
      const method = look.threadTs && !look.at.movedTo ? "conversations.replies" : "conversations.history";
      await spend(look.gate, job, look.at, [method]);
      const found = await look.find();
      if (found !== undefined) return { ts: found, found: true };
      // Not there: waiting for the post's token, the next attempt posts without looking again.
      await take().catch((err) => {
        throw err instanceof BudgetWait ? new BudgetWait(err.call, err.retryAt, true) : err;
      });
    } else await take();
    return { ts: await post(), found: false };
  }

  /** Where postOnce looks for a run's message an interrupted attempt may have posted: in `threadTs`, by default the run's thread. */
  const runLook = (job: EffectJob, gate: SlackGate | undefined, e: Execution, threadTs: string | null = e.threadTs) => ({
    gate,
    at: e,
    threadTs,
    find: () => notifier.findPosted(e, threadTs, job.id, job.createdAt),
  });

  /**
   * Whether the message an effect posts in a thread holds a review (or a flow request) back: the thread
   * keeps its order (claimEffects), so one enqueued after a notice or a file waits for it, and a notice
   * waiting for the token it leaves to what a person waits on would keep the review waiting too, however
   * many other runs' reviews take the channel's tokens meanwhile. Such a message takes its tokens as the
   * review would (priority inheritance), only while that review's post is still due.
   */
  async function holdsReview(job: EffectJob): Promise<boolean> {
    const { thread, priority } = EFFECT_KINDS[job.kind];
    return thread !== null && priority > 0 && holdsUrgentMessage(sql, job.id);
  }

  /**
   * Asks Slack's budget for the calls an effect is about to make (its kind's `calls`, or the ones given),
   * in its workspace and channel, once it knows it will make them. Without a gate (tests of a performer
   * alone) every call goes.
   */
  async function spend(
    gate: SlackGate | undefined,
    job: EffectJob,
    at: Place,
    calls: readonly string[] = EFFECT_KINDS[job.kind].calls,
    how: Pick<SlackCall, "yields" | "exact" | "waitedOn" | "overdue"> = {},
  ) {
    if (!gate) return;
    // A run that moved to a direct message spends that conversation's pace, not its old channel's.
    const channel = at.movedTo ?? at.channelId;
    const waitedOn = how.waitedOn || (await holdsReview(job));
    const team = at.teamId ?? deps.defaultTeam?.() ?? "";
    for (const method of calls) await gate({ team, channel, method, ...how, ...(waitedOn ? { waitedOn } : {}) });
  }

  /**
   * The run as its announcement shows it: "Waiting for a review" only once a review has waited through
   * a reminder (one decided at once never costs the channel two updates of a Tier 3 method that progress
   * needs); until then a waiting run reads as running. The reminder and the decision after it show it
   * (run.state).
   */
  async function asAnnounced(e: Execution): Promise<Execution> {
    if (e.state !== "waiting") return e;
    const reminded = (await openReviewsOf(sql, e.id)).some((r) => r.state === "pending" && r.remindersSent > 0);
    return reminded ? e : { ...e, state: "running" };
  }

  /** The run's announcement re-rendered from its row (`whileLive`: only while the run is live). */
  async function showAnnouncement(job: EffectJob, gate: SlackGate | undefined, o: { whileLive?: boolean } = {}): Promise<EffectOutcome | undefined> {
    const e = await execution(job.subjectId);
    if (!e) throw new GiveUp("its run no longer exists");
    if (e.movedTo || (o.whileLive && isFinished(e.state))) return undefined;
    await spend(gate, job, e);
    await notifier.updateAnnouncement(await asAnnounced(e));
    if (!o.whileLive) return undefined;
    // Another effect kind shows the final state (run.announcement): if the run ended while this live
    // render was on its way, it may have landed after that one, so the final state is shown once more.
    const now = await execution(job.subjectId);
    return now && isFinished(now.state) ? { next: [{ kind: "run.announcement", subjectId: e.id }] } : undefined;
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
    // An open stream goes on, and is stopped at the run's end, whatever another run's call was refused.
    return !!e.streamTs || !(await refusedIn(e.teamId));
  }

  // Whether Slack refused streaming in a workspace: asked for every review message shown, so read once
  // per REFUSAL_RECHECK_MS per workspace. One another replica records is seen here that much later
  // (meanwhile this replica's own streaming call is refused and records it too), and so is one a new
  // install of the workspace took back (adapters/slack/installations.ts).
  const refusals = new Map<string, { refused: boolean; at: number }>();
  async function refusedIn(teamId: string): Promise<boolean> {
    const now = clock.now().getTime();
    const known = refusals.get(teamId);
    if (known && now - known.at < REFUSAL_RECHECK_MS) return known.refused;
    const refused = await streamingRefused(sql, teamId);
    refusals.delete(teamId);
    if (refusals.size >= 10_000) refusals.delete(refusals.keys().next().value!);
    refusals.set(teamId, { refused, at: now });
    return refused;
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
    const asked = notifier.planCall!(e, plan, { ts: e.streamTs, shown: e.streamShown });
    if (!asked) return undefined;
    // A call carries only so many chunks: a stop with more to show than that appends first (Tier 4), and
    // stops once nothing is left (cards a stop left out could never be sent after it).
    const call =
      asked.method === "chat.stopStream" && e.streamTs && showsMore(e, plan, e.streamTs, asked.shown)
        ? (notifier.planCall!(e, plan, { ts: e.streamTs, shown: e.streamShown, appendOnly: true }) ?? asked)
        : asked;
    // A finished run's stop leaves the Tier 2 token to plans waiting to start, for a while.
    const yields = call.method === "chat.stopStream" && !!e.finishedAt && clock.now().getTime() - e.finishedAt.getTime() < STOP_YIELDS_MS;
    try {
      // Refused, they wait exactly for their token: the plans waiting to start then try again together, in
      // the order of their effects (created with each run's first step), so they start about in the order
      // their runs did; appends are spaced below already.
      await spend(gate, job, e, [call.method], { yields, exact: true, waitedOn: call.method === "chat.startStream" });
    } catch (err) {
      // A run that ended while its plan waits still gets its last steps in the message shown meanwhile.
      if (err instanceof BudgetWait && call.method === "chat.startStream" && (!plan.ended || e.earlyTs)) return earlyProgress(job, gate!, e, plan, step, err);
      if (err instanceof BudgetWait && call.method === "chat.stopStream") return finalAppend(job, gate!, e, plan, p, err);
      throw err;
    }
    let ts: string;
    try {
      ({ ts } = await call.send());
    } catch (err) {
      const code = slackErrorCode(err);
      const again: NewEffect[] = [{ kind: "run.progress", subjectId: e.id }];
      // Chunks Slack refuses are refused again however often they are sent: not retried. An append's are
      // taken as shown (their cards are sent again when they change), as a stop's are (closingRefused).
      if (code === CHUNKS_REFUSED && call.method === "chat.startStream") return planRefused(job, gate, e, p, code);
      if (code === CHUNKS_REFUSED && call.method === "chat.appendStream" && e.streamTs) {
        deps.log?.warn("Slack refused some of the live plan's cards; the plan goes on without them until they change", { executionId: e.id, error: code });
        return streamed(e, plan, e.streamTs, call);
      }
      if (code && STREAMING_REFUSALS.includes(code)) {
        // Not offered in this workspace: remembered for every replica; this run's progress goes on as a message.
        return {
          record: async (tx) => {
            // A message that showed its steps while the plan waited to start becomes its progress message.
            await adoptEarlyProgress(tx, e.id);
            // Refused on its own stream too: the run goes on as a message (else streams() would keep it here).
            if (e.streamTs) await forgetStream(tx, e.id);
            refusals.set(e.teamId, { refused: true, at: clock.now().getTime() });
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
      // Slack ended the stream itself (it was left idle too long): the next call starts a new one. After a
      // stop whose answer was lost, though, that is the stop having gone through.
      if (code && e.streamTs && STREAM_GONE.includes(code))
        return call.method === "chat.stopStream" && job.interrupted ? stoppedBefore(e, e.streamTs, call.shown) : streamGone(job, gate, e, p);
      const streamTs = e.streamTs;
      if (call.method === "chat.stopStream" && !call.bare && streamTs && closingRefused(err, e.id)) {
        return { record: (tx) => recordStreamShown(tx, { executionId: e.id, ts: streamTs, shown: call.shown }), next: again };
      }
      throw err;
    }
    return streamed(e, plan, ts, call);
  }

  /** A streaming call went: what the stream shows now, and when the plan's next call is due. */
  async function streamed(e: Execution, plan: RunPlan, ts: string, call: PlanCall): Promise<EffectOutcome> {
    const { shown } = call;
    const stopped = call.method === "chat.stopStream";
    // Cards that had no room in this call go in the next appends, each after the plan's share of Tier 4.
    const more = !stopped && showsMore(e, plan, ts, shown);
    // An append: the plan's next one waits its share of Tier 4 among the workspace's plans (none waits long).
    const spacing = call.method === "chat.appendStream" || more ? appendSpacing(await countLiveStreams(sql, e.teamId), APPEND_INTERVAL_MS) : 0;
    const againAt = more ? Math.max(spacing, PROGRESS_SPACING_MS) : spacing > PROGRESS_SPACING_MS ? spacing : 0;
    return {
      record: (tx) => recordStreamShown(tx, { executionId: e.id, ts, shown, ...(stopped ? { stoppedAt: clock.now() } : {}) }),
      // Started for a run that had ended already: the stop follows (after the cards still to append).
      next: !stopped && plan.ended && !more ? [{ kind: "run.progress", subjectId: e.id }] : [],
      ...(againAt ? { again: new Date(clock.now().getTime() + againAt) } : {}),
    };
  }

  /**
   * An ended plan's stream is over already: an earlier attempt's chat.stopStream reached Slack though its
   * answer was lost (a time-out, a 5xx, the process gone). Recorded as stopped; nothing new is started.
   */
  function stoppedBefore(e: Execution, ts: string, shown: Record<string, string>): EffectOutcome {
    return { record: (tx) => recordStreamShown(tx, { executionId: e.id, ts, shown, stoppedAt: clock.now() }) };
  }

  /**
   * Whether the stream, once it shows `shown`, still lacks some of `plan`: a call carries at most so many
   * chunks (PLAN_CHUNKS_PER_CALL in src/adapters/slack/blocks/plan.ts), and what had no room follows.
   */
  function showsMore(e: Execution, plan: RunPlan, ts: string, shown: Record<string, string>): boolean {
    return notifier.planCall!(e, plan, { ts, shown, appendOnly: true }) !== undefined;
  }

  /**
   * Slack refused the plan's chunks at its start (`invalid_chunks`): sent again they would be refused
   * again, each time for a Tier 2 token that plans waiting to start need. This run's progress goes on
   * as one updated message instead, as in a workspace that refuses streaming (a run keeps that form):
   * the message that showed its steps while the plan waited becomes it, or it is posted now.
   */
  async function planRefused(job: EffectJob, gate: SlackGate | undefined, e: Execution, p: ProgressPayload, code: string): Promise<EffectOutcome | undefined> {
    deps.log?.warn("Slack refused the live plan's chunks at its start; this run's progress is shown as one updated message", { executionId: e.id, error: code });
    return progressInstead(job, gate, e, p);
  }

  /** The run's progress goes on as one updated message: the one that showed its steps while the plan waited, or one posted now. */
  function progressInstead(job: EffectJob, gate: SlackGate | undefined, e: Execution, p: ProgressPayload): Promise<EffectOutcome | undefined> | EffectOutcome {
    if (e.earlyTs) return { record: (tx) => adoptEarlyProgress(tx, e.id), next: [{ kind: "run.progress", subjectId: e.id }] };
    return progressMessage(job, gate, e, { ...p, steps: Math.max(1, Number(p.steps ?? 0)) });
  }
  /** When each run's recent streams ended (Slack ending them itself), the oldest dropped past the window; bounded. */
  const streamEnds = new Map<string, number[]>();
  /** Slack ended the run's stream itself (left idle too long): the next call starts a new one, unless it keeps doing so (STREAM_RESTARTS_MAX). */
  async function streamGone(job: EffectJob, gate: SlackGate | undefined, e: Execution, p: ProgressPayload): Promise<EffectOutcome | undefined> {
    const now = clock.now().getTime();
    const ends = [...(streamEnds.get(e.id) ?? []).filter((at) => now - at < STREAM_RESTARTS_WINDOW_MS), now];
    streamEnds.delete(e.id);
    if (streamEnds.size >= 10_000) streamEnds.delete(streamEnds.keys().next().value!);
    // A stopped run with a message that showed its steps before its plan started would have it say the run
    // stopped before its plan started: that message shows the stop instead (progressMessage), the plan
    // Slack ended staying as it was. Any other run starts a new plan, which shows its end.
    const earlyStop = isStopped(e) && !!e.earlyTs;
    if (ends.length <= STREAM_RESTARTS_MAX && !earlyStop) {
      streamEnds.set(e.id, ends);
      return { record: (tx) => forgetStream(tx, e.id), next: [{ kind: "run.progress", subjectId: e.id }] };
    }
    if (!earlyStop) deps.log?.warn("Slack ended this run's live plan again and again; its progress is shown as one updated message", { executionId: e.id, streams: ends.length });
    const instead = await progressInstead(job, gate, e, p);
    // The ended stream no longer counts among the workspace's live plans (appendSpacing).
    return {
      ...instead,
      record: async (tx) => {
        await forgetStream(tx, e.id);
        await instead?.record?.(tx);
      },
    };
  }

  /**
   * The live plan cannot start yet: Slack's Tier 2 (chat.startStream, about 20 a minute per workspace)
   * is spent, as when a dozen runs start together. Unless its token is there within about 2 s, the run's
   * latest step shows meanwhile in one message of its thread (chat.postMessage, paced per channel, not
   * per workspace), refreshed when it shows a step older than EARLY_PROGRESS_REFRESH_MS (chat.update at
   * progress's priority: reviews and decisions keep their tokens; once overdue, a notice's). The effect
   * stays due for the plan's token (EffectOutcome.again); the plan then starts below the message, which
   * is left as it is.
   */
  async function earlyProgress(job: EffectJob, gate: SlackGate, e: Execution, plan: RunPlan, step: PlanStep, wait: BudgetWait): Promise<EffectOutcome> {
    const show = notifier.showEarlyProgress?.bind(notifier);
    const now = clock.now().getTime();
    const planAt = wait.retryAt.getTime();
    if (!show || (!e.earlyTs && planAt - now <= EARLY_PROGRESS_AFTER_MS)) throw wait;
    const stepAt = step.latestAt > 0 ? Math.min(step.latestAt, now) : now;
    const shownAt = e.earlyStepAt?.getTime() ?? 0;
    // Due again for the plan's token, or before it to refresh the message. A refresh due within a second of
    // the token waits for it: the plans waiting then try together, in the order of their effects. `soonest`:
    // a look for something new comes a second from now at the earliest; a refresh due sooner keeps its time.
    const again = (at: number, soonest = now + 1000): EffectOutcome => ({ again: new Date(at >= planAt - 1000 ? planAt : Math.max(soonest, at)) });
    if (e.earlyTs) {
      // Nothing newer to show: look again in a while (a step re-arms a due effect without bringing it
      // forward), or, once the run has ended (no step is to come), when the plan may start.
      if (stepAt <= shownAt) {
        if (plan.ended) throw wait;
        return again(now + EARLY_PROGRESS_REFRESH_MS / 2);
      }
      // Shown less than a refresh ago: refreshed when that is up, not a second after now (which made the step
      // waiting to be shown a second staler, as when the plan's token, waited for, went to another run).
      if (now < shownAt + EARLY_PROGRESS_REFRESH_MS) return again(shownAt + EARLY_PROGRESS_REFRESH_MS, now);
    }
    // A refresh refused until its step is older than EARLY_PROGRESS_OVERDUE_MS is tried again then, as a notice.
    const overdueAt = e.earlyTs ? shownAt + EARLY_PROGRESS_OVERDUE_MS : Number.POSITIVE_INFINITY;
    const overdue = now >= overdueAt;
    const take = async () => {
      try {
        await spend(gate, job, e, [e.earlyTs ? "chat.update" : "chat.postMessage"], { exact: true, overdue });
      } catch (err) {
        // No token for the message either: tried again when the soonest of the plan's token, the message's
        // token and the refresh becoming overdue is there.
        if (!(err instanceof BudgetWait)) throw err;
        const retryAt = Math.min(err.retryAt.getTime(), planAt, overdue ? Number.POSITIVE_INFINITY : overdueAt);
        throw retryAt === planAt ? wait : new BudgetWait(err.call, new Date(retryAt));
      }
    };
    const shown = { stepAt: new Date(stepAt) };
    const earlyTs = e.earlyTs;
    if (earlyTs) await take();
    const { ts } = earlyTs
      ? await show(e, plan, shown, earlyTs, job.id)
      : await postOnce(job, runLook(job, gate, e), take, async () => (await show(e, plan, shown, null, job.id)).ts);
    return { record: (tx) => recordEarlyProgress(tx, { executionId: e.id, ts, stepAt: shown.stepAt }), ...again(stepAt + EARLY_PROGRESS_REFRESH_MS) };
  }

  /**
   * The run ended but its plan's stop (Tier 2, like a start) waits for a token: its last cards and its
   * finished title are appended meanwhile (Tier 4), so the plan shows the end at once and the stop that
   * follows has nothing left to send.
   */
  async function finalAppend(job: EffectJob, gate: SlackGate, e: Execution, plan: RunPlan, p: ProgressPayload, wait: BudgetWait): Promise<EffectOutcome | undefined> {
    const append = notifier.planCall!(e, plan, { ts: e.streamTs, shown: e.streamShown, appendOnly: true });
    if (!append) throw wait;
    try {
      await spend(gate, job, e, [append.method], { exact: true });
    } catch (err) {
      if (err instanceof BudgetWait) throw err.retryAt < wait.retryAt ? err : wait;
      throw err;
    }
    try {
      await append.send();
    } catch (err) {
      const code = slackErrorCode(err);
      // Slack ended the stream itself: the next call starts a new one (and stops it); or an earlier attempt's
      // stop, whose answer was lost, went through.
      if (code && STREAM_GONE.includes(code)) return job.interrupted ? stoppedBefore(e, e.streamTs!, append.shown) : streamGone(job, gate, e, p);
      if (!closingRefused(err, e.id)) throw err;
    }
    return { record: (tx) => recordStreamShown(tx, { executionId: e.id, ts: e.streamTs!, shown: append.shown }), again: wait.retryAt };
  }

  /**
   * Whether Slack refused an ended plan's closing chunks (an error answer, not an outage). Sent again they
   * would be refused again until the effect is given up, and the plan would spin: they are taken as shown,
   * and the stop goes without them. A bare stop refused too is retried or given up like any other effect.
   */
  function closingRefused(err: unknown, executionId: string): boolean {
    const code = slackErrorCode(err);
    const verdict = judgeFailure(err);
    if (!code || (verdict.kind === "retry" && verdict.outage)) return false;
    deps.log?.warn("Slack refused the live plan's last chunks; stopping it without them", { executionId, error: code });
    return true;
  }

  /**
   * A flow request's assignee, looked up by e-mail before its post. A look-up that fails (a 429, Slack
   * down) is tried again with the post, marked as posting nothing; after ASSIGNEE_LOOKUP_TRIES attempts
   * the request is posted without its assignee rather than held through an outage.
   */
  async function assigneeOf(job: EffectJob, email: string, request: FlowRequest): Promise<string | undefined> {
    try {
      return await deps.flows!.lookupByEmail(email, request);
    } catch (err) {
      if (job.attempts < ASSIGNEE_LOOKUP_TRIES) throw new NothingSent(err);
      deps.log?.warn("the flow request's assignee could not be looked up; posted without them", { id: request.id, err });
      return undefined;
    }
  }

  /** A run stopped before its live plan started: the message that showed its steps says so, once (at progress's priority). */
  async function earlyStopped(job: EffectJob, gate: SlackGate | undefined, e: Execution): Promise<EffectOutcome | undefined> {
    // Said once: steps of the run still on their way at its stop bring no second edit.
    if (!e.earlyTs || e.streamStoppedAt || !notifier.showEarlyProgress) return undefined;
    await spend(gate, job, e, ["chat.update"]);
    const reviews = await planReviews(sql, e.id);
    const p = (job.payload ?? {}) as ProgressPayload;
    const plan = planOf({ state: e.state, error: e.error, reviews, step: { latest: String(p.latest ?? ""), latestAt: Number(p.latestAt ?? 0) } });
    const stepAt = e.earlyStepAt ?? clock.now();
    await notifier.showEarlyProgress(e, plan, { stepAt, stopped: true }, e.earlyTs, job.id);
    return { record: (tx) => recordEarlyStopped(tx, e.id, clock.now()) };
  }

  /** Progress as one message (no streaming): posted once, then updated with the step count and the latest step. */
  async function progressMessage(job: EffectJob, gate: SlackGate | undefined, e: Execution, p: ProgressPayload): Promise<EffectOutcome | undefined> {
    const existing = e.progressTs;
    // Nothing to show yet (the run's end or a task output asked before any step): no message.
    if (!existing && !Number(p.steps ?? 0)) return undefined;
    const ended = isFinished(e.state);
    // Read after the budget let it go: a wait for a token does not show older figures. Once ended, the
    // state says how (stopped, failed…: not "finished" for all).
    const snapshot = () => ({ steps: Number(p.steps ?? 0), latest: String(p.latest ?? ""), done: !!p.done || ended, updatedAt: clock.now(), ...(ended ? { state: e.state } : {}) });
    if (existing) {
      await spend(gate, job, e, ["chat.update"]);
      await notifier.showProgress(e, snapshot(), existing, job.id);
      // The end is shown once: steps still on their way (a stopped run's) cost no more updates.
      return ended ? { record: (tx) => recordEarlyStopped(tx, e.id, clock.now()) } : undefined;
    }
    const { ts, found } = await postOnce(
      job,
      runLook(job, gate, e),
      () => spend(gate, job, e, ["chat.postMessage"]),
      async () => (await notifier.showProgress(e, snapshot(), null, job.id)).ts,
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
      const subject = await reviewWithRun(job.subjectId);
      const { review: r, execution: e } = subject;
      if (r.messageTs) return undefined;
      const context = await contextOf(subject);
      const { ts, found } = await postOnce(
        job,
        runLook(job, gate, e),
        () => spend(gate, job, e),
        async () => {
          const started = Date.now();
          const { ts } = await notifier.postReview(e, r, job.id, context);
          shown(e, r, started, true);
          return ts;
        },
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
      const subject = await reviewWithRun(job.subjectId);
      const { review: r, execution: e } = subject;
      const { previous } = await contextOf(subject);
      if (!previous) return undefined;
      await spend(gate, job, e);
      await notifier.attachRoundDiff(e, r, previous);
      return undefined;
    },
    async "review.edited"(job, gate) {
      const subject = await reviewWithRun(job.subjectId);
      const { review: r, execution: e } = subject;
      const { edit } = await contextOf(subject);
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
      const subject = await reviewWithRun(job.subjectId);
      const { review: r, execution: e } = subject;
      // Not posted yet: the post shows the state it finds, and asks for an update if that changes.
      if (!r.messageTs) return undefined;
      await spend(gate, job, e);
      const context = await contextOf(subject);
      const started = Date.now();
      await notifier.updateReview(e, r, reviewNote(r), context);
      shown(e, r, started, false);
      // What the message shows now (approvals, an edit) may leave the output less room than its post
      // had: shortened, its whole text comes as a file, as the message then says.
      const file = !r.fileAttached && notifier.reviewFiles(r, context).output;
      return {
        record: (tx) => recordReviewShown(tx, r.id, shownAs(r.state)),
        next: [...(file ? [{ kind: "review.file" as const, subjectId: r.id, ...moved(e) }] : []), ...(await planFollows(e))],
      };
    },
    async "review.reminder"(job, gate) {
      const { review: r, execution: e } = await reviewWithRun(job.subjectId);
      // Decided (or the run ended) since it was due: nobody needs reminding any more.
      if (r.state !== "pending" || (!e.threadTs && !e.movedTo)) return undefined;
      const reminder = job.payload as { who: string; waitedMs: number };
      await postOnce(
        job,
        runLook(job, gate, e),
        () => spend(gate, job, e),
        async () => {
          await notifier.postReminder(e, r, reminder, job.id);
          return "";
        },
      );
      // The review has waited through a reminder: its run's announcement now says a review waits.
      return { next: [{ kind: "run.state", subjectId: e.id }] };
    },
    async "review.deadline"(job, gate) {
      const { review: r, execution: e } = await reviewWithRun(job.subjectId);
      const notice = job.payload as unknown as DeadlineNotice;
      // A reminder asks for a decision: not once one was taken (or the run ended) while it waited for
      // Slack. A decision not delivered happened regardless, and is said.
      if (notice.kind === "reminder" && (r.state !== "pending" || isFinished(e.state))) return undefined;
      await postOnce(
        job,
        runLook(job, gate, e),
        () => spend(gate, job, e),
        async () => {
          await notifier.postDeadlineNotice(e, r, notice, job.id);
          return "";
        },
      );
      // A deadline's reminder counts as one (see review.reminder).
      return notice.kind === "reminder" ? { next: [{ kind: "run.state", subjectId: e.id }] } : undefined;
    },
    async "run.message"(job, gate) {
      const e = await execution(job.subjectId);
      if (!e) throw new GiveUp("its run no longer exists");
      const notice = noticeOf<RunNotice>(job.payload);
      if (!(await stillWanted(e, notice))) return undefined;
      await postOnce(
        job,
        runLook(job, gate, e),
        () => spend(gate, job, e),
        async () => {
          await notifier.postThreadNotice(e, notice, job.id);
          // A stopped run has no completion notice: its thread's stop notice (posted once) counts it.
          if (notice.kind === "run_stopped") telemetry.emit({ type: "run.ended", executionId: e.id, crewName: e.crewName, outcome: notice.how });
          return "";
        },
      );
      return undefined;
    },
    async "run.completion"(job, gate) {
      const e = await execution(job.subjectId);
      if (!e) throw new GiveUp("its run no longer exists");
      if (e.completionTs) return undefined;
      const { ts } = await postOnce(
        job,
        runLook(job, gate, e, null),
        () => spend(gate, job, e),
        async () => {
          const { ts } = await notifier.postCompletion(e, job.id);
          telemetry.emit({ type: "run.ended", executionId: e.id, crewName: e.crewName, outcome: e.state });
          return ts;
        },
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
    "run.announcement": (job, gate) => showAnnouncement(job, gate),
    // An ended run's announcement is shown by run.announcement (its final state).
    "run.started": (job, gate) => showAnnouncement(job, gate, { whileLive: true }),
    "run.state": (job, gate) => showAnnouncement(job, gate, { whileLive: true }),
    async "run.progress"(job, gate) {
      const e = await execution(job.subjectId);
      if (!e) throw new GiveUp("its run no longer exists");
      // Progress is a courtesy of the run's thread: a run that moved to a direct message does without.
      // A stopped stream showed the run's end: nothing more to show.
      if (e.movedTo || e.streamStoppedAt) return undefined;
      const p = (job.payload ?? {}) as ProgressPayload;
      // A run someone stopped shows no progress after its stop (steps still on their way when it was
      // stopped); a live plan it had is ended, showing the stop.
      // A run stopped before its plan started gets none (its message shown meanwhile says so); one whose
      // stream Slack had ended (seen here) gets a new plan showing the stop, started then stopped.
      const stopped = isStopped(e);
      const planEnded = !e.earlyTs && streamEnds.has(e.id);
      if (await streams(e)) return stopped && !e.streamTs && !planEnded ? earlyStopped(job, gate, e) : streamPlan(job, gate, e, p);
      // Its progress message shows the stop, once; none is posted after it.
      if (stopped && !e.progressTs) return undefined;
      return progressMessage(job, gate, e, p);
    },
    async "flow.post"(job, gate) {
      const flows = deps.flows!;
      let request = await flowRequest(job.subjectId);
      if (!request) throw new GiveUp("its flow request no longer exists");
      if (request.messageTs) return undefined;
      const lookup = !!request.assignedEmail && !request.assigneeUserId;
      if (lookup) await spend(gate, job, request, ["users.lookupByEmail"]);
      const assignee = lookup && request.assignedEmail ? await assigneeOf(job, request.assignedEmail, request) : undefined;
      if (assignee) {
        await recordFlowAssignee(sql, request.id, assignee);
        request = { ...request, assigneeUserId: assignee };
      }
      const current = request;
      const { ts, found } = await postOnce(
        job,
        { gate, at: current, threadTs: null, find: () => flows.findPosted(current, null, job.id, job.createdAt) },
        () => spend(gate, job, current),
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
      const context = await flowContextOf(request);
      await deps.flows!.updateRequest(request, context);
      // Shown beside approvals or an edit, the output may be shortened where its post was not: its file follows.
      if (request.fileAttached || !deps.flows!.requestNeedsFile(request, context)) return undefined;
      return { next: [{ kind: "flow.file", subjectId: request.id, ...(request.movedFrom ? { part: MOVED_PART } : {}) }] };
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
      const notice = noticeOf<FlowNotice>(job.payload);
      await postOnce(
        job,
        { gate, at: request, threadTs: request.messageTs, find: () => deps.flows!.findPosted(request, request.messageTs, job.id, job.createdAt) },
        () => spend(gate, job, request),
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

/**
 * Attempts at a flow request's post whose assignee look-up may fail before it is posted without them:
 * with the outbox's backoff (1 s doubling), about half a minute of Slack's trouble.
 */
const ASSIGNEE_LOOKUP_TRIES = 6;

/** A run someone stopped from Slack (or stopped following): not a failure, and no progress is posted after it. */
function isStopped(e: Execution): boolean {
  return STOPPED_STATES.includes(e.state as (typeof STOPPED_STATES)[number]);
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
