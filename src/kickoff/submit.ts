// Kickoff modal submitted: validate, store the execution, announce it, POST /kickoff.
import type { App, types } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import { isCrewError } from "../crew/errors.js";
import {
  escapeMrkdwn,
  humanizeInputName,
  KICKOFF_VIEW_CALLBACK,
  kickoffErrorView,
  kickoffFormView,
  missingInputErrors,
  readViewInputs,
  type ViewStateValues,
} from "../slack/blocks/index.js";
import type { FeatureDeps } from "../slack/deps.js";
import { announcementFor } from "../slack/notifier.js";
import { sanitizeText } from "../text/sanitize.js";
import { bindForm, formIsFor } from "./form-binding.js";
import { encodeMetadata, type KickoffMetadata, kickoffMetadata } from "./modal.js";

export function registerKickoffSubmission(app: App, deps: FeatureDeps): void {
  app.view(KICKOFF_VIEW_CALLBACK, async ({ ack, view, body, client }) => {
    const meta = kickoffMetadata.safeParse(safeJson(view.private_metadata));
    // The form must be ours and opened by this very user (form-binding.ts).
    if (!meta.success || !meta.data.crew || !formIsFor(deps.formKey, meta.data, body.user.id)) {
      if (meta.success && meta.data.crew) deps.log.warn("kickoff form submitted by someone it was not opened for; refused", { userId: body.user.id });
      await ack({ response_action: "update", view: kickoffErrorView({ message: "This form has expired or was opened by someone else. Run `/crew` again." }) });
      return;
    }
    const names = meta.data.inputs.map((i) => i.name);
    const inputs = Object.fromEntries(Object.entries(readViewInputs(view.state.values as ViewStateValues, names)).map(([k, v]) => [k, sanitizeText(v)]));
    const missing = meta.data.inputs.filter((i) => i.required && !inputs[i.name]).map((i) => i.name);
    if (missing.length > 0) {
      await ack({ response_action: "errors", errors: missingInputErrors(missing, names) });
      return;
    }
    // Answer Slack now; the crew call happens after, and the modal shows how it went.
    await ack({ response_action: "update", view: startingView(meta.data.crew) });
    await startRun(client, deps, { viewId: view.id, userId: body.user.id, meta: meta.data, inputs, enterpriseId: enterpriseOf(body) });
  });
}

interface StartRequest {
  viewId: string;
  userId: string;
  meta: KickoffMetadata;
  inputs: Record<string, string>;
  /** The Enterprise Grid org the form was submitted in, if any (finds an org-wide install's token). */
  enterpriseId?: string | null;
}

/** The Grid org of an interaction payload (enterprise.id, or team.enterprise_id), or null. */
function enterpriseOf(body: unknown): string | null {
  const b = body as { enterprise?: { id?: unknown } | null; team?: { enterprise_id?: unknown } | null };
  const id = b.enterprise?.id ?? b.team?.enterprise_id;
  return typeof id === "string" && id ? id : null;
}

export async function startRun(client: WebClient, deps: FeatureDeps, req: StartRequest): Promise<void> {
  const crewName = req.meta.crew!;
  const crewConfig = deps.crews.config(crewName);
  const crew = deps.crews.get(crewName);
  const showView = (view: types.ModalView) => client.views.update({ view_id: req.viewId, view }).catch((err) => deps.log.warn("could not update kickoff modal", { err }));
  const teamRefused = !!crewConfig?.teams && !crewConfig.teams.includes(req.meta.team);
  if (!crew || !crewConfig || teamRefused || (crewConfig.channels && !crewConfig.channels.includes(req.meta.channel))) {
    await showView(kickoffErrorView({ crewName, message: `The crew “${crewName}” may not be started in this channel.` }));
    return;
  }

  const { runs } = deps.lifecycle;
  // One run per form: the form's nonce is the run's unique requestId, so a replay stores nothing.
  const requestId = req.meta.nonce;
  const replayed = () =>
    showView(kickoffErrorView({ crewName, message: "This form was already submitted: its run has started (or tried to). Run `/crew` again to start another." }));
  if (requestId && (await runs.findByRequestId(requestId))) return void (await replayed());
  let execution: Awaited<ReturnType<typeof runs.create>>;
  try {
    execution = await runs.create({
      crewName: crewConfig.name,
      teamId: req.meta.team,
      enterpriseId: req.enterpriseId ?? null,
      channelId: req.meta.channel,
      userId: req.userId,
      inputs: req.inputs,
      webhooks: deps.webhooksEnabled,
      requestId,
    });
  } catch (err) {
    // Two deliveries of one submission at once: the unique requestId lets one through.
    if (requestId && (await runs.findByRequestId(requestId))) return void (await replayed());
    throw err;
  }
  const urls = deps.webhookUrls(execution);

  let threadTs: string;
  try {
    const posted = await client.chat.postMessage({ channel: execution.channelId, ...announcementFor(execution) });
    threadTs = posted.ts!;
    await runs.setThread(execution.id, threadTs);
  } catch (err) {
    const code = (err as { data?: { error?: string } }).data?.error ?? "unknown_error";
    await runs.kickoffFailed(execution.id, `could not post in the channel (${code})`);
    await showView(
      kickoffErrorView({ crewName, message: `I couldn't post in this channel (${code}), so the run was not started. Invite me with \`/invite @Crewline\` and try again.` }),
    );
    return;
  }

  try {
    const { kickoffId } = await crew.kickoff({
      inputs: req.inputs,
      meta: { source: "slack", requestId: execution.requestId, channel: execution.channelId, user: req.userId },
      ...urls,
    });
    // The audit record and the announcement's update (an outbox effect) go with the stored kickoff.
    const started = await runs.kickedOff(execution.id, kickoffId, { userId: req.userId, inputs: req.inputs });
    await showView(startedView(crewName, kickoffId));
    deps.onRunStarted?.(started);
  } catch (err) {
    const reason = isCrewError(err) ? err.userMessage() : "Crewline could not start the crew.";
    if (!isCrewError(err)) deps.log.error("kickoff failed", { executionId: execution.id, err });
    await runs.kickoffFailed(execution.id, reason);
    // Nothing half-created stays visible: the announcement goes, the user keeps the form or the reason.
    await client.chat.delete({ channel: execution.channelId, ts: threadTs }).catch(() => undefined);
    if (isCrewError(err) && err.kind === "missing_inputs" && err.missingInputs?.length) {
      await showView(formWithMissing(deps, req, err.missingInputs));
    } else {
      await showView(kickoffErrorView({ crewName, message: reason }));
      await client.chat.postEphemeral({ channel: execution.channelId, user: req.userId, text: `❌ ${reason}` }).catch(() => undefined);
    }
  }
}

function formWithMissing(deps: FeatureDeps, req: StartRequest, missing: string[]): types.ModalView {
  const inputs = req.meta.inputs.map((i) => ({ ...i, required: i.required || missing.includes(i.name) }));
  // A new nonce: the corrected form is a new submission (this one's run failed to start).
  const { nonce: _n, sig: _s, ...facts } = req.meta;
  const view = kickoffFormView({
    crewName: req.meta.crew!,
    inputs,
    metadata: encodeMetadata(bindForm(deps.formKey, { ...facts, inputs: inputs.map((i) => ({ name: i.name, required: i.required })), user: req.userId })),
    values: req.inputs,
  });
  const names = missing.map((name) => `*${escapeMrkdwn(humanizeInputName(name))}*`).join(", ");
  view.blocks.unshift({ type: "section", text: { type: "mrkdwn", text: `⚠️ The crew needs ${names} before it can start.` } });
  return view;
}

function startingView(crewName: string): types.ModalView {
  return {
    type: "modal",
    callback_id: `${KICKOFF_VIEW_CALLBACK}_status`,
    title: { type: "plain_text", text: "Start a crew" },
    close: { type: "plain_text", text: "Close" },
    blocks: [{ type: "section", text: { type: "mrkdwn", text: `⏳ Starting *${escapeMrkdwn(crewName)}*…` } }],
  };
}

function startedView(crewName: string, kickoffId: string): types.ModalView {
  return {
    ...startingView(crewName),
    blocks: [
      { type: "section", text: { type: "mrkdwn", text: `✅ *${escapeMrkdwn(crewName)}* is running (kickoff \`${escapeMrkdwn(kickoffId)}\`). Follow it in the channel's thread.` } },
    ],
  };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
