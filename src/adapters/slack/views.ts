// Modal and Home tab calls made in a Slack request's own answer (views.open, views.update,
// views.publish) take their token from the workspace's Tier 4 bucket first, which the outbox's Tier 4
// calls (a live plan's appends, permalinks, files) spend too, so that together they stay within Slack's
// limit (docs/slack-budget.md). They are what a person waits on (priority 0), and may go one burst past
// the outbox's bucket before they wait (SlackCall.burstTolerated). views.open never waits: its trigger_id
// lives 3 s, so it is counted and goes, and a slow database does not hold it up.
import type { types } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import { within } from "../../usecases/within.js";
import type { FeatureDeps } from "./deps.js";

export type ViewMethod = "views.open" | "views.update" | "views.publish";

/**
 * How long a call waits for its token at most, the database's answer included: a views.open must not
 * lose its trigger, and no modal may hang on a database that does not answer (the budget itself waits
 * up to 3 s for a token, then counts the call and lets it go).
 */
const SPEND_MAX_MS = { open: 250, other: 3500 };

export async function spendOnView(deps: Pick<FeatureDeps, "spendSlack">, team: string | undefined, method: ViewMethod): Promise<void> {
  if (!team || !deps.spendSlack) return;
  const open = method === "views.open";
  const spent = deps.spendSlack({ team, method, burstTolerated: true }, open ? 0 : undefined).catch(() => undefined);
  await within(spent, open ? SPEND_MAX_MS.open : SPEND_MAX_MS.other, () => undefined);
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
