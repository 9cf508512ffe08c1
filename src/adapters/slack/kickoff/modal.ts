// The kickoff modal: open a loading view inside the 3-second trigger window, then fill it from the
// crew's GET /inputs (or let the user pick a crew first).
import type { App, types } from "@slack/bolt";
import type { WebClient } from "@slack/web-api";
import { z } from "zod";
import { isCrewError } from "../../../protocols/crew/errors.js";
import { sanitizeText } from "../../../text/sanitize.js";
import {
  CREW_PICKER_VIEW_CALLBACK,
  CREW_SELECT_ACTION,
  crewNameFromOptionValue,
  crewPickerView,
  INPUT_ACTION,
  inputForMessageText,
  kickoffErrorView,
  kickoffFormView,
  loadingView,
  SOURCE_TEXT_BLOCK,
} from "../blocks/index.js";
import type { FeatureDeps } from "../deps.js";
import { permalinkOf } from "../notifier.js";
import { spendOnView, updateView } from "../views.js";
import { bindForm, formIsFor } from "./form-binding.js";
import { decodeMetadata, encodeMetadata } from "./metadata.js";

export interface ModalRequest {
  triggerId: string;
  channelId: string;
  userId: string;
  teamId: string;
  crewName?: string;
  /** Opened from a message (the message shortcut): its text prefills the form, and the run is announced in its thread. */
  source?: { messageTs: string; threadTs: string; text: string };
}

/** Where a form opened from a message came from: sealed in its metadata, and the text for its prefill. */
export interface FormOrigin {
  thread?: string;
  permalink?: string;
  text?: string;
}

/** What the person hears when the request names no workspace: a run is never stored without one. */
export const WORKSPACE_UNKNOWN = "Slack did not say which workspace you are in, so no crew was started. Please try again, or start it with `/crew` in the channel.";

/**
 * The workspace a kickoff is for: the payload's team, else (an org-wide Enterprise Grid install sends
 * `team: null`) the user's team_id, unless that names their org (E…) rather than a workspace. Undefined: none.
 */
export function workspaceOf(team: string | undefined, userTeam: string | undefined): string | undefined {
  if (team) return team;
  return userTeam && !userTeam.startsWith("E") ? userTeam : undefined;
}

/** What the person hears when Slack would not open the form (its trigger expired, a rate limit, an outage). */
export const FORM_NOT_OPENED = "I couldn't open the form: Slack did not let me in time. Please try again.";

/**
 * Opens the kickoff form and fills it. False when Slack would not open it: the caller tells the person
 * (an error here would otherwise reach nobody, and they would wait for a form that never comes).
 */
export async function openKickoffModal(client: WebClient, deps: FeatureDeps, req: ModalRequest): Promise<boolean> {
  await spendOnView(deps, req.teamId, "views.open");
  let opened: Awaited<ReturnType<WebClient["views"]["open"]>>;
  try {
    opened = await client.views.open({ trigger_id: req.triggerId, view: loadingView() });
  } catch (err) {
    deps.log.warn("kickoff form could not be opened", { err });
    return false;
  }
  const viewId = opened.view!.id!;
  await fillModal(client, deps, viewId, opened.view!.hash!, req).catch(async (err) => {
    deps.log.error("kickoff modal failed", { err });
    await updateView(client, deps, req.teamId, { view_id: viewId, view: kickoffErrorView({ message: "Something went wrong while preparing the form. Please try again." }) }).catch(
      () => {},
    );
  });
  return true;
}

async function fillModal(client: WebClient, deps: FeatureDeps, viewId: string, hash: string | undefined, req: ModalRequest): Promise<void> {
  // The hash guards against overwriting a view the user changed meanwhile (hash_conflict).
  const show = (view: types.ModalView) => updateView(client, deps, req.teamId, { view_id: viewId, ...(hash ? { hash } : {}), view });

  // Which crews may be started here is known before Slack is asked: a channel none may be started in is not joined.
  const crews = deps.crews.availableIn(req.channelId, req.teamId);
  const named = (c: { name: string }) => c.name.toLowerCase() === req.crewName?.toLowerCase();
  const match = req.crewName ? crews.find(named) : undefined;
  // A crew this workspace may not use is not named at all (as if it did not exist).
  const elsewhere = req.crewName && !match ? deps.crews.usableBy(req.teamId).find(named) : undefined;
  if (elsewhere?.channels) {
    const message = `The crew “${elsewhere.name}” may not be started in this channel: it is limited to ${elsewhere.channels.length === 1 ? "one other channel" : `${elsewhere.channels.length} other channels`}. Ask whoever set up Crewline where to use it.`;
    return void (await show(kickoffErrorView({ crewName: elsewhere.name, message })));
  }
  if (crews.length === 0) {
    return void (await show(kickoffErrorView({ message: "No crew may be started in this channel. Ask whoever set up Crewline which channels its crews are allowed in." })));
  }
  if (req.crewName && !match) {
    const known = crews.map((c) => `“${c.name}”`).join(", ");
    return void (await show(kickoffErrorView({ message: `There is no crew called “${req.crewName}” here. Crews you can start in this channel: ${known}.` })));
  }
  const problem = await channelProblem(client, req.channelId);
  if (problem) return void (await show(kickoffErrorView({ message: problem })));

  const origin: FormOrigin | undefined = req.source && {
    thread: req.source.threadTs,
    text: req.source.text,
    permalink: await permalinkOf(client, req.channelId, req.source.messageTs),
  };
  const crewName = match?.name ?? (crews.length === 1 ? crews[0]!.name : undefined);
  if (crewName) return void (await show(await formFor(deps, crewName, req.channelId, req.teamId, req.userId, origin)));
  const meta = encodeMetadata(bindForm(deps.formKey, { channel: req.channelId, team: req.teamId, inputs: [], user: req.userId, ...sealedOrigin(origin) }));
  const choices = crews.map((c) => ({ name: c.name }));
  await show(crewPickerView(choices, meta, origin?.text));
}

/** The parts of an origin that the form's seal covers (the text is the user's to change). */
function sealedOrigin(origin: FormOrigin | undefined): { thread?: string; permalink?: string } {
  return { ...(origin?.thread ? { thread: origin.thread } : {}), ...(origin?.permalink ? { permalink: origin.permalink } : {}) };
}

/** The input form for a crew, or an error view that says what to check. */
export async function formFor(deps: FeatureDeps, crewName: string, channelId: string, teamId: string, userId: string, origin?: FormOrigin) {
  const crew = deps.crews.get(crewName);
  if (!crew) return kickoffErrorView({ message: `The crew “${crewName}” is not configured.` });
  try {
    const inputs = await crew.listInputs();
    const metadata = encodeMetadata(
      bindForm(deps.formKey, {
        crew: crewName,
        channel: channelId,
        team: teamId,
        user: userId,
        inputs: inputs.map((i) => ({ name: i.name, required: i.required })),
        ...sealedOrigin(origin),
      }),
    );
    const target = origin?.text ? inputForMessageText(inputs) : undefined;
    return kickoffFormView({ crewName, inputs, metadata, ...(target ? { values: { [target]: origin!.text! } } : {}) });
  } catch (err) {
    if (isCrewError(err)) {
      deps.log.warn("crew inputs could not be listed", { crew: crewName, err });
      return kickoffErrorView({ crewName, message: err.userMessage() });
    }
    if (err instanceof Error && err.message.startsWith("too many inputs")) {
      return kickoffErrorView({ crewName, message: "This crew declares more inputs than a Slack form can carry." });
    }
    throw err;
  }
}

/**
 * Whether the bot can post in the channel; a message telling the user how to fix it when not.
 * Public channels the bot is not in are joined (channels:join).
 */
async function channelProblem(client: WebClient, channelId: string): Promise<string | undefined> {
  const howTo = "Invite me with `/invite @Crewline` and try again, or use `/crew` in a channel I'm in.";
  try {
    const info = await client.conversations.info({ channel: channelId });
    const channel = info.channel;
    if (!channel || channel.is_member || channel.is_im) return undefined;
    if (channel.is_private) return `I'm not a member of this private channel, so I couldn't post the run. ${howTo}`;
    await client.conversations.join({ channel: channelId });
    return undefined;
  } catch (err) {
    const code = (err as { data?: { error?: string } }).data?.error;
    if (code === "channel_not_found" || code === "not_in_channel" || code === "method_not_supported_for_channel_type") {
      return `I can't post in this conversation (it is private to me or a direct message I'm not part of). ${howTo}`;
    }
    throw err;
  }
}

/** The message text a picker opened from a message carries (the user may have changed it). */
const sourceTextState = z.object({ [SOURCE_TEXT_BLOCK]: z.object({ [INPUT_ACTION]: z.object({ value: z.string().max(10_000).nullish() }) }) });
function sourceTextOf(values: unknown): string | undefined {
  const parsed = sourceTextState.safeParse(values);
  return parsed.success ? sanitizeText(parsed.data[SOURCE_TEXT_BLOCK][INPUT_ACTION].value ?? "") : undefined;
}

const pickerSelection = z.object({
  user: z.object({ id: z.string() }),
  view: z.object({ id: z.string(), hash: z.string().optional(), private_metadata: z.string(), state: z.object({ values: z.unknown() }).optional() }),
  actions: z.array(z.object({ selected_option: z.object({ value: z.string() }).optional() })).min(1),
});

export function registerCrewPicker(app: App, deps: FeatureDeps): void {
  const showForm = async (client: WebClient, viewId: string, metadataText: string, optionValue: string | undefined, userId: string, stateValues: unknown) => {
    const meta = decodeMetadata(metadataText);
    // A picker opened for someone else (or metadata we did not seal) shows nothing.
    if (!meta.success || !formIsFor(deps.formKey, meta.data, userId)) return void deps.log.warn("crew picker with foreign metadata ignored", { userId });
    const names = deps.crews.availableIn(meta.data.channel, meta.data.team).map((c) => c.name);
    if (!optionValue) return;
    const crewName = crewNameFromOptionValue(optionValue, names);
    const { channel, team } = meta.data;
    // A crew removed (or limited to other channels) since the picker was shown: said, not left loading.
    if (!crewName) {
      const message = "That crew can no longer be started in this channel. Run `/crew` again to see the crews you can start here.";
      return void (await updateView(client, deps, team, { view_id: viewId, view: kickoffErrorView({ message }) }));
    }
    await updateView(client, deps, team, { view_id: viewId, view: loadingView() });
    const origin: FormOrigin = { ...sealedOrigin(meta.data), text: sourceTextOf(stateValues) };
    await updateView(client, deps, team, { view_id: viewId, view: await formFor(deps, crewName, channel, team, userId, origin) });
  };

  app.action(CREW_SELECT_ACTION, async ({ ack, body, client }) => {
    await ack();
    const parsed = pickerSelection.safeParse(body);
    if (!parsed.success) return;
    const { view, actions, user } = parsed.data;
    await showForm(client, view.id, view.private_metadata, actions[0]!.selected_option?.value, user.id, view.state?.values);
  });

  app.view(CREW_PICKER_VIEW_CALLBACK, async ({ ack, view, body, client }) => {
    const selected = Object.values(view.state.values)
      .flatMap((block) => Object.values(block))
      .map((el) => (el as { selected_option?: { value: string } }).selected_option?.value)
      .find(Boolean);
    if (!selected) return void (await ack({ response_action: "errors", errors: { [Object.keys(view.state.values)[0] ?? "crew"]: "Choose a crew." } }));
    await ack({ response_action: "update", view: loadingView() });
    await showForm(client, view.id, view.private_metadata, selected, body.user.id, view.state.values);
  });
}
