// What a user's App Home lists: the reviews waiting for them (by the access rules: reassigned or
// escalated to them, the crew's reviewer rules, or the runs they started), the flow feedback requests
// waiting for them, their recent runs, and the crews they may start. Installed in many workspaces, a
// Home shows its own workspace's runs and requests only. A review whose run the user may not see
// (handed or escalated to them outside its channel) is listed without its content. The Slack adapter
// (adapters/slack/home/home.ts) turns this into the view.

import type { ExecutionRow, HomeStore, PendingFor, PendingReview } from "../store/home.js";
import { type AccessPorts, homeListsReview, maySeeRun } from "./access.js";
import type { Clock } from "./ports.js";
import { within } from "./within.js";

/**
 * How long a Home waits to know who may see the runs of the reviews it lists (channel members, read
 * through their cache): a slow Slack does not hold the tab, and what is not known by then is withheld.
 */
export const HOME_SEE_WAIT_MS = 2_000;

export interface HomeForDeps<F extends { teamId: string | null }> {
  store: HomeStore;
  access: Pick<AccessPorts, "reviewers" | "members" | "warn">;
  /** How long to wait for who may see the listed runs (HOME_SEE_WAIT_MS). */
  seeWaitMs?: number;
  /** Flow feedback requests waiting for a user (usecases/flows.ts), if flows are configured. */
  flows?: { waitingFor(userId: string, teamId?: string): Promise<F[]> };
  crews: { usableBy(teamId?: string): { name: string; channels?: string[] }[] };
  clock: Clock;
  /** Installed in many workspaces (OAuth). */
  multiWorkspace?: boolean;
  /** How many recent runs to read. */
  maxRuns: number;
}

export interface HomeListing<F> {
  userId: string;
  now: Date;
  /** Pending reviews the user may decide and has not approved yet, of runs they may see, oldest first. */
  reviews: PendingReview[];
  /** Pending reviews waiting for them whose run they may not see (or Slack could not say in time): only where, and how they got it. */
  withheld: WithheldReview[];
  /** Flow feedback requests the user may answer, oldest first. */
  flowRequests: F[];
  /** The user's recent runs, newest first. */
  runs: ExecutionRow[];
  /** The crews the user may start here. */
  crews: { name: string; channels?: string[] }[];
}

/** A review listed without its content: its run's channel, and whether it was handed or escalated to the user. */
export interface WithheldReview {
  channelId: string;
  /** Unset: listed by the crew's rules (its run's channel could not be read in time). */
  why?: "handed" | "escalated";
}

export async function homeFor<F extends { teamId: string | null }>(deps: HomeForDeps<F>, userId: string, teamId?: string): Promise<HomeListing<F>> {
  const now = deps.clock.now();
  const team = deps.multiWorkspace && teamId ? teamId : undefined;
  const scope = team ? { teamId: team } : {};
  // Only the pending reviews that may be this user's are read, however many others wait in the workspace;
  // the rules below still decide which of them are listed.
  const pending = await deps.store.pendingReviews({ ...scope, for: await mayBeTheirs(deps, userId, scope, now) });
  // Someone who approved a review still waiting for more approvals is not waited for.
  const ids = pending.map((r) => r.id);
  const approved = await deps.store.approvedBy(userId, ids);
  const listed: PendingReview[] = [];
  for (const review of pending) if (!approved.has(review.id) && (await homeListsReview(deps.access, review, userId))) listed.push(review);
  // A review's content (crew, task, thread link, Approve) only to someone who may see its run: every answer showing a run's content checks who asks.
  // Asked for all at once: the channel member cache reads each channel once, however many reviews it holds.
  const shown = await answersWithin(
    listed.map((review) => maySeeRun(deps.access, review.execution, { userId })),
    deps.seeWaitMs ?? HOME_SEE_WAIT_MS,
  );
  const reviews = listed.filter((_, i) => shown[i]);
  const withheld = listed.filter((_, i) => !shown[i]).map((r): WithheldReview => ({ channelId: r.execution.channelId, ...grantOf(r, userId) }));
  const flowRequests = (deps.flows ? await deps.flows.waitingFor(userId, team) : []).filter((r) => !team || r.teamId === team);
  const runs = await deps.store.recentRuns(userId, { ...scope, limit: deps.maxRuns });
  const crews = deps.crews.usableBy(teamId).map((c) => ({ name: c.name, ...(c.channels ? { channels: c.channels } : {}) }));
  return { userId, now, reviews, withheld, flowRequests, runs, crews };
}

/**
 * Which pending reviews may be the user's, for the store to read only those: the reviewer rules asked
 * as homeListsReview asks them, once per crew and escalation list (with its runs' workspace) that the
 * pending reviews have, rather than once per review.
 */
async function mayBeTheirs<F extends { teamId: string | null }>(deps: HomeForDeps<F>, userId: string, scope: { teamId?: string }, now: Date): Promise<PendingFor> {
  const { reviewers } = deps.access;
  // No reviewer rules at all: homeListsReview lists the runs the user started, which the store always reads.
  if (!reviewers) return { userId, ruledCrews: [], crews: [], escalatedTo: [] };
  const kinds = await deps.store.pendingKinds(scope);
  const ruled = kinds.crews.filter((c) => reviewers.rulesFor(c.crewName) !== undefined);
  const decides = await Promise.all(ruled.map((c) => reviewers.mayDecide(c.crewName, userId, { teamId: c.teamId, enterpriseId: c.enterpriseId })));
  const granted = await Promise.all(
    kinds.escalations.map((e) =>
      reviewers.isGranted({ reassignedTo: null, escalatedAt: now, escalatedTo: e.escalatedTo }, userId, { teamId: e.teamId, enterpriseId: e.enterpriseId }),
    ),
  );
  return {
    userId,
    ruledCrews: [...new Set(ruled.map((c) => c.crewName))],
    crews: [...new Set(ruled.filter((_, i) => decides[i]).map((c) => c.crewName))],
    escalatedTo: [...new Set(kinds.escalations.filter((_, i) => granted[i]).map((e) => e.escalatedTo))],
  };
}

/** How a review came to the user, if it was handed or escalated to them by name (a user group's escalation reads as "for you"). */
function grantOf(review: PendingReview, userId: string): Pick<WithheldReview, "why"> {
  if (review.reassignedTo === userId) return { why: "handed" };
  return review.escalatedTo?.split(",").includes(userId) ? { why: "escalated" } : {};
}

/** Each check's answer, or false for those not answered (or failed) within `ms`. */
function answersWithin(checks: Promise<boolean>[], ms: number): Promise<boolean[]> {
  const no = () => false;
  return Promise.all(checks.map((check) => within(check.catch(no), ms, no)));
}
