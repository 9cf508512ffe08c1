// Modal and Home tab calls made in a Slack request's own answer (views.open, views.update,
// views.publish) take their token from the workspace's Tier 4 bucket first, which the outbox's Tier 4
// calls (a live plan's appends, permalinks, files) spend too, so that together they stay within Slack's
// limit (docs/slack-budget.md). They are what a person waits on (priority 0). views.open never waits:
// its trigger_id lives 3 s, so it is counted and goes.
import type { types } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import type { FeatureDeps } from "./deps.js";

export type ViewMethod = "views.open" | "views.update" | "views.publish";

export async function spendOnView(deps: Pick<FeatureDeps, "spendSlack">, team: string | undefined, method: ViewMethod): Promise<void> {
  if (!team || !deps.spendSlack) return;
  await deps.spendSlack({ team, method }, method === "views.open" ? 0 : undefined).catch(() => undefined);
}

/** views.update, its token taken first. */
export async function updateView(
  client: WebClient,
  deps: Pick<FeatureDeps, "spendSlack">,
  team: string | undefined,
  args: { view_id: string; hash?: string; view: types.ModalView },
) {
  await spendOnView(deps, team, "views.update");
  return client.views.update(args);
}
