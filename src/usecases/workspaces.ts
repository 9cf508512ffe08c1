// A workspace that removed the app (app_uninstalled, tokens_revoked): its unfinished runs end as
// "uninstalled" (the watcher polls only unfinished runs, reminders only live ones, callbacks skip
// finished ones), its open reviews and flow requests close, so nothing more is posted or polled for
// it. Other workspaces' rows are not touched. The rows are written by src/store/workspaces.ts (one
// transaction); the Slack side is src/adapters/slack/uninstall.ts.

import { executionTransition, flowRequestTransition, reviewTransition } from "../domain/states.js";
import type { Sql } from "../store/sql.js";
import { closeWorkspace, type WorkspaceMatch } from "../store/workspaces.js";

export const UNINSTALLED_NOTE = "Crewline was removed from this workspace";

export function stopWorkspace(db: Sql, match: WorkspaceMatch, now: Date): Promise<{ runs: number; reviews: number; flowRequests: number }> {
  return closeWorkspace(
    db,
    match,
    {
      runs: executionTransition("uninstalled"),
      reviews: reviewTransition("workspace_removed"),
      flowRequests: flowRequestTransition("workspace_removed"),
      note: UNINSTALLED_NOTE,
      effectsError: "the app was removed from this workspace",
    },
    now,
  );
}
