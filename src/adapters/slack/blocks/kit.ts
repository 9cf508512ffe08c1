// The small Block Kit pieces every message builder uses. Pure.
import type { types } from "@slack/bolt";
import { LIMITS } from "./limits.js";
import { truncatePlain } from "./text.js";

export const mrkdwn = (text: string): types.MrkdwnElement => ({ type: "mrkdwn", text });
export const section = (text: string): types.SectionBlock => ({ type: "section", text: mrkdwn(text) });
export const context = (...texts: string[]): types.ContextBlock => ({ type: "context", elements: texts.map(mrkdwn) });
export const plain = (text: string, max: number): types.PlainTextElement => ({ type: "plain_text", text: truncatePlain(text, max) });

/** The optional multi-line feedback field under a review's (or flow request's) buttons. */
export function feedbackInput(blockId: string, actionId: string, placeholder: string): types.InputBlock {
  return {
    type: "input",
    block_id: blockId,
    optional: true,
    label: plain("Feedback", LIMITS.inputLabel),
    element: { type: "plain_text_input", action_id: actionId, multiline: true, max_length: LIMITS.plainTextInput, placeholder: plain(placeholder, LIMITS.placeholder) },
  };
}
