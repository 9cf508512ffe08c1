// Modal views for starting a crew: loading → (crew picker) → input form, or an error.
import type { types } from "@slack/bolt";
import { CREW_PICKER_VIEW_CALLBACK, CREW_SELECT_ACTION, CREW_SELECT_BLOCK, crewOptionValue, INPUT_ACTION, inputBlockId, KICKOFF_VIEW_CALLBACK, SOURCE_TEXT_BLOCK } from "./ids.js";
import { context, label, modal, section, textInput } from "./kit.js";
import { LIMITS } from "./limits.js";
import { escapeMrkdwn, excerpt, humanizeInputName, safeSlice, truncatePlain } from "./text.js";

export interface CrewChoice {
  name: string;
  description?: string;
}

export interface CrewInputField {
  name: string;
  description?: string;
  required: boolean;
}

export interface KickoffFormParams {
  crewName: string;
  inputs: CrewInputField[];
  metadata: string;
  /** Prefill, keyed by input name, when the form is shown again. */
  values?: Record<string, string>;
  /** Why the form is shown again (mrkdwn): in the block that names the crew, so that every input still fits. */
  notice?: string;
}

const TITLE = "Start a crew";
const CREW_NAME_MAX = 200;
/** One block names the crew (and why the form is shown again); with too many inputs, one more says how many were left out. */
export const MAX_FORM_INPUTS = LIMITS.modalBlocks - 1;
export const MAX_FORM_INPUTS_WHEN_CUT = LIMITS.modalBlocks - 2;

const crewLabel = (crewName: string) => `*${escapeMrkdwn(truncatePlain(crewName, CREW_NAME_MAX)) || "Unnamed crew"}*`;

/** Opened at once on `/crew` (trigger_id lives 3 s), then replaced with views.update. */
export function loadingView(title?: string): types.ModalView {
  return modal({
    callbackId: KICKOFF_VIEW_CALLBACK,
    title: title ?? TITLE,
    blocks: [section("Loading the crew's inputs…")],
    close: "Cancel",
  });
}

/** The crew picker; a form opened from a message also shows that message's text, which goes into the crew's form. */
export function crewPickerView(crews: CrewChoice[], metadata: string, sourceText?: string): types.ModalView {
  const unique = crews.filter((c, i) => crews.findIndex((o) => crewOptionValue(o.name) === crewOptionValue(c.name)) === i);
  if (unique.length === 0) {
    return modal({
      callbackId: CREW_PICKER_VIEW_CALLBACK,
      title: TITLE,
      blocks: [section("No crews are set up yet. Ask an admin to add one.")],
      close: "Close",
      metadata,
    });
  }
  const shown = unique.slice(0, LIMITS.selectOptions);
  const blocks: types.KnownBlock[] = [
    {
      type: "input",
      block_id: CREW_SELECT_BLOCK,
      dispatch_action: true,
      label: label("Crew", LIMITS.inputLabel),
      element: {
        type: "static_select",
        action_id: CREW_SELECT_ACTION,
        placeholder: label("Choose a crew", LIMITS.placeholder),
        options: shown.map(crewOption),
      },
    },
  ];
  if (sourceText !== undefined) {
    const initial = sourceText ? safeSlice(sourceText, LIMITS.plainTextInput) : undefined;
    const hint = "It goes into the crew's form: you can still change it there.";
    blocks.push(textInput({ blockId: SOURCE_TEXT_BLOCK, actionId: INPUT_ACTION, label: "The message", optional: true, hint, initial }));
  }
  if (unique.length > shown.length) {
    blocks.push(context(`Showing ${shown.length} of ${unique.length} crews. Start another with \`/crew &lt;crew name&gt;\`.`));
  }
  return modal({ callbackId: CREW_PICKER_VIEW_CALLBACK, title: TITLE, blocks, submit: "Next", close: "Cancel", metadata });
}

function crewOption(crew: CrewChoice): types.PlainTextOption {
  const description = crew.description ? truncatePlain(crew.description, LIMITS.optionDescription) : "";
  return {
    text: label(crew.name, LIMITS.optionText),
    value: crewOptionValue(crew.name),
    ...(description ? { description: { type: "plain_text", text: description } } : {}),
  };
}

/** Words in an input's name that say it takes a message's text. */
const TEXT_INPUT_WORDS = new Set(["text", "content", "message", "query", "topic", "input"]);

/**
 * The input a message's text goes into, when a crew is started from a message: the first one whose
 * name says it takes text (topic, content, message_text, userQuery…), else the first input.
 */
export function inputForMessageText(inputs: readonly { name: string }[]): string | undefined {
  const saysText = (name: string) =>
    humanizeInputName(name)
      .toLowerCase()
      .split(" ")
      .some((word) => TEXT_INPUT_WORDS.has(word));
  return (inputs.find((i) => saysText(i.name)) ?? inputs[0])?.name;
}

/** The inputs the form shows: all of them, or the first 98 when they don't fit. */
export function visibleFormInputs<T>(inputs: readonly T[]): T[] {
  return inputs.length > MAX_FORM_INPUTS ? inputs.slice(0, MAX_FORM_INPUTS_WHEN_CUT) : [...inputs];
}

export function kickoffFormView(p: KickoffFormParams): types.ModalView {
  const shown = visibleFormInputs(p.inputs);
  const cut = shown.length < p.inputs.length;
  const crew = `Crew: ${crewLabel(p.crewName)}`;
  const blocks: types.KnownBlock[] = [p.notice ? section(excerpt(`${crew}\n${p.notice}`, LIMITS.sectionText).text) : context(crew)];
  if (p.inputs.length === 0) blocks.push(section("This crew needs no inputs."));
  for (const input of shown) blocks.push(inputBlock(input, p.values?.[input.name]));
  if (cut) {
    const left = p.inputs.length - shown.length;
    blocks.push(section(`${left} more input${left === 1 ? " doesn't" : "s don't"} fit in this form; the crew gets them empty.`));
  }
  return modal({ callbackId: KICKOFF_VIEW_CALLBACK, title: TITLE, blocks, submit: "Start", close: "Cancel", metadata: p.metadata });
}

function inputBlock(input: CrewInputField, value: string | undefined): types.InputBlock {
  const hint = input.description ? truncatePlain(input.description, LIMITS.hint) : undefined;
  const initial = value ? safeSlice(value, LIMITS.plainTextInput) : undefined;
  return textInput({ blockId: inputBlockId(input.name), actionId: INPUT_ACTION, label: humanizeInputName(input.name), optional: !input.required, hint, initial });
}

/** Shown when the crew's inputs can't be loaded (unreachable crew, bad token…). */
export function kickoffErrorView(p: { crewName?: string; message: string }): types.ModalView {
  const blocks: types.KnownBlock[] = [
    section(p.crewName ? `:warning: Couldn't prepare ${crewLabel(p.crewName)}.` : ":warning: Couldn't prepare the crew."),
    { type: "section", text: { type: "plain_text", text: excerpt(p.message.trim() || "Unknown error.", LIMITS.sectionText).text } },
  ];
  return modal({ callbackId: KICKOFF_VIEW_CALLBACK, title: TITLE, blocks, close: "Close" });
}

export type ViewStateValues = Record<string, Record<string, { value?: string | null }>>;

/** Values keyed by input name, trimmed; inputs without a value map to "". */
export function readViewInputs(stateValues: ViewStateValues, inputNames: string[]): Record<string, string> {
  return Object.fromEntries(inputNames.map((name) => [name, (stateValues[inputBlockId(name)]?.[INPUT_ACTION]?.value ?? "").trim()]));
}

/**
 * `response_action: "errors"` payload. Only names in `inputNames` (the inputs shown in
 * the form) are keyed, since Slack rejects errors for blocks the view doesn't have.
 */
export function missingInputErrors(missing: string[], inputNames: string[]): Record<string, string> {
  return Object.fromEntries(missing.filter((name) => inputNames.includes(name)).map((name) => [inputBlockId(name), "This field is required by the crew."]));
}
