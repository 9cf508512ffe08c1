// What every Slack feature handler may use; built once by the composition root.

import type { WebClient } from "@slack/web-api";
import type { Logger } from "../../log/log.js";
import type { SlackCall } from "../../outbox/budget.js";
import type { FlowRequests } from "../../usecases/flows.js";
import type { Lifecycle } from "../../usecases/lifecycle.js";
import type { MembershipCache } from "../../usecases/membership-cache.js";
import type { Execution, TeamRef, WebhookUrls } from "../../usecases/ports.js";
import type { ReviewRequests } from "../../usecases/review-requests.js";
import type { ReviewerRules } from "../../usecases/reviewer-rules.js";
import type { CrewRegistry } from "../crew/registry.js";
import type { SlackClients } from "./clients.js";

/** A workspace and its Grid org, as Slack names them. */
export type Workspace = { teamId?: string; enterpriseId?: string };

/** The workspace one bot token is installed in (adapters/slack/access.ts tokenWorkspace): asked of auth.test at start, again while Slack has not said. */
export interface TokenWorkspace {
  /** As known now (undefined until auth.test answered). */
  known(): Workspace | undefined;
  /** As known within `ms` (asked again if an earlier ask failed). */
  within(ms: number): Promise<Workspace | undefined>;
}

export interface FeatureDeps {
  lifecycle: Lifecycle;
  crews: CrewRegistry;
  log: Logger;
  /** Whether crew webhooks can reach this bot (PUBLIC_URL is set). */
  webhooksEnabled: boolean;
  webhookUrls: (execution: Execution) => WebhookUrls | undefined;
  /** Reviewer rules (who may decide); unset: anyone may. */
  reviewers?: ReviewerRules;
  /** Key that seals kickoff forms to their user and channel (adapters/slack/kickoff/form-binding.ts). */
  formKey?: string;
  /** Called once a run has started, so it is watched (status polling). */
  onRunStarted?: (execution: Execution) => void;
  /** Flow feedback requests (App Home lists those waiting for the user). */
  flows?: FlowRequests;
  /** Publishes a user's App Home again (set by the Home feature), with the client of the workspace given. */
  publishHome?: (userId: string, team?: TeamRef) => Promise<void>;
  /** Reassignment (and escalation) of pending reviews. */
  reviewRequests?: ReviewRequests;
  /** Each configured flow's webhook URL and workspace, for admins (`/crew help`, App Home: flowHooksFor). */
  flowHooks?: FlowHook[];
  /** Installed in many workspaces (OAuth): views list only the asking workspace's runs and requests. */
  multiWorkspace?: boolean;
  /** With one bot token: the workspace it is installed in (auth.test at start). Unset with OAuth: a request's installation is its own. */
  installation?: TokenWorkspace;
  /** Channel member lists, cached briefly for the access checks (adapters/slack/access.ts). */
  channelMembers?: MembershipCache<WebClient>;
  /**
   * Takes the token of a Web API call made in a request's own answer from the outbox's Slack budget
   * (src/outbox/budget.ts: SlackBudget.spendNow), so that it and the outbox's calls stay within Slack's
   * limits together: the run's announcement posted at kickoff, the kickoff modal's views. It waits for
   * the token up to `maxWaitMs` (default 3 s), then goes, counted. Unset (budget off): it just goes.
   */
  spendSlack?: (call: SlackCall, maxWaitMs?: number) => Promise<void>;
  /** Web API clients that never retry by themselves, per workspace: for posts that must not show twice (kickoff/submit.ts). */
  oneShotClients?: SlackClients;
}

/** A flow's webhook URL, shown to admins, and the workspace (team id) its requests are posted in. */
export interface FlowHook {
  name: string;
  webhookUrl: string;
  team?: string;
}

/**
 * The flows a workspace is shown (`/crew help`, App Home): installed in many workspaces, only the
 * flows of the asking workspace (a flow with no workspace: nowhere); with one bot token, every flow.
 */
export function flowHooksFor(deps: Pick<FeatureDeps, "flowHooks" | "multiWorkspace">, teamId: string | undefined): FlowHook[] {
  const hooks = deps.flowHooks ?? [];
  return deps.multiWorkspace ? hooks.filter((hook) => !!hook.team && hook.team === teamId) : hooks;
}
