// Starting a crew from a submitted kickoff form: the crew must be startable there; one form starts one
// run (its nonce is the run's requestId, so a replay stores nothing); the run is announced in its
// channel (its thread hangs off that message; a run started from a message is announced in that
// message's thread instead), then the crew is kicked off with the run's webhooks.
// A run that could not start leaves nothing half-created visible. The Slack adapter
// (adapters/slack/kickoff/submit.ts) parses the form, calls startRun and shows the outcome in the modal.

import type { CrewConfig } from "../config/config.js";
import type { Logger } from "../log/log.js";
import { type InvalidInput, isCrewError } from "../protocols/crew/errors.js";
import type { CrewApi } from "../protocols/crew/types.js";
import type { Execution, WebhookUrls } from "./ports.js";
import type { Runs } from "./runs.js";

/** The run's announcement in its channel (the Slack adapter posts it with the request's client). */
export interface Announcements {
  /** Posts the announcement (as a reply in `threadTs` when given); its ts, or Slack's error code when it could not be posted. */
  post(execution: Execution, threadTs?: string): Promise<{ ts: string } | { error: string }>;
  /** Removes it again (best effort). */
  remove(execution: Execution, ts: string): Promise<void>;
}

export interface StartRunDeps {
  crews: { config(name: string): CrewConfig | undefined; get(name: string): Pick<CrewApi, "kickoff"> | undefined };
  runs: Pick<Runs, "findByRequestId" | "create" | "setThread" | "kickedOff" | "kickoffFailed">;
  announcements: Announcements;
  /** Whether crew webhooks can reach this bot (PUBLIC_URL is set). */
  webhooksEnabled: boolean;
  webhookUrls: (execution: Execution) => WebhookUrls | undefined;
  /** Called once a run has started, so it is watched (status polling). */
  onRunStarted?: (execution: Execution) => void;
  log: Logger;
}

export interface StartRunRequest {
  crewName: string;
  /** The workspace and channel the form was opened in (sealed in the form). */
  teamId: string;
  channelId: string;
  /** The Enterprise Grid org the form was submitted in, if any (finds an org-wide install's token). */
  enterpriseId?: string | null;
  userId: string;
  inputs: Record<string, string>;
  /** The form's nonce: one form starts one run. */
  requestId?: string;
  /** A run started from a message (the message shortcut): announced in that message's thread, its permalink in the kickoff's meta. */
  source?: { threadTs: string; permalink?: string };
}

export type StartRunOutcome =
  /** The crew may not be started there (unknown, or limited to other workspaces or channels). */
  | { kind: "refused" }
  /** The form was submitted before: its run has started (or tried to). */
  | { kind: "replayed" }
  /** The announcement could not be posted (Slack's error code): the run was not started. */
  | { kind: "not_posted"; code: string }
  | { kind: "started"; execution: Execution; kickoffId: string }
  /**
   * The crew's answer to the kickoff was lost (a read time-out, a 504) or unreadable (a 2xx Crewline
   * cannot read: the crew took it, but its kickoff id is not known): it may have started. The run
   * and its thread stay; its first callback naming it adopts it, or Runs.endUnstarted ends it.
   */
  | { kind: "unconfirmed"; reason: string; execution: Execution }
  /** The crew started it, but storing its kickoff id failed: its first callback naming it records it. */
  | { kind: "unrecorded"; execution: Execution; kickoffId: string }
  /** The crew refused the inputs (a 422, or a 400: "invalid input format"): these are missing, these invalid (either may be empty). */
  | { kind: "inputs_refused"; missing: string[]; invalid: InvalidInput[]; reason: string; execution: Execution }
  | { kind: "failed"; reason: string; execution: Execution };

/** Starts a run once. Throws only when the database fails before the crew was called, or after it refused (nothing is left running). */
export async function startRun(deps: StartRunDeps, req: StartRunRequest): Promise<StartRunOutcome> {
  const crewConfig = deps.crews.config(req.crewName);
  const crew = deps.crews.get(req.crewName);
  const teamRefused = !!crewConfig?.teams && !crewConfig.teams.includes(req.teamId);
  if (!crew || !crewConfig || teamRefused || (crewConfig.channels && !crewConfig.channels.includes(req.channelId))) return { kind: "refused" };

  const { runs } = deps;
  const { requestId } = req;
  if (requestId && (await runs.findByRequestId(requestId))) return { kind: "replayed" };
  let execution: Execution;
  try {
    execution = await runs.create({
      crewName: crewConfig.name,
      teamId: req.teamId,
      enterpriseId: req.enterpriseId ?? null,
      channelId: req.channelId,
      userId: req.userId,
      inputs: req.inputs,
      webhooks: deps.webhooksEnabled,
      requestId,
    });
  } catch (err) {
    // Two deliveries of one submission at once: the unique requestId lets one through.
    if (requestId && (await runs.findByRequestId(requestId))) return { kind: "replayed" };
    throw err;
  }

  const posted = await deps.announcements.post(execution, req.source?.threadTs);
  if ("error" in posted) {
    await runs.kickoffFailed(execution.id, `could not post in the channel (${posted.error})`);
    return { kind: "not_posted", code: posted.error };
  }
  const announcementTs = posted.ts;
  try {
    await runs.setThread(execution.id, req.source?.threadTs ?? announcementTs, announcementTs);
  } catch (err) {
    // The crew is not called for a run whose thread is not stored; nothing half-created stays visible
    // (the row, still starting, is ended by Runs.endUnstarted).
    await deps.announcements.remove(execution, announcementTs).catch(() => undefined);
    throw err;
  }

  let kickoffId: string;
  try {
    ({ kickoffId } = await crew.kickoff({
      inputs: req.inputs,
      meta: {
        source: "slack",
        requestId: execution.requestId,
        channel: execution.channelId,
        user: req.userId,
        ...(req.source?.permalink ? { permalink: req.source.permalink } : {}),
      },
      ...deps.webhookUrls(execution),
    }));
  } catch (err) {
    const reason = isCrewError(err) ? err.userMessage() : "Crewline could not start the crew.";
    // A crew's refusal is logged with its words (err's message quotes them, made readable and redacted).
    if (isCrewError(err)) deps.log.warn("crew kickoff failed", { executionId: execution.id, crew: crewConfig.name, err });
    else deps.log.error("kickoff failed", { executionId: execution.id, err });
    // It may have started: removing its announcement and refusing its callbacks would hide a run that
    // goes on (and invite a second start). It stays "starting" until a callback or the sweep says.
    if (isCrewError(err) && err.maybeApplied) return { kind: "unconfirmed", reason, execution };
    // Nothing half-created stays visible: the announcement goes (the user keeps the form or the reason).
    await deps.announcements.remove(execution, announcementTs).catch(() => undefined);
    await runs.kickoffFailed(execution.id, reason);
    // 400 is the spec's "invalid input format", 413 inputs too large; another 4xx (405, 409) is no matter of the inputs.
    if (isCrewError(err) && (err.kind === "missing_inputs" || (err.kind === "bad_request" && (err.status === 400 || err.status === 413)))) {
      return { kind: "inputs_refused", missing: err.missingInputs ?? [], invalid: err.invalidInputs ?? [], reason, execution };
    }
    return { kind: "failed", reason, execution };
  }
  // The crew runs it: its kickoff id must be stored (tried again, as a transaction PostgreSQL failed
  // may go through the next time); "could not start" would be false, and a second start would run it twice.
  for (let attempt = 1; ; attempt++) {
    try {
      // The audit record and the announcement's update (an outbox effect) go with the stored kickoff.
      const started = await runs.kickedOff(execution.id, kickoffId, { userId: req.userId, inputs: req.inputs });
      deps.onRunStarted?.(started);
      return { kind: "started", execution: started, kickoffId };
    } catch (err) {
      if (attempt < STORE_ATTEMPTS) {
        await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
        continue;
      }
      deps.log.error("kickoff taken but not stored", { executionId: execution.id, kickoffId, err });
      return { kind: "unrecorded", execution, kickoffId };
    }
  }
}

/** How many times a kickoff id the crew gave is stored before the person is told it was not. */
const STORE_ATTEMPTS = 3;
