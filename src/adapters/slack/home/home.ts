// App Home (the Slack adapter): on app_home_opened, publish what usecases/home-for.ts lists for the
// user (reviews and flow requests waiting for them, recent runs, startable crews) as the Home view.
// Who sees what is decided by usecases/access.ts; the rows come from store/home.ts, through homeFor.

import type { App } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import { z } from "zod";
import type { TimeoutAction } from "../../../config/config.js";
import { approvalPolicy, selfApprovalRefused } from "../../../domain/approvals.js";
import { reviewChannel } from "../../../domain/refusals.js";
import type { HomeFlowRequest } from "../../../store/flow-requests.js";
import type { HomeStore } from "../../../store/home.js";
import { type AccessPorts, mayAnswerFlowRequestFromHome, mayApproveFromHome } from "../../../usecases/access.js";
import type { FlowDecisionOutcome } from "../../../usecases/flows.js";
import { type HomeListing, homeFor } from "../../../usecases/home-for.js";
import type { DecisionOutcome } from "../../../usecases/lifecycle.js";
import { type Clock, systemClock, type TeamRef } from "../../../usecases/ports.js";
import { accessPorts, slackChannelMembers } from "../access.js";
import { HOME_MAX_REVIEWS, HOME_MAX_RUNS, type HomeParams, type HomeReview, homeView } from "../blocks/home.js";
import { deadlineText, escapeMrkdwn, HOME_APPROVE_ACTION, HOME_FLOW_APPROVE_ACTION, truncatePlain, userMention } from "../blocks/index.js";
import type { SlackClients } from "../clients.js";
import { type DecisionKind, decisionReply, NOT_RECORDED, WORDS } from "../decisions/replies.js";
import { type FeatureDeps, flowHooksFor } from "../deps.js";
import { spendOnView } from "../views.js";

export interface HomeDeps {
  /** The rows a Home lists (the composition root opens it on the database). */
  store: HomeStore;
  clock?: Clock;
}

/** Builds thread permalinks locally from the workspace URL (one auth.test), not one call per link. */
function permalinkBuilder(client: WebClient) {
  let base: Promise<string | undefined> | undefined;
  return async (channel: string, ts: string, threadTs?: string): Promise<string | undefined> => {
    base ??= client.auth
      .test()
      .then((r) => (r.url ? r.url.replace(/\/+$/, "") : undefined))
      .catch(() => {
        base = undefined;
        return undefined;
      });
    const url = await base;
    if (!url) return undefined;
    const thread = threadTs && threadTs !== ts ? `?thread_ts=${threadTs}&cid=${channel}` : "";
    return `${url}/archives/${channel}/p${ts.replace(".", "")}${thread}`;
  };
}
type Permalinks = ReturnType<typeof permalinkBuilder>;

/** The Home view's parameters for what homeFor lists (with thread permalinks, notes and deadlines). */
async function homeParams(listing: HomeListing<HomeFlowRequest>, permalink: Permalinks, deps: FeatureDeps, flowHooks: HomeParams["flows"]): Promise<HomeParams> {
  const { userId, now } = listing;
  const notes = (r: (typeof listing.reviews)[number] | HomeFlowRequest) => [
    ...(r.reassignedTo === userId ? [`↪️ Reassigned to you${r.reassignedBy ? ` by ${userMention(r.reassignedBy)}` : ""}`] : []),
    ...(r.escalatedAt ? ["🔺 Escalated after its reminders"] : []),
    ...(r.decideBy && r.onTimeout && !r.deadlineHandledAt ? [deadlineText(r.decideBy, r.onTimeout as TimeoutAction, now)] : []),
  ];
  const reviews: HomeReview[] = await Promise.all(
    listing.reviews.map(async (r, i) => ({
      crewName: r.execution.crewName,
      taskName: r.taskName,
      round: r.round,
      waitingMs: now.getTime() - r.createdAt.getTime(),
      // Its message is in its run's thread, or in the direct message the run moved to when Slack refused its channel.
      channelId: reviewChannel(r, r.execution),
      permalink: i < HOME_MAX_REVIEWS ? await permalink(reviewChannel(r, r.execution), r.messageTs!, r.channelId ? undefined : (r.execution.threadTs ?? undefined)) : undefined,
      // Approving needs no feedback: a crew review can be approved from here (rejecting needs the thread),
      // unless its crew wants someone other than the run's starter to approve.
      ...(selfApprovalRefused(approvalPolicy(deps.crews.config(r.execution.crewName)), r.execution.userId, userId)
        ? { notes: [...notes(r), "You started this run: someone else approves it (you may reject it in the thread)"] }
        : { approveReviewId: r.id, notes: notes(r) }),
    })),
  );
  const flowReviews = await Promise.all(
    listing.flowRequests.map(async (r, i) => ({
      crewName: `flow ${r.flowName}`,
      taskName: r.methodName ?? "feedback request",
      round: 1,
      waitingMs: now.getTime() - r.createdAt.getTime(),
      channelId: r.channelId,
      permalink: reviews.length + i < HOME_MAX_REVIEWS ? await permalink(r.channelId, r.messageTs!) : undefined,
      // An approve-like outcome needs no feedback: it can be chosen from here (others need the message).
      ...(deps.flows?.homeApproval(r) ? { approveFlowRequestId: r.id } : {}),
      notes: notes(r),
    })),
  );
  reviews.push(...flowReviews);
  const runs = await Promise.all(
    listing.runs.map(async (e) => ({
      crewName: e.crewName,
      state: e.state,
      channelId: e.channelId,
      kickoffId: e.kickoffId ?? undefined,
      startedAt: e.startedAt ?? e.createdAt,
      permalink: e.threadTs ? await permalink(e.channelId, e.threadTs) : undefined,
    })),
  );
  const withheld = listing.withheld.map((w) => ({ channelId: w.channelId, ...(w.why ? { why: w.why } : {}) }));
  return { userId, reviews, withheld, runs, crews: listing.crews, now, flows: flowHooks };
}

const homeApproveClick = z.object({
  user: z.object({ id: z.string() }),
  actions: z.array(z.object({ action_id: z.string(), value: z.string().max(100) })).min(1),
});

/** What the Home tab says after Approve clicked there on a review or a flow request (`what` names it). */
function homeNotice(kind: DecisionKind, outcome: DecisionOutcome | FlowDecisionOutcome | undefined, what: string, asker?: string): string {
  const w = WORDS[kind];
  if (!outcome) return `I can't find this ${w.noun} any more, so nothing was sent to the ${w.receiver}.`;
  if (outcome.kind === "decided" || outcome.kind === "answered") return `✅ You approved *${escapeMrkdwn(truncatePlain(what, 150))}*; the ${w.receiver} goes on.`;
  return decisionReply(kind, outcome, asker) ?? "Nothing changed.";
}

/** Publishes a user's Home tab (optionally with a notice at the top); failures are logged, never thrown. */
function homePublisher(deps: FeatureDeps, home: HomeDeps) {
  // One per workspace: each has its own URL (and, when installed in many, its own token).
  const permalinks = new Map<string, Permalinks>();
  const homeDeps = {
    store: home.store,
    ...(deps.flows ? { flows: deps.flows } : {}),
    crews: deps.crews,
    clock: home.clock ?? systemClock,
    multiWorkspace: deps.multiWorkspace,
    maxRuns: HOME_MAX_RUNS + 1,
  };
  return async (client: WebClient, userId: string, notice?: string, team?: { teamId?: string; enterpriseId?: string | null }): Promise<void> => {
    const key = `${team?.enterpriseId ?? ""}/${team?.teamId ?? ""}`;
    const permalink = permalinks.get(key) ?? permalinkBuilder(client);
    permalinks.set(key, permalink);
    try {
      // Who may see a listed review's run: its channel's members, read with this workspace's client
      // through the one member cache every access check shares.
      const access = {
        members: slackChannelMembers(client, deps.channelMembers),
        ...(deps.reviewers ? { reviewers: deps.reviewers } : {}),
        warn: (message: string, fields: Record<string, unknown>) => deps.log.warn(message, fields),
      };
      const listing = await homeFor({ ...homeDeps, access }, userId, team?.teamId);
      const params = await homeParams(listing, permalink, deps, flowHooksFor(deps, team?.teamId));
      await spendOnView(deps, team?.teamId, "views.publish");
      await client.views.publish({ user_id: userId, view: homeView({ ...params, ...(notice ? { notice } : {}) }) });
    } catch (err) {
      deps.log.warn("could not publish the home tab", { user: userId, err });
    }
  };
}

/**
 * Publishes a user's Home again outside a request (FeatureDeps.publishHome): someone handed a review
 * (reassign.ts) finds it on their Home tab at once, published with the token of the review's workspace
 * (installed in many workspaces, the app-level client has none of theirs).
 */
export function homeRepublisher(deps: FeatureDeps, home: HomeDeps & { clients: SlackClients }) {
  const publish = homePublisher(deps, home);
  return async (userId: string, team?: TeamRef): Promise<void> => {
    let client: WebClient;
    try {
      client = await home.clients.forTeam(team?.teamId ?? "", team?.enterpriseId);
    } catch (err) {
      return void deps.log.warn("could not publish the home tab: no client for the workspace", { user: userId, err });
    }
    await publish(client, userId, undefined, team);
  };
}

export function registerAppHome(app: App, deps: FeatureDeps, home: HomeDeps): void {
  const publish = homePublisher(deps, home);
  app.event("app_home_opened", async ({ event, client, context }) => {
    if (event.tab && event.tab !== "home") return;
    await publish(client, event.user, undefined, context);
  });

  // Approve from the Home tab, a review or a flow request (with the flow's approve-like outcome, and
  // only one listed there for this user): the same rules and the same exactly-once decision as a click
  // on its message; then the tab is published again, saying what happened. Only what this user's Home
  // lists may be approved there (not every review they may see elsewhere), in the workspace it is in.
  const approvals: Record<string, (id: string, userId: string, access: AccessPorts) => Promise<string>> = {
    [HOME_APPROVE_ACTION]: async (reviewId, userId, access) => {
      const found = await deps.lifecycle.reviews.get(reviewId);
      if (!found || !(await mayApproveFromHome(access, found, userId))) return homeNotice("review", undefined, "");
      return homeNotice("review", await deps.lifecycle.reviews.decide({ reviewId, userId, approve: true, feedback: "" }), found.taskName, userId);
    },
    [HOME_FLOW_APPROVE_ACTION]: async (id, userId, access) => {
      const flows = deps.flows;
      const request = flows ? await flows.get(id) : null;
      const approval = request ? flows!.homeApproval(request) : undefined;
      if (!flows || !request || !approval || !(await mayAnswerFlowRequestFromHome(access, request, userId))) return homeNotice("flow", undefined, "");
      const outcome = await flows.decide({ requestId: request.id, userId, outcomeIndex: approval.index, feedback: "", fromHome: true });
      return homeNotice("flow", outcome, `${request.flowName}${request.methodName ? ` · ${request.methodName}` : ""}`, userId);
    },
  };
  for (const [actionId, approve] of Object.entries(approvals))
    app.action(actionId, async ({ ack, body, client, context }) => {
      await ack();
      const click = homeApproveClick.safeParse(body);
      if (!click.success) return void deps.log.warn("home approve with an unexpected payload", { actionId });
      const userId = click.data.user.id;
      let notice: string;
      try {
        notice = await approve(click.data.actions[0]!.value, userId, accessPorts(client, deps, context, body));
      } catch (err) {
        deps.log.error("home approval could not be recorded", { actionId, err });
        notice = NOT_RECORDED;
      }
      await publish(client, userId, notice, context);
    });
}
