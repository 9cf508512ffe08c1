// The "Edit and approve" modal of a review: the output (or, when Slack's text input cannot hold all
// of it, its first part) pre-filled for editing, and an optional note. Pure builder.
import type { types } from "@slack/bolt";
import { EDIT_INPUT_ACTION, EDIT_NOTE_BLOCK, EDIT_TEXT_BLOCK, EDIT_VIEW_CALLBACK } from "./ids.js";
import { mrkdwn } from "./kit.js";
import { LIMITS } from "./limits.js";
import { escapeMrkdwn, truncatePlain } from "./text.js";

export interface EditModalParams {
  taskName: string;
  /** Review round (crew tasks); flow requests have none. */
  round?: number;
  /** Default: a crew review's (EDIT_VIEW_CALLBACK). */
  callbackId?: string;
  /** Who receives the edit (default the crew). */
  receiver?: "crew" | "flow";
  /** The part of the output offered for editing (at most LIMITS.plainTextInput characters). */
  head: string;
  /** Characters after `head` that are kept unchanged and appended to the edit. */
  restLength: number;
  /** Sealed facts (review, user, message, head length): see adapters/slack/decisions/form-seal.ts. */
  metadata: string;
}

const plain = (text: string, max: number): types.PlainTextElement => ({ type: "plain_text", text: truncatePlain(text, max) || "…" });

export function editModal(p: EditModalParams): types.ModalView {
  if (p.head.length > LIMITS.plainTextInput) throw new Error("the editable part is longer than a text input holds");
  if (p.metadata.length > LIMITS.privateMetadata) throw new Error("private_metadata is too long");
  const task = `*${escapeMrkdwn(truncatePlain(p.taskName, 150)) || "Task"}*${p.round !== undefined ? ` · round ${p.round}` : ""}`;
  const effect =
    p.receiver === "flow"
      ? "Submitting approves with your edited version: the flow receives it with the answer, and the request shows the change."
      : "Submitting approves the task with your edited version: the crew receives it as the task's output, and the thread shows the change.";
  const blocks: types.KnownBlock[] = [
    {
      type: "section",
      text: mrkdwn(`${task}\n${effect}`),
    },
  ];
  if (p.restLength > 0) {
    const total = p.head.length + p.restLength;
    blocks.push({
      type: "context",
      elements: [
        mrkdwn(
          `⚠️ This output is ${total.toLocaleString("en-US")} characters long and a Slack text box holds at most ${LIMITS.plainTextInput.toLocaleString("en-US")}, ` +
            `so only the first ${p.head.length.toLocaleString("en-US")} are here to edit. The remaining ${p.restLength.toLocaleString("en-US")} characters are kept unchanged ` +
            "and appended after your edit. To approve without editing, close this and use *Approve* with a note in the feedback field.",
        ),
      ],
    });
  }
  blocks.push(
    {
      type: "input",
      block_id: EDIT_TEXT_BLOCK,
      label: plain(p.restLength > 0 ? "Output (first part)" : "Output", LIMITS.inputLabel),
      element: { type: "plain_text_input", action_id: EDIT_INPUT_ACTION, multiline: true, max_length: LIMITS.plainTextInput, initial_value: p.head },
    },
    {
      type: "input",
      block_id: EDIT_NOTE_BLOCK,
      optional: true,
      label: plain("Note for the crew", LIMITS.inputLabel),
      element: {
        type: "plain_text_input",
        action_id: EDIT_INPUT_ACTION,
        multiline: true,
        max_length: LIMITS.plainTextInput,
        placeholder: plain("Optional: why you changed it", LIMITS.placeholder),
      },
    },
  );
  return {
    type: "modal",
    callback_id: p.callbackId ?? EDIT_VIEW_CALLBACK,
    title: plain("Edit and approve", LIMITS.viewText),
    submit: plain("Approve edit", LIMITS.viewText),
    close: plain("Cancel", LIMITS.viewText),
    private_metadata: p.metadata,
    blocks,
  };
}
