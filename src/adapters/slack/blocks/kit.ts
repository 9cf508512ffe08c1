// The small Block Kit pieces every message builder uses. Pure.
import type { types } from "@slack/bolt";
import { LIMITS } from "./limits.js";
import { truncatePlain } from "./text.js";

export const mrkdwn = (text: string): types.MrkdwnElement => ({ type: "mrkdwn", text });
export const section = (text: string): types.SectionBlock => ({ type: "section", text: mrkdwn(text) });
export const context = (...texts: string[]): types.ContextBlock => ({ type: "context", elements: texts.map(mrkdwn) });
export const plain = (text: string, max: number): types.PlainTextElement => ({ type: "plain_text", text: truncatePlain(text, max) });
/** Plain text that may not be empty (a view's title and buttons, a label). */
export const label = (text: string, max: number = LIMITS.viewText): types.PlainTextElement => ({ type: "plain_text", text: truncatePlain(text, max) || "…" });

/** A modal within Slack's limits: its title and buttons cut to fit, its metadata checked. */
export function modal(p: { callbackId: string; title: string; blocks: types.KnownBlock[]; submit?: string; close: string; metadata?: string }): types.ModalView {
  if (p.metadata !== undefined && p.metadata.length > LIMITS.privateMetadata)
    throw new Error(`private_metadata is ${p.metadata.length} chars; Slack allows ${LIMITS.privateMetadata}`);
  return {
    type: "modal",
    callback_id: p.callbackId,
    title: label(p.title),
    ...(p.submit ? { submit: label(p.submit) } : {}),
    close: label(p.close),
    ...(p.metadata ? { private_metadata: p.metadata } : {}),
    blocks: p.blocks,
  };
}

/** A multi-line text field of a form, as long as Slack's text box allows unless `maxLength` says less. */
export function textInput(p: {
  blockId: string;
  actionId: string;
  label: string;
  optional?: boolean;
  hint?: string;
  placeholder?: string;
  initial?: string;
  maxLength?: number;
}): types.InputBlock {
  return {
    type: "input",
    block_id: p.blockId,
    ...(p.optional !== undefined ? { optional: p.optional } : {}),
    label: label(p.label, LIMITS.inputLabel),
    ...(p.hint ? { hint: plain(p.hint, LIMITS.hint) } : {}),
    element: {
      type: "plain_text_input",
      action_id: p.actionId,
      multiline: true,
      max_length: p.maxLength ?? LIMITS.plainTextInput,
      ...(p.initial !== undefined ? { initial_value: p.initial } : {}),
      ...(p.placeholder ? { placeholder: plain(p.placeholder, LIMITS.placeholder) } : {}),
    },
  };
}

/** The optional multi-line feedback field under a review's (or flow request's) buttons. */
export function feedbackInput(blockId: string, actionId: string, placeholder: string): types.InputBlock {
  return textInput({ blockId, actionId, label: "Feedback", optional: true, placeholder });
}
