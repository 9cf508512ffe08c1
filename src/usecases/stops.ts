// Stopping a run from Slack (the Stop button on its announcement, `/crew stop <kickoff id>`), and
// stopping following one whose crew cannot be stopped. Who may: the rule of a decision (access.ts
// mayStopRun). Exactly once, whatever the clicks or replicas: the first asker claims the stop with a
// conditional write (store/executions.ts claimStop), only the claim's holder calls POST /stop, and the
// run ends with one conditional transition. In that transaction: its state and who stopped it, the
// audit row, its open reviews closed, and the Slack effects (announcement, thread notice, the reviews'
// messages, its live plan's end). A run that has ended takes no more callbacks (410), is no longer
// polled, and the outbox posts no more progress for it.

import { executionTransition, isFinished, LIVE_STATES, reviewTransition, STOPPED_STATES } from "../domain/states.js";
import type { Logger } from "../log/log.js";
import { isCrewError } from "../protocols/crew/errors.js";
import type { StopResult } from "../protocols/crew/types.js";
import { claimStop, findExecution, findExecutionByKickoffId, releaseStopClaim, updateExecution } from "../store/executions.js";
import { lockReviewsOf, moveReviewsOf, openReviewsOf } from "../store/reviews.js";
import { inTransaction, type Sql } from "../store/sql.js";
import { type AccessPorts, type Asker, clickFromAnnouncement, mayStopRun, visibleRun } from "./access.js";
import type { Audit } from "./audit.js";
import type { ClaimHolder, Clock, CrewDirectory, Execution, Outbox } from "./ports.js";
import { planEnds } from "./runs.js";

/**
 * A stop claimed this long ago whose process died before finishing it may be claimed again: at the
 * least, since its POST /stop may take longer (StopDeps.longestCallMs).
 */
export const STOP_CLAIM_STALE_MS = 60_000;

/** How many times recording a stop the crew took is tried (RunStops.endTaken). */
const END_ATTEMPTS = 3;

/** Which run: by kickoff id (`/crew stop`), or by execution id from a button, with the message it was clicked on. */
export type StopTarget = { kickoffId: string } | { executionId: string; click?: { channelId?: string; messageTs?: string } };

export type StopOutcome =
  /** No such run, or one the asker may not see: the same answer. */
  | { kind: "unknown" }
  /** A Stop button clicked on another message than the run's announcement. */
  | { kind: "not_this_message" }
  | { kind: "not_allowed"; run: Execution }
  /** The crew has not answered the kickoff yet: there is nothing to stop. */
  | { kind: "not_started"; run: Execution }
  /** It had ended already (stopped or no longer followed by `run.stoppedBy`, or finished). */
  | { kind: "ended"; run: Execution }
  /** Someone's stop is being sent to the crew now. */
  | { kind: "stopping"; run: Execution; by: string }
  | { kind: "stopped"; run: Execution }
  | { kind: "abandoned"; run: Execution }
  /** The crew's deployment has no POST /stop (404, 405): the run goes on; it can be no longer followed. */
  | { kind: "not_supported"; run: Execution }
  /** The crew said the run had ended already (409, 400); its outcome comes by webhook or status. */
  | { kind: "crew_says_ended"; run: Execution }
  /** The stop did not reach the crew (its words, for the asker); the run goes on. */
  | { kind: "failed"; run: Execution; message: string }
  /** The crew refused the stop (a 400 that names no finished state): its words, for the asker; the run goes on. */
  | { kind: "refused"; run: Execution; message: string }
  /** The crew did not answer the stop (a read time-out, a 504): it may have taken it; its outcome comes by webhook or status. */
  | { kind: "unconfirmed"; run: Execution }
  /** The crew took the stop, but Crewline could not record it (its database failed every try). */
  | { kind: "taken_not_recorded"; run: Execution };

export interface StopDeps {
  db: Sql;
  crews: CrewDirectory;
  outbox: Outbox;
  log: Logger;
  clock: Clock;
  audit?: Audit;
  /** Called once a run has ended here (this process drops what it holds about it: cached rows, progress). */
  onEnded?: (executionId: string) => void;
  /** This replica: named in the stops it claims; the claim of a holder gone is taken at once by the next asker. */
  holder?: ClaimHolder;
  /**
   * The longest a call to the crew can take, every retry and time-out included: a stop claimed more
   * recently may still be on its way, so it is not taken over before (a second POST /stop would follow).
   */
  longestCallMs?: number;
}

export class RunStops {
  private readonly sql: Sql;

  constructor(private readonly deps: StopDeps) {
    this.sql = deps.db;
  }

  /** Stops the run once: the first asker's stop reaches the crew; everyone else hears who is stopping or stopped it. */
  async stop(target: StopTarget, asker: Asker, access: AccessPorts): Promise<StopOutcome> {
    const found = await this.allowed(target, asker, access);
    if (found.kind !== "allowed") return found;
    const { run } = found;
    if (isFinished(run.state)) return { kind: "ended", run };
    if (!run.kickoffId) return { kind: "not_started", run };
    const claimed = await this.claim(run, asker);
    if (!claimed?.stopClaimedAt) return this.taken(run);

    let result: StopResult | undefined;
    let failure: string | undefined;
    let maybeTaken = false;
    let refused = false;
    try {
      const crew = this.deps.crews.get(run.crewName);
      if (!crew) failure = `The crew “${run.crewName}” is no longer configured in Crewline.`;
      else result = crew.stop ? await crew.stop(run.kickoffId) : { outcome: "not_supported", status: 405 };
    } catch (err) {
      this.deps.log.warn("stop did not reach the crew", { executionId: run.id, err });
      failure = isCrewError(err) ? err.userMessage() : "Crewline could not send the stop to the crew.";
      maybeTaken = isCrewError(err) && err.maybeApplied === true;
      refused = isCrewError(err) && err.kind === "bad_request";
    }
    if (result?.outcome === "stopped") {
      const ended = await this.endTaken(run.id, asker.userId).catch((err) => {
        // The claim stays held (others hear who is stopping it) until it goes stale.
        this.deps.log.error("a stop the crew took could not be recorded", { executionId: run.id, err });
        return "not_recorded" as const;
      });
      if (ended === "not_recorded") return { kind: "taken_not_recorded", run };
      if (ended) return { kind: "stopped", run: ended };
    }
    // Not stopped (or the run ended some other way meanwhile): the claim is given back.
    await releaseStopClaim(this.sql, run.id, { claimedAt: claimed.stopClaimedAt, keep: STOPPED_STATES, now: this.deps.clock.now() });
    const current = (await findExecution(this.sql, run.id)) ?? run;
    if (isFinished(current.state)) return { kind: "ended", run: current };
    if (result?.outcome === "not_supported") return { kind: "not_supported", run: current };
    if (result?.outcome === "ended") return { kind: "crew_says_ended", run: current };
    if (maybeTaken) return { kind: "unconfirmed", run: current };
    if (refused) return { kind: "refused", run: current, message: failure ?? "" };
    return { kind: "failed", run: current, message: failure ?? "Crewline could not send the stop to the crew." };
  }

  /** Stops following a run whose crew cannot be stopped from Slack: it ends here (abandoned), once. The crew is not called. */
  async stopFollowing(executionId: string, asker: Asker, access: AccessPorts): Promise<StopOutcome> {
    const found = await this.allowed({ executionId }, asker, access);
    if (found.kind !== "allowed") return found;
    const { run } = found;
    if (isFinished(run.state)) return { kind: "ended", run };
    // The stop's own claim: someone's stop on its way to the crew (an older answer's button) decides how
    // the run ends, while a dead replica's or a stale claim is taken over, as a Stop would.
    const claimed = await this.claim(run, asker);
    if (!claimed?.stopClaimedAt) return this.taken(run);
    const ended = await this.end(run.id, "abandoned", asker.userId);
    if (ended) return { kind: "abandoned", run: ended };
    await releaseStopClaim(this.sql, run.id, { claimedAt: claimed.stopClaimedAt, keep: STOPPED_STATES, now: this.deps.clock.now() });
    return { kind: "ended", run: (await findExecution(this.sql, run.id)) ?? run };
  }

  /** Claims the run's stop for the asker, once (store/executions.ts claimStop): the claimed row, or null. */
  private claim(run: Execution, asker: Asker) {
    const now = this.deps.clock.now();
    return claimStop(this.sql, run.id, {
      userId: asker.userId,
      states: LIVE_STATES,
      // Claims made before this are stale: their POST /stop has ended, whatever became of it.
      staleBefore: new Date(now.getTime() - Math.max(STOP_CLAIM_STALE_MS, this.deps.longestCallMs ?? 0)),
      now,
      owner: this.deps.holder?.replicaId,
      deadBefore: this.deps.holder?.deadBefore(now),
    });
  }

  /** The run, if it exists, the asker may see it, the click comes from its announcement, and the asker may stop it. */
  private async allowed(target: StopTarget, asker: Asker, access: AccessPorts): Promise<{ kind: "allowed"; run: Execution } | StopOutcome> {
    const find = () => ("kickoffId" in target ? findExecutionByKickoffId(this.sql, target.kickoffId) : findExecution(this.sql, target.executionId));
    const run = await visibleRun(access, find, asker);
    if (!run) return { kind: "unknown" };
    if ("executionId" in target && target.click && !clickFromAnnouncement(run, target.click)) return { kind: "not_this_message" };
    if (!(await mayStopRun(access, run, asker, await openReviewsOf(this.sql, run.id)))) return { kind: "not_allowed", run };
    return { kind: "allowed", run };
  }

  /** Another asker holds the claim, or the run ended meanwhile. */
  private async taken(run: Execution): Promise<StopOutcome> {
    const current = (await findExecution(this.sql, run.id)) ?? run;
    if (isFinished(current.state)) return { kind: "ended", run: current };
    return { kind: "stopping", run: current, by: current.stoppedBy ?? "" };
  }

  /**
   * The crew took the stop: it must be recorded. A transaction PostgreSQL fails (a deadlock's victim, a
   * dropped connection) is tried again, twice, before the error reaches the asker.
   */
  private async endTaken(id: string, by: string): Promise<Execution | null> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.end(id, "stopped", by);
      } catch (err) {
        if (attempt >= END_ATTEMPTS) throw err;
        this.deps.log.warn("a stop the crew took could not be recorded; trying again", { executionId: id, attempt, err });
        await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
      }
    }
  }

  /**
   * Ends the run as stopped (or abandoned) by `by`, if it is still live, in one transaction: state,
   * audit, its open reviews closed, and the Slack effects. The ended row, or null when it had ended.
   */
  private async end(id: string, how: "stopped" | "abandoned", by: string): Promise<Execution | null> {
    const { from, to } = executionTransition(how);
    const move = reviewTransition("run_stopped");
    const ended = await inTransaction(this.sql, async (tx) => {
      const now = this.deps.clock.now();
      // The reviews first, then the run: the order of a review's promotion (store/reviews.ts lockReviewsOf).
      // A task message being promoted meanwhile is waited for, then closed with the reviews.
      await lockReviewsOf(tx, id, [...move.from, "posted"]);
      const changed = await updateExecution(tx, id, { state: to, stoppedBy: by, stopClaimedAt: null, stopClaimedBy: null, finishedAt: now }, { states: from }, now);
      if (changed !== 1) return null;
      const run = await findExecution(tx, id);
      await this.deps.audit?.record({ executionId: id, kind: "stop", actor: by, decision: how, detail: { outcome: how, kickoffId: run?.kickoffId ?? null } }, tx);
      // Reviews waiting for a decision lose their controls. Task messages stay what they are, finished
      // tasks (their cards in the live plan stay complete), as at a run's own end (runs.ts finish).
      const closed = await moveReviewsOf(tx, id, move, now);
      for (const reviewId of closed) await this.deps.outbox.add(tx, { kind: "review.show", subjectId: reviewId });
      await this.deps.outbox.add(tx, { kind: "run.announcement", subjectId: id });
      await this.deps.outbox.add(tx, { kind: "run.message", subjectId: id, part: how, payload: { notice: { kind: "run_stopped", by, how } } });
      // Its live plan stops, showing the stop, as at any run's end (runs.ts finish): a review's update
      // would re-arm it too, but a run stopped with none waiting has no such update.
      await this.deps.outbox.add(tx, planEnds(id));
      return run;
    });
    if (ended) {
      this.deps.outbox.nudge();
      this.deps.onEnded?.(id);
    }
    return ended;
  }
}
