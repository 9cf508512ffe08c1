// Who may see a run (its output, its status, its audit trail) and whether a click comes from the
// message it claims. One rule, used by /crew status, /crew audit and review clicks: the run's starter,
// its reviewers, and the members of its channel. Everyone else is told what an unknown id gets.
import type { WebClient } from "@slack/web-api";
import type { Execution, Review } from "../lifecycle/ports.js";
import type { FeatureDeps } from "../slack/deps.js";

export interface Asker {
  userId: string;
  /** The channel the request came from (Slack signed it): someone using it there is in it. */
  channelId?: string;
}

const MEMBER_PAGES = 20;

async function isChannelMember(client: WebClient, channelId: string, userId: string): Promise<boolean> {
  let cursor: string | undefined;
  for (let page = 0; page < MEMBER_PAGES; page++) {
    const res = await client.conversations.members({ channel: channelId, limit: 1000, ...(cursor ? { cursor } : {}) });
    if (res.members?.includes(userId)) return true;
    cursor = res.response_metadata?.next_cursor || undefined;
    if (!cursor) return false;
  }
  return false;
}

/** Whether the asker may see the run. Unknown (Slack unreachable) counts as no. */
export async function maySeeRun(client: WebClient, deps: FeatureDeps, execution: Execution, asker: Asker): Promise<boolean> {
  if (asker.userId === execution.userId || asker.channelId === execution.channelId) return true;
  if (
    deps.reviewers?.rulesFor(execution.crewName) !== undefined &&
    (await deps.reviewers.mayDecide(execution.crewName, asker.userId, { teamId: execution.teamId, enterpriseId: execution.enterpriseId }).catch(() => false))
  )
    return true;
  try {
    return await isChannelMember(client, execution.channelId, asker.userId);
  } catch (err) {
    deps.log.warn("could not read the run's channel members", { executionId: execution.id, err });
    return false;
  }
}

/** The run behind a kickoff id, if the asker may see it; undefined otherwise (same as unknown). */
export async function visibleRun(client: WebClient, deps: FeatureDeps, kickoffId: string, asker: Asker): Promise<Execution | undefined> {
  const execution = await deps.lifecycle.runs.findByKickoffId(kickoffId);
  if (!execution) return undefined;
  return (await maySeeRun(client, deps, execution, asker)) ? execution : undefined;
}

/** Whether a click on the message at (channelId, messageTs) may decide this review. */
export async function clickMayDecide(
  client: WebClient,
  deps: FeatureDeps,
  found: Review & { execution: Execution },
  click: { userId: string; channelId?: string; messageTs?: string },
): Promise<boolean> {
  if (!click.channelId || !click.messageTs) return false;
  if (found.execution.channelId !== click.channelId || found.messageTs !== click.messageTs) return false;
  return mayActOnReview(client, deps, found, { userId: click.userId, channelId: click.channelId });
}

/** Whether the asker may see (and so try to decide) this review: who may see its run, and whoever it was reassigned or escalated to. */
export async function mayActOnReview(client: WebClient, deps: FeatureDeps, found: Review & { execution: Execution }, asker: Asker): Promise<boolean> {
  if (deps.reviewers && (await deps.reviewers.isGranted(found, asker.userId).catch(() => false))) return true;
  return maySeeRun(client, deps, found.execution, asker);
}
