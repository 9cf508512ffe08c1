// The "Edit and approve" modal of a review: the output (or, when Slack's text input cannot hold all
// of it, its first part) pre-filled for editing, and an optional note. Pure builder.
import type { types } from "@slack/bolt";
import { EDIT_INPUT_ACTION, EDIT_NOTE_BLOCK, EDIT_TEXT_BLOCK, EDIT_VIEW_CALLBACK } from "./ids.js";
import { context, modal, section, textInput } from "./kit.js";
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

export function editModal(p: EditModalParams): types.ModalView {
  if (p.head.length > LIMITS.plainTextInput) throw new Error("the editable part is longer than a text input holds");
  const task = `*${escapeMrkdwn(truncatePlain(p.taskName, 150)) || "Task"}*${p.round !== undefined ? ` · round ${p.round}` : ""}`;
  const effect =
    p.receiver === "flow"
      ? "Submitting approves with your edited version: the flow receives it with the answer, and the request shows the change."
      : "Submitting approves the task with your edited version: the crew receives it as the task's output, and the thread shows the change.";
  const blocks: types.KnownBlock[] = [section(`${task}\n${effect}`)];
  if (p.restLength > 0) {
    const [total, max, head, rest] = [p.head.length + p.restLength, LIMITS.plainTextInput, p.head.length, p.restLength].map((n) => n.toLocaleString("en-US"));
    blocks.push(
      context(
        `⚠️ This output is ${total} characters long and a Slack text box holds at most ${max}, so the first ${head} are here to edit, with room to add. The remaining ${rest} characters are kept unchanged ` +
          "and appended after your edit. To approve without editing, close this and use *Approve* with a note in the feedback field.",
      ),
    );
  }
  blocks.push(
    textInput({ blockId: EDIT_TEXT_BLOCK, actionId: EDIT_INPUT_ACTION, label: p.restLength > 0 ? "Output (first part)" : "Output", initial: p.head }),
    textInput({
      blockId: EDIT_NOTE_BLOCK,
      actionId: EDIT_INPUT_ACTION,
      label: `Note for the ${p.receiver === "flow" ? "flow" : "crew"}`,
      optional: true,
      placeholder: "Optional: why you changed it",
    }),
  );
  return modal({ callbackId: p.callbackId ?? EDIT_VIEW_CALLBACK, title: "Edit and approve", submit: "Approve edit", close: "Cancel", metadata: p.metadata, blocks });
}
