// App Home: on app_home_opened, publish the user's reviews waiting, recent runs and startable crews.
// Reviews shown are those the user may decide: by the crew's reviewer rules, or, for crews without
// rules, the runs the user started (so nobody sees reviews from channels they may not be in).
import type { App } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import { z } from "zod";
import type { TimeoutAction } from "../config.js";
import type { Db } from "../db/database.js";
import { flowReplyFor } from "../flows/handlers.js";
import type { FlowDecisionOutcome } from "../flows/service.js";
import type { DecisionOutcome } from "../lifecycle/index.js";
import { type Clock, systemClock } from "../lifecycle/ports.js";
import { LIVE_STATES } from "../lifecycle/states.js";
import { mayActOnReview } from "../review/access.js";
import { NOT_RECORDED, replyFor } from "../review/actions.js";
import { HOME_MAX_REVIEWS, HOME_MAX_RUNS, type HomeParams, type HomeReview, homeView } from "../slack/blocks/home.js";
import { deadlineText, escapeMrkdwn, HOME_APPROVE_ACTION, HOME_FLOW_APPROVE_ACTION, truncatePlain, userMention } from "../slack/blocks/index.js";
import type { FeatureDeps } from "../slack/deps.js";

export interface HomeDeps {
  db: Db;
  clock?: Clock;
}

/** Builds thread permalinks locally from the workspace URL (one auth.test), not one call per link. */
export function permalinkBuilder(client: WebClient) {
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

export async function homeFor(deps: FeatureDeps, home: HomeDeps, permalink: ReturnType<typeof permalinkBuilder>, userId: string, teamId?: string): Promise<HomeParams> {
  const now = (home.clock ?? systemClock).now();
  // Installed in many workspaces, a Home shows its own workspace's runs only.
  const sameTeam = deps.multiWorkspace && teamId ? { teamId } : {};
  const pending = await home.db.review.findMany({
    where: { state: "pending", messageTs: { not: null }, execution: { state: { in: [...LIVE_STATES] }, ...sameTeam } },
    include: { execution: true },
    orderBy: { createdAt: "asc" },
    take: 500,
  });
  // Someone who approved a review still waiting for more approvals is not waited for.
  const approved = new Set(
    (await home.db.reviewApproval.findMany({ where: { userId, reviewId: { in: pending.map((r) => r.id) } }, select: { reviewId: true } })).map((a) => a.reviewId),
  );
  const mine = [];
  for (const review of pending) {
    if (approved.has(review.id)) continue;
    const { execution } = review;
    const rules = deps.reviewers?.rulesFor(execution.crewName);
    const team = { teamId: execution.teamId, enterpriseId: execution.enterpriseId };
    // Reassigned or escalated to this user: theirs to decide, whatever the crew's rules say.
    const granted = !!deps.reviewers && (await deps.reviewers.isGranted(review, userId, team));
    const may = granted || (rules ? await deps.reviewers!.mayDecide(execution.crewName, userId, team) : execution.userId === userId);
    if (may) mine.push(review);
  }
  const reviews: HomeReview[] = await Promise.all(
    mine.map(async (r, i) => ({
      crewName: r.execution.crewName,
      taskName: r.taskName,
      round: r.round,
      waitingMs: now.getTime() - r.createdAt.getTime(),
      channelId: r.execution.channelId,
      permalink: i < HOME_MAX_REVIEWS ? await permalink(r.execution.channelId, r.messageTs!, r.execution.threadTs ?? undefined) : undefined,
      // Approving needs no feedback: a crew review can be approved from here (rejecting needs the thread).
      approveReviewId: r.id,
      notes: [
        ...(r.reassignedTo === userId ? [`↪️ Reassigned to you${r.reassignedBy ? ` by ${userMention(r.reassignedBy)}` : ""}`] : []),
        ...(r.escalatedAt ? ["🔺 Escalated after its reminders"] : []),
        ...(r.decideBy && r.onTimeout && !r.deadlineHandledAt ? [deadlineText(r.decideBy, r.onTimeout as TimeoutAction, now)] : []),
      ],
    })),
  );
  // Flow feedback requests this user may answer (by the flow's reviewer rules, or as the assignee).
  const flowWaiting = (deps.flows ? await deps.flows.waitingFor(userId) : []).filter((r) => !sameTeam.teamId || r.teamId === sameTeam.teamId);
  const flowReviews = await Promise.all(
    flowWaiting.map(async (r, i) => ({
      crewName: `flow ${r.flowName}`,
      taskName: r.methodName ?? "feedback request",
      round: 1,
      waitingMs: now.getTime() - r.createdAt.getTime(),
      channelId: r.channelId,
      permalink: reviews.length + i < HOME_MAX_REVIEWS ? await permalink(r.channelId, r.messageTs!) : undefined,
      // An approve-like outcome needs no feedback: it can be chosen from here (others need the message).
      ...(deps.flows!.homeApproval(r) ? { approveFlowRequestId: r.id } : {}),
      notes: [
        ...(r.reassignedTo === userId ? [`↪️ Reassigned to you${r.reassignedBy ? ` by ${userMention(r.reassignedBy)}` : ""}`] : []),
        ...(r.escalatedAt ? ["🔺 Escalated after its reminders"] : []),
        ...(r.decideBy && r.onTimeout && !r.deadlineHandledAt ? [deadlineText(r.decideBy, r.onTimeout as TimeoutAction, now)] : []),
      ],
    })),
  );
  reviews.push(...flowReviews);
  const executions = await home.db.execution.findMany({ where: { userId, ...sameTeam }, orderBy: { createdAt: "desc" }, take: HOME_MAX_RUNS + 1 });
  const runs = await Promise.all(
    executions.map(async (e) => ({
      crewName: e.crewName,
      state: e.state,
      channelId: e.channelId,
      kickoffId: e.kickoffId ?? undefined,
      startedAt: e.startedAt ?? e.createdAt,
      permalink: e.threadTs ? await permalink(e.channelId, e.threadTs) : undefined,
    })),
  );
  const crews = deps.crews.usableBy(teamId).map((c) => ({ name: c.name, ...(c.channels ? { channels: c.channels } : {}) }));
  return { userId, reviews, runs, crews, now, flows: deps.flowHooks };
}

const homeApproveClick = z.object({
  user: z.object({ id: z.string() }),
  actions: z.array(z.object({ action_id: z.string(), value: z.string().max(100) })).min(1),
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What the Home tab says after an Approve clicked there. */
export function homeNotice(outcome: DecisionOutcome | undefined, taskName: string): string {
  if (!outcome) return "I can't find this review any more, so nothing was sent to the crew.";
  if (outcome.kind === "decided") return `✅ You approved *${escapeMrkdwn(truncatePlain(taskName, 150))}*; the crew goes on.`;
  return replyFor(outcome) ?? "Nothing changed.";
}

/** What the Home tab says after Approve clicked there on a flow request. */
export function homeFlowNotice(outcome: FlowDecisionOutcome | undefined, what: string): string {
  if (!outcome) return "I can't find this request any more, so nothing was sent to the flow.";
  if (outcome.kind === "answered") return `✅ You approved *${escapeMrkdwn(truncatePlain(what, 150))}*; the flow goes on.`;
  return flowReplyFor(outcome) ?? "Nothing changed.";
}

/** Publishes a user's Home tab (optionally with a notice at the top); failures are logged, never thrown. */
export function homePublisher(deps: FeatureDeps, home: HomeDeps) {
  // One per workspace: each has its own URL (and, when installed in many, its own token).
  const permalinks = new Map<string, ReturnType<typeof permalinkBuilder>>();
  return async (client: WebClient, userId: string, notice?: string, team?: { teamId?: string; enterpriseId?: string }): Promise<void> => {
    const key = `${team?.enterpriseId ?? ""}/${team?.teamId ?? ""}`;
    const permalink = permalinks.get(key) ?? permalinkBuilder(client);
    permalinks.set(key, permalink);
    try {
      const params = await homeFor(deps, home, permalink, userId, team?.teamId);
      await client.views.publish({ user_id: userId, view: homeView({ ...params, ...(notice ? { notice } : {}) }) });
    } catch (err) {
      deps.log.warn("could not publish the home tab", { user: userId, err });
    }
  };
}

export function registerAppHome(app: App, deps: FeatureDeps, home: HomeDeps): void {
  const publish = homePublisher(deps, home);
  // Someone handed a review (reassign.ts) finds it on their Home tab at once.
  deps.publishHome = (userId) => publish(app.client, userId);
  app.event("app_home_opened", async ({ event, client, context }) => {
    if (event.tab && event.tab !== "home") return;
    await publish(client, event.user, undefined, { teamId: context.teamId ?? undefined, enterpriseId: context.enterpriseId ?? undefined });
  });

  // Approve from the Home tab: the same rules (who may see the run or was handed the review, the
  // reviewer gate) and the same exactly-once decision as a click in the thread; then the tab is
  // published again, saying what happened.
  app.action(HOME_APPROVE_ACTION, async ({ ack, body, client, context }) => {
    await ack();
    const click = homeApproveClick.safeParse(body);
    if (!click.success) return void deps.log.warn("home approve with an unexpected payload");
    const userId = click.data.user.id;
    const reviewId = click.data.actions[0]!.value;
    let notice: string;
    try {
      const found = UUID.test(reviewId) ? await deps.lifecycle.reviews.get(reviewId) : null;
      if (!found || !(await mayActOnReview(client, deps, found, { userId }))) notice = homeNotice(undefined, "");
      else notice = homeNotice(await deps.lifecycle.reviews.decide({ reviewId, userId, approve: true, feedback: "" }), found.taskName);
    } catch (err) {
      deps.log.error("home approval could not be recorded", { err });
      notice = NOT_RECORDED;
    }
    await publish(client, userId, notice, { teamId: context.teamId ?? undefined, enterpriseId: context.enterpriseId ?? undefined });
  });

  // Approve a flow request from the Home tab: only one listed there for this user (assigned, handed or
  // escalated to them, or by the flow's rules), with the flow's approve-like outcome, through the same
  // decide() (reviewer rules, approvals, the exactly-once claim) as a click on its message.
  app.action(HOME_FLOW_APPROVE_ACTION, async ({ ack, body, client, context }) => {
    await ack();
    const click = homeApproveClick.safeParse(body);
    if (!click.success || !deps.flows) return void deps.log.warn("home flow approve with an unexpected payload");
    const userId = click.data.user.id;
    let notice: string;
    try {
      const request = await deps.flows.get(click.data.actions[0]!.value);
      const approval = request ? deps.flows.homeApproval(request) : undefined;
      if (!request || !approval || !(await deps.flows.isWaitingFor(request, userId))) notice = homeFlowNotice(undefined, "");
      else
        notice = homeFlowNotice(
          await deps.flows.decide({ requestId: request.id, userId, outcomeIndex: approval.index, feedback: "", fromHome: true }),
          `${request.flowName}${request.methodName ? ` · ${request.methodName}` : ""}`,
        );
    } catch (err) {
      deps.log.error("home flow approval could not be recorded", { err });
      notice = NOT_RECORDED;
    }
    await publish(client, userId, notice, { teamId: context.teamId ?? undefined, enterpriseId: context.enterpriseId ?? undefined });
  });
}
