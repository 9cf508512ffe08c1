// What a user's App Home lists: the reviews waiting for them (by the access rules: reassigned or
// escalated to them, the crew's reviewer rules, or the runs they started), the flow feedback requests
// waiting for them, their recent runs, and the crews they may start. Installed in many workspaces, a
// Home shows its own workspace's runs and requests only. The Slack adapter (adapters/slack/home/home.ts) turns
// this into the view.

import type { ExecutionRow, HomeStore, PendingReview } from "../store/home.js";
import { type AccessPorts, homeListsReview } from "./access.js";
import type { Clock } from "./ports.js";

export interface HomeForDeps<F extends { teamId: string | null }> {
  store: HomeStore;
  access: Pick<AccessPorts, "reviewers">;
  /** Flow feedback requests waiting for a user (usecases/flows.ts), if flows are configured. */
  flows?: { waitingFor(userId: string): Promise<F[]> };
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
  /** Pending reviews the user may decide and has not approved yet, oldest first. */
  reviews: PendingReview[];
  /** Flow feedback requests the user may answer, oldest first. */
  flowRequests: F[];
  /** The user's recent runs, newest first. */
  runs: ExecutionRow[];
  /** The crews the user may start here. */
  crews: { name: string; channels?: string[] }[];
}

export async function homeFor<F extends { teamId: string | null }>(deps: HomeForDeps<F>, userId: string, teamId?: string): Promise<HomeListing<F>> {
  const now = deps.clock.now();
  const team = deps.multiWorkspace && teamId ? teamId : undefined;
  const pending = await deps.store.pendingReviews({ ...(team ? { teamId: team } : {}) });
  // Someone who approved a review still waiting for more approvals is not waited for.
  const approved = await deps.store.approvedBy(
    userId,
    pending.map((r) => r.id),
  );
  const reviews: PendingReview[] = [];
  for (const review of pending) if (!approved.has(review.id) && (await homeListsReview(deps.access, review, userId))) reviews.push(review);
  const flowRequests = (deps.flows ? await deps.flows.waitingFor(userId) : []).filter((r) => !team || r.teamId === team);
  const runs = await deps.store.recentRuns(userId, { ...(team ? { teamId: team } : {}), limit: deps.maxRuns });
  const crews = deps.crews.usableBy(teamId).map((c) => ({ name: c.name, ...(c.channels ? { channels: c.channels } : {}) }));
  return { userId, now, reviews, flowRequests, runs, crews };
}
