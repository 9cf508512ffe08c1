// Kickoff modal submitted: parse and validate the form, start the run (usecases/start-run.ts), show how it went.
import type { App, types } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import { isChannelRefusal } from "../../../domain/refusals.js";
import { judgeFailure } from "../../../outbox/failures.js";
import { sanitizeText } from "../../../text/sanitize.js";
import { UNSTARTED_AFTER_MS } from "../../../usecases/runs.js";
import { type Announcements, type StartRunOutcome, startRun } from "../../../usecases/start-run.js";
import {
  escapeMrkdwn,
  humanizeInputName,
  KICKOFF_VIEW_CALLBACK,
  kickoffErrorView,
  kickoffFormView,
  MAX_FORM_INPUTS,
  missingInputErrors,
  readViewInputs,
  truncatePlain,
  type ViewStateValues,
} from "../blocks/index.js";
import { modal, section } from "../blocks/kit.js";
import type { FeatureDeps } from "../deps.js";
import { announcementFor, effectMetadata, findPostedMessage } from "../notifier.js";
import { updateView } from "../views.js";
import { bindForm, formIsFor } from "./form-binding.js";
import { decodeMetadata, encodeMetadata, type KickoffMetadata } from "./metadata.js";

export function registerKickoffSubmission(app: App, deps: FeatureDeps): void {
  app.view(KICKOFF_VIEW_CALLBACK, async ({ ack, view, body, client }) => {
    const meta = decodeMetadata(view.private_metadata);
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
    await startFromForm(client, deps, { viewId: view.id, userId: body.user.id, meta: meta.data, inputs, enterpriseId: enterpriseOf(body) });
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

/** Starts the run (usecases/start-run.ts) and shows how it went in the modal (and privately in the channel). */
async function startFromForm(client: WebClient, deps: FeatureDeps, req: StartRequest): Promise<void> {
  const crewName = req.meta.crew!;
  // False when the modal could not show it (the person closed it: not_found).
  const showView = (view: types.ModalView) =>
    updateView(client, deps, req.meta.team, { view_id: req.viewId, view }).then(
      () => true,
      (err) => {
        deps.log.warn("could not update kickoff modal", { err });
        return false;
      },
    );
  const tell = (text: string) => client.chat.postEphemeral({ channel: req.meta.channel, user: req.userId, text }).catch(() => undefined);
  let outcome: StartRunOutcome;
  try {
    outcome = await startRun(
      {
        crews: deps.crews,
        runs: deps.lifecycle.runs,
        announcements: slackAnnouncements(client, deps),
        webhooksEnabled: deps.webhooksEnabled,
        webhookUrls: deps.webhookUrls,
        ...(deps.onRunStarted ? { onRunStarted: deps.onRunStarted } : {}),
        log: deps.log,
      },
      {
        crewName,
        teamId: req.meta.team,
        channelId: req.meta.channel,
        enterpriseId: req.enterpriseId ?? null,
        userId: req.userId,
        inputs: req.inputs,
        requestId: req.meta.nonce,
        ...(req.meta.thread ? { source: { threadTs: req.meta.thread, ...(req.meta.permalink ? { permalink: req.meta.permalink } : {}) } } : {}),
      },
    );
  } catch (err) {
    // Its database failed before the crew was called (or after it refused): nothing runs.
    deps.log.error("run could not be started", { crew: crewName, err });
    const view = kickoffErrorView({ crewName, message: NOT_STARTED_NO_DATABASE });
    if (!(await showView(view))) await tell(wordsOf(view));
    return;
  }
  // A failure is also told privately; any outcome is when the modal could not show it (else no one hears of it).
  const view = outcomeView(deps, req, outcome);
  const shown = await showView(view);
  if (outcome.kind === "failed" || !shown) await tell(outcome.kind === "failed" || outcome.kind === "inputs_refused" ? `❌ ${escapeMrkdwn(outcome.reason)}` : wordsOf(view));
}

/** A view's words as one message (its sections' text), for the person who closed the modal. */
function wordsOf(view: types.ModalView): string {
  return (view.blocks as types.KnownBlock[])
    .flatMap((b) => (b.type === "section" && b.text ? [b.text.type === "plain_text" ? escapeMrkdwn(b.text.text) : b.text.text] : []))
    .join("\n");
}

/** What the form shows once the run's start has an outcome. */
function outcomeView(deps: FeatureDeps, req: StartRequest, outcome: StartRunOutcome): types.ModalView {
  const crewName = req.meta.crew!;
  switch (outcome.kind) {
    case "refused":
      return kickoffErrorView({ crewName, message: `The crew “${crewName}” may not be started in this channel.` });
    case "replayed":
      return kickoffErrorView({ crewName, message: "This form was already submitted: its run has started (or tried to). Run `/crew` again to start another." });
    case "not_posted":
      // Only a refusal of the channel is mended by an invitation; anything else (Slack down) by trying again.
      return kickoffErrorView({
        crewName,
        message: isChannelRefusal(outcome.code)
          ? `I couldn't post in this channel (${outcome.code}), so the run was not started. Invite me with \`/invite @Crewline\` and try again.`
          : `Slack did not take the run's announcement (${outcome.code}), so the run was not started. Please try again in a moment.`,
      });
    case "started":
      return startedView(crewName, outcome.kickoffId);
    case "unconfirmed":
      // Without webhooks (no PUBLIC_URL) no callback will ever bring its kickoff id: the run cannot be found again.
      if (!deps.webhooksEnabled) {
        return statusView(
          `⚠️ Crewline got no usable answer from *${escapeMrkdwn(crewName)}* to the kickoff, so the run may have started, but Crewline cannot follow it: without webhooks (PUBLIC_URL), nothing will tell Crewline which run it is, and its progress will not show in the thread. Check the crew's platform to see whether it is running before starting it again.`,
        );
      }
      return statusView(
        `⏳ ${escapeMrkdwn(outcome.reason)} If *${escapeMrkdwn(crewName)}* started, its progress shows in the run's thread; if Crewline hears nothing from it within ${UNSTARTED_AFTER_MINUTES} minutes, the run is marked as not started.`,
      );
    case "unrecorded":
      return statusView(
        `✅ *${escapeMrkdwn(crewName)}* is running (kickoff \`${escapeMrkdwn(outcome.kickoffId)}\`), but Crewline could not record it just now: its progress shows in the channel's thread once it can. Please don't start it again.`,
      );
    case "inputs_refused":
      return formWithRefusal(deps, req, outcome);
    case "failed":
      return kickoffErrorView({ crewName, message: outcome.reason });
  }
}

const UNSTARTED_AFTER_MINUTES = Math.round(UNSTARTED_AFTER_MS / 60_000);
export const NOT_STARTED_NO_DATABASE = "Crewline could not reach its database, so the run was not started. Please try again in a moment.";

/** Tries of the announcement's post: Slack down for longer is told to the person (the run is not started). */
const ANNOUNCE_TRIES = 3;
/** Longest wait between tries (a rate limit's Retry-After included): a person waits on the form. */
const ANNOUNCE_WAIT_MAX_MS = 2000;

/**
 * The run's announcement, posted and removed with the request's workspace. The post takes its token
 * from the outbox's Slack budget first (the channel's chat.postMessage pace, shared with the run's
 * thread messages that follow), as what a person waits on (the crew is asked only once it is posted;
 * a token still missing after a moment is taken in debt, SlackBudget.spendNow).
 *
 * Slack can take a post and fail to answer (a 5xx, a time-out): a client retrying by itself would then
 * show the announcement twice. So each try is one call (oneShotClients), and a try after such a failure
 * first looks for the announcement in the channel (its metadata names the run), as the outbox does.
 */
function slackAnnouncements(client: WebClient, deps: Pick<FeatureDeps, "spendSlack" | "oneShotClients" | "log">): Announcements {
  return {
    async post(execution, threadTs) {
      const once = (await deps.oneShotClients?.forTeam(execution.teamId ?? "", execution.enterpriseId).catch(() => undefined)) ?? client;
      let maybePosted = false;
      let error: string;
      for (let tries = 1; ; tries++) {
        try {
          const found = maybePosted ? await findPostedMessage(once, deps.log, execution.channelId, threadTs ?? null, execution.id, execution.createdAt) : undefined;
          if (found) return { ts: found };
          await deps.spendSlack?.({ team: execution.teamId, channel: execution.channelId, method: "chat.postMessage" }).catch(() => undefined);
          const posted = await once.chat.postMessage({
            channel: execution.channelId,
            ...(threadTs ? { thread_ts: threadTs } : {}),
            ...announcementFor(execution),
            ...effectMetadata(execution.id),
          });
          return { ts: posted.ts! };
        } catch (err) {
          const verdict = judgeFailure(err);
          // Slack's own error code, else what went wrong on the way ("rate limited", "HTTP 503"): the form shows it.
          error = (err as { data?: { error?: string } }).data?.error ?? verdict.reason;
          // An error answer (not_in_channel, is_archived…) is Slack's word: told to the person, not tried again.
          if (verdict.kind === "give_up" || tries >= ANNOUNCE_TRIES || (!verdict.ambiguous && verdict.afterMs === undefined)) return { error };
          maybePosted ||= verdict.ambiguous;
          await new Promise((resolve) => setTimeout(resolve, Math.min(verdict.afterMs ?? 500 * tries, ANNOUNCE_WAIT_MAX_MS)));
        }
      }
    },
    async remove(execution, ts) {
      await client.chat.delete({ channel: execution.channelId, ts }).catch(() => undefined);
    },
  };
}

/** Names the corrected form's warning lists by name; the rest are counted. */
const WARNING_NAMES_MAX = 10;
/** Longest input name the corrected form's warning shows. */
const WARNING_NAME_MAX = 100;
/** Longest message of the crew's about one input the corrected form's warning shows. */
const WARNING_MESSAGE_MAX = 150;

/**
 * The form again, with the person's values and the crew's refusal: every input the crew named missing
 * required, each it refused with its words. A name only the crew gave (not one /inputs listed) gets a
 * field too, carried in the sealed metadata the submission reads its inputs from: else every submission
 * would send the same inputs and be refused again. As many as the metadata and the form can carry.
 */
function formWithRefusal(deps: FeatureDeps, req: StartRequest, refusal: Extract<StartRunOutcome, { kind: "inputs_refused" }>): types.ModalView {
  const { missing } = refusal;
  // An item named by no input (a field Crewline sends itself) is no field to fill in: its words are told.
  const invalid = refusal.invalid.filter((i) => i.name !== "");
  const aboutNoInput = refusal.invalid.filter((i) => i.name === "").map((i) => escapeMrkdwn(truncatePlain(i.message, WARNING_MESSAGE_MAX)));
  const declared = req.meta.inputs.map((i) => ({ ...i, required: i.required || missing.includes(i.name) }));
  const known = new Set(declared.map((i) => i.name));
  const named = [...new Set([...missing, ...invalid.map((i) => i.name)])]
    .filter((name) => !known.has(name))
    .map((name) => ({ name, required: true, description: "The crew asked for this input." }));
  // A new nonce: the corrected form is a new submission (this one's run failed to start).
  const { nonce: _n, sig: _s, ...facts } = req.meta;
  const sealed = (fields: { name: string; required: boolean }[]) =>
    encodeMetadata(bindForm(deps.formKey, { ...facts, inputs: fields.map((i) => ({ name: i.name, required: i.required })), user: req.userId }));
  // A required field the form could not show could never be filled in.
  let inputs = [...declared, ...named].slice(0, Math.max(declared.length, MAX_FORM_INPUTS));
  let metadata: string;
  for (;;) {
    try {
      metadata = sealed(inputs);
      break;
    } catch (err) {
      // The form's own inputs fit before (the nonce and seal keep their length): only the crew's extra names may not.
      if (inputs.length <= declared.length) throw err;
      inputs = inputs.slice(0, -1);
    }
  }
  const shownName = (name: string) => `*${escapeMrkdwn(truncatePlain(humanizeInputName(name), WARNING_NAME_MAX))}*`;
  const counted = (all: unknown[], listed: string[], join: string) =>
    all.length > listed.length ? `${listed.join(join)}${join}and ${all.length - listed.length} more` : listed.join(join);
  const needs = missing.length ? `The crew needs ${counted(missing, missing.slice(0, WARNING_NAMES_MAX).map(shownName), ", ")} before it can start.` : "";
  const refusedLines = invalid.slice(0, WARNING_NAMES_MAX).map((i) => `${shownName(i.name)}: ${escapeMrkdwn(truncatePlain(i.message, WARNING_MESSAGE_MAX))}`);
  const refused = invalid.length ? `The crew refused ${invalid.length === 1 ? "this input" : "these inputs"}:\n${counted(invalid, refusedLines, "\n")}` : "";
  const listed = [needs, refused].filter(Boolean);
  const other = aboutNoInput.length ? `The crew ${listed.length ? "also said" : "said"}:\n${counted(aboutNoInput, aboutNoInput.slice(0, WARNING_NAMES_MAX), "\n")}` : "";
  // A refusal that names nothing (a 400's "invalid input format") is told in the crew's words.
  const said = [...listed, other].filter(Boolean).join("\n") || escapeMrkdwn(refusal.reason);
  const left = inputs.length < declared.length + named.length ? "\nNot all of them fit in this form: ask whoever set up Crewline to check the crew's inputs." : "";
  return kickoffFormView({ crewName: req.meta.crew!, inputs, metadata, values: req.inputs, notice: `⚠️ ${said}${left}` });
}

/** What the form shows once submitted: the crew starting, then running. */
function statusView(text: string): types.ModalView {
  return modal({ callbackId: `${KICKOFF_VIEW_CALLBACK}_status`, title: "Start a crew", close: "Close", blocks: [section(text)] });
}
const startingView = (crewName: string) => statusView(`⏳ Starting *${escapeMrkdwn(crewName)}*…`);
const startedView = (crewName: string, kickoffId: string) =>
  statusView(`✅ *${escapeMrkdwn(crewName)}* is running (kickoff \`${escapeMrkdwn(kickoffId)}\`). Follow it in the channel's thread.`);
