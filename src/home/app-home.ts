// App Home: on app_home_opened, publish the user's reviews waiting, recent runs and startable crews.
// Reviews shown are those the user may decide: by the crew's reviewer rules, or, for crews without
// rules, the runs the user started (so nobody sees reviews from channels they may not be in).
import type { App } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import type { Db } from "../db/database.js";
import { type Clock, systemClock } from "../lifecycle/ports.js";
import { ACTIVE_STATES } from "../lifecycle/states.js";
import { HOME_MAX_REVIEWS, HOME_MAX_RUNS, type HomeParams, homeView } from "../slack/blocks/home.js";
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
    where: { state: "pending", messageTs: { not: null }, execution: { state: { in: [...ACTIVE_STATES] }, ...sameTeam } },
    include: { execution: true },
    orderBy: { createdAt: "asc" },
    take: 500,
  });
  const mine = [];
  for (const review of pending) {
    const { execution } = review;
    const rules = deps.reviewers?.rulesFor(execution.crewName);
    const may = rules
      ? await deps.reviewers!.mayDecide(execution.crewName, userId, { teamId: execution.teamId, enterpriseId: execution.enterpriseId })
      : execution.userId === userId;
    if (may) mine.push(review);
  }
  const reviews = await Promise.all(
    mine.map(async (r, i) => ({
      crewName: r.execution.crewName,
      taskName: r.taskName,
      round: r.round,
      waitingMs: now.getTime() - r.createdAt.getTime(),
      channelId: r.execution.channelId,
      permalink: i < HOME_MAX_REVIEWS ? await permalink(r.execution.channelId, r.messageTs!, r.execution.threadTs ?? undefined) : undefined,
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

export function registerAppHome(app: App, deps: FeatureDeps, home: HomeDeps): void {
  // One per workspace: each has its own URL (and, when installed in many, its own token).
  const permalinks = new Map<string, ReturnType<typeof permalinkBuilder>>();
  app.event("app_home_opened", async ({ event, client, context }) => {
    if (event.tab && event.tab !== "home") return;
    const teamId = context.teamId ?? undefined;
    const key = `${context.enterpriseId ?? ""}/${teamId ?? ""}`;
    const permalink = permalinks.get(key) ?? permalinkBuilder(client);
    permalinks.set(key, permalink);
    try {
      const params = await homeFor(deps, home, permalink, event.user, teamId);
      await client.views.publish({ user_id: event.user, view: homeView(params) });
    } catch (err) {
      deps.log.warn("could not publish the home tab", { user: event.user, err });
    }
  });
}
