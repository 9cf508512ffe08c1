// The composition root's Slack handlers: FeatureDeps, complete before any handler is registered, every
// feature's handlers (and the uninstall's), and the count of handlers still at work after their ack().
//
import type { App } from "@slack/bolt";
import type { CrewRegistry } from "../adapters/crew/registry.js";
import { channelMembersCache } from "../adapters/slack/access.js";
import { registerDecisionClicks } from "../adapters/slack/decisions/clicks.js";
import { registerDecisionEdit } from "../adapters/slack/decisions/edit.js";
import { registerDecisionReassign } from "../adapters/slack/decisions/reassign.js";
import type { FeatureDeps, FlowHook } from "../adapters/slack/deps.js";
import { homeRepublisher, registerAppHome } from "../adapters/slack/home/home.js";
import { registerCrewCommand } from "../adapters/slack/kickoff/command.js";
import { registerCrewPicker } from "../adapters/slack/kickoff/modal.js";
import { registerMessageShortcut } from "../adapters/slack/kickoff/shortcut.js";
import { registerKickoffSubmission } from "../adapters/slack/kickoff/submit.js";
import { registerReplyDecisions } from "../adapters/slack/reply/handlers.js";
import { registerStopActions } from "../adapters/slack/review/stop.js";
import { registerUninstall } from "../adapters/slack/uninstall.js";
import type { AppConfig } from "../config/config.js";
import type { Logger } from "../log/log.js";
import { HomeStore } from "../store/home.js";
import type { Sql } from "../store/sql.js";
import type { Clock } from "../usecases/ports.js";
import { ReplyDecisions } from "../usecases/reply-decisions.js";
import type { CrewlineOutbox } from "./outbox.js";
import type { CrewlineSlackClients } from "./slack-clients.js";
import type { UseCases } from "./use-cases.js";

export interface SlackHandlersOptions {
  app: App;
  config: AppConfig;
  db: Sql;
  log: Logger;
  clock: Clock;
  crews: CrewRegistry;
  webhookUrls: FeatureDeps["webhookUrls"];
  flowHooks: FlowHook[];
  useCases: Pick<UseCases, "lifecycle" | "reviewers" | "flows" | "reviewRequests" | "watcher">;
  slack: CrewlineSlackClients;
  /** The outbox's Slack budget for a request's own answer (root/outbox.ts); unset when the budget is off. */
  spendSlack?: CrewlineOutbox["spendSlack"];
}

export interface SlackHandlers {
  /** Slack events acknowledged and still being handled. */
  busy(): boolean;
  /** Handlers already answered and still working (a kickoff storing its crew's answer) finish first, for a while. */
  handlersDone(withinMs: number): Promise<void>;
}

export function registerSlackHandlers(o: SlackHandlersOptions): SlackHandlers {
  const { app, config, db, log, clock, slack } = o;
  const { lifecycle, reviewers, flows, reviewRequests, watcher } = o.useCases;
  const homeDeps = { store: new HomeStore(db), clock, clients: slack.clients };
  const features: FeatureDeps = {
    lifecycle,
    crews: o.crews,
    log,
    webhooksEnabled: !!config.publicUrl,
    webhookUrls: o.webhookUrls,
    reviewers,
    flows,
    flowHooks: o.flowHooks,
    // Seals kickoff forms to their user and channel (adapters/slack/kickoff/form-binding.ts); a secret the bot already has.
    formKey: config.slack.signingSecret ?? config.slack.appToken ?? config.slack.botToken,
    multiWorkspace: !!config.slack.oauth,
    ...(slack.installation ? { installation: slack.installation } : {}),
    reviewRequests,
    channelMembers: channelMembersCache(clock),
    oneShotClients: slack.oneShot,
    ...(o.spendSlack ? { spendSlack: o.spendSlack } : {}),
    onRunStarted: (execution) => void watcher.watch(execution.id).catch((err) => log.warn("could not schedule status polling", { err })),
  };
  const deps: FeatureDeps = { ...features, publishHome: homeRepublisher(features, homeDeps) };
  registerCrewCommand(app, deps);
  registerCrewPicker(app, deps);
  registerKickoffSubmission(app, deps);
  registerMessageShortcut(app, deps);
  registerDecisionClicks(app, deps);
  registerDecisionEdit(app, deps);
  registerDecisionReassign(app, deps);
  registerReplyDecisions(app, deps, new ReplyDecisions({ db, reviews: lifecycle.reviews, flows, log, clock }));
  registerStopActions(app, deps);
  registerAppHome(app, deps, homeDeps);
  if (slack.installations)
    registerUninstall(app, {
      db,
      installations: slack.installations,
      // Every client cache (request path, its one-shot posts, outbox) drops an uninstalled workspace at once.
      clients: { forget: (match) => slack.forget(match) },
      runsEnded: () => lifecycle.callbacks.forgetLive(),
      log,
      clock,
    });
  app.error(async (error) => log.error("slack handler failed", { err: error }));
  // Bolt answers Slack on ack() and goes on handling the event; counted so that a stop (and a test)
  // can wait for the end.
  let handling = 0;
  const handled: (() => void)[] = [];
  app.use(async ({ next }) => {
    handling++;
    try {
      await next();
    } finally {
      handling--;
      if (handling === 0) handled.splice(0).forEach((resolve) => resolve());
    }
  });
  return {
    busy: () => handling > 0,
    handlersDone: (withinMs) =>
      handling === 0
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, withinMs);
            timer.unref();
            handled.push(() => {
              clearTimeout(timer);
              resolve();
            });
          }),
  };
}
