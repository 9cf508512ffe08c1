// Every block_id / action_id / callback_id the app sends or matches, in one place.
import { createHash } from "node:crypto";
import { safeSlice } from "./text.js";

export const KICKOFF_VIEW_CALLBACK = "crew_kickoff";
export const CREW_PICKER_VIEW_CALLBACK = "crew_pick";
export const CREW_SELECT_BLOCK = "crew_select_block";
/** The message shortcut: its callback id, and the picker's field that carries the message text to the form. */
export const RUN_ON_MESSAGE_SHORTCUT = "crew_run_on_message";
export const SOURCE_TEXT_BLOCK = "crew_source_text";
export const CREW_SELECT_ACTION = "crew_select";
export const INPUT_BLOCK_PREFIX = "in:";
export const INPUT_ACTION = "value";
export const APPROVE_ACTION = "review_approve";
export const REJECT_ACTION = "review_reject";
/** Edit and approve: the button on a review, and the modal it opens. */
export const EDIT_ACTION = "review_edit";
export const EDIT_VIEW_CALLBACK = "review_edit";
export const EDIT_TEXT_BLOCK = "review_edit_text";
export const EDIT_NOTE_BLOCK = "review_edit_note";
export const EDIT_INPUT_ACTION = "value";
export const REVIEW_ACTIONS_BLOCK = "review_actions";
export const FEEDBACK_BLOCK = "review_feedback";
export const FEEDBACK_ACTION = "feedback";

export const ID_MAX = 255;
export const OPTION_VALUE_MAX = 150;

/**
 * `text` when it fits in `max`, else a prefix plus a hash of the whole text, so distinct
 * long texts still give distinct ids.
 */
export function fitId(text: string, max: number): string {
  if (text.length <= max) return text;
  const hash = createHash("sha256").update(text).digest("hex").slice(0, 16);
  return `${safeSlice(text, max - hash.length - 1)}~${hash}`;
}

export function inputBlockId(inputName: string): string {
  return fitId(INPUT_BLOCK_PREFIX + inputName, ID_MAX);
}

/** The input name whose block id is `blockId`, among the crew's declared `inputNames`. */
export function inputNameFromBlockId(blockId: string, inputNames: readonly string[]): string | undefined {
  return inputNames.find((name) => inputBlockId(name) === blockId);
}

/** Option values are capped at 150 chars, shorter than a crew name may be. */
export function crewOptionValue(crewName: string): string {
  return fitId(crewName, OPTION_VALUE_MAX);
}

export function crewNameFromOptionValue(value: string, crewNames: readonly string[]): string | undefined {
  return crewNames.find((name) => crewOptionValue(name) === value);
}

/** Flow feedback requests: one button per `emit` outcome (`flow_outcome:<index>`), or Send feedback. */
export const FLOW_OUTCOME_ACTION_PREFIX = "flow_outcome:";
export const FLOW_SEND_ACTION = "flow_send_feedback";
/** Edit and approve on a flow request: the button, and the modal it opens. */
export const FLOW_EDIT_ACTION = "flow_edit";
export const FLOW_EDIT_VIEW_CALLBACK = "flow_edit";
/** Reassign on a flow request: the button and its modal (the same fields as a review's). */
export const FLOW_REASSIGN_ACTION = "flow_reassign";
export const FLOW_REASSIGN_VIEW_CALLBACK = "flow_reassign";
/** Approve a flow request from App Home (its approve-like outcome). */
export const HOME_FLOW_APPROVE_ACTION = "home_flow_approve";
export const FLOW_ACTIONS_BLOCK = "flow_actions";
export const FLOW_FEEDBACK_BLOCK = "flow_feedback";
export const FLOW_FEEDBACK_ACTION = "feedback";

/** Deadlines, escalation and reassignment (issue #14). */
export const REASSIGN_ACTION = "review_reassign";
export const REASSIGN_VIEW_CALLBACK = "review_reassign";
export const REASSIGN_USER_BLOCK = "reassign_user";
export const REASSIGN_USER_ACTION = "user";
export const REASSIGN_REASON_BLOCK = "reassign_reason";
export const REASSIGN_REASON_ACTION = "reason";
/** Approve from the App Home tab (value: the review id). */
export const HOME_APPROVE_ACTION = "home_review_approve";

/** Stop on a run's announcement (value: the execution id), and Stop following in the private answer when the crew cannot be stopped. */
export const STOP_ACTION = "run_stop";
export const STOP_FOLLOWING_ACTION = "run_stop_following";
export const RUN_ACTIONS_BLOCK = "run_actions";
