// Block Kit limits (see docs/spec/slack-platform-notes.md) and a checker that walks
// built blocks/views and lists every violation. Builders are tested against it; the
// app may also run it in development to catch regressions before Slack does.
import type { types } from "@slack/bolt";

export const LIMITS = {
  sectionText: 3000,
  fieldText: 2000,
  fields: 10,
  markdownTotal: 12_000,
  header: 150,
  contextElements: 10,
  contextText: 3000,
  buttonText: 75,
  buttonValue: 2000,
  actionsElements: 25,
  id: 255,
  viewText: 24,
  privateMetadata: 3000,
  messageBlocks: 50,
  modalBlocks: 100,
  inputLabel: 2000,
  hint: 2000,
  placeholder: 150,
  plainTextInput: 3000,
  optionText: 75,
  optionValue: 150,
  optionDescription: 75,
  selectOptions: 100,
  /** Slack rejects from about 11–13k chars of block text; we stay at or under 12k. */
  messageBlockText: 12_000,
} as const;

type Json = Record<string, unknown>;
type Check = (path: string, value: unknown, max: number) => void;
const text = (textObject: unknown) => (textObject as Json | undefined)?.text;

/** Total length of all `text` strings in the blocks (text objects, markdown, labels…). */
export function blockTextLength(blocks: readonly unknown[]): number {
  let total = 0;
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === "object") {
      for (const [key, value] of Object.entries(node)) {
        if (key === "text" && typeof value === "string") total += value.length;
        else walk(value);
      }
    }
  };
  walk(blocks);
  return total;
}

export function messageLimitViolations(blocks: readonly types.KnownBlock[]): string[] {
  const problems: string[] = [];
  if (blocks.length > LIMITS.messageBlocks) problems.push(`blocks: ${blocks.length} > ${LIMITS.messageBlocks}`);
  const total = blockTextLength(blocks);
  if (total > LIMITS.messageBlockText) problems.push(`block text: ${total} > ${LIMITS.messageBlockText}`);
  const markdown = blocks.reduce((n, b) => n + (b.type === "markdown" ? b.text.length : 0), 0);
  if (markdown > LIMITS.markdownTotal) problems.push(`markdown text: ${markdown} > ${LIMITS.markdownTotal}`);
  return problems.concat(blockViolations(blocks));
}

export function modalLimitViolations(view: types.ModalView): string[] {
  const problems: string[] = [];
  const check = checker(problems);
  check("title", view.title.text, LIMITS.viewText);
  if (view.submit) check("submit", view.submit.text, LIMITS.viewText);
  if (view.close) check("close", view.close.text, LIMITS.viewText);
  if (view.callback_id !== undefined) check("callback_id", view.callback_id, LIMITS.id);
  if (view.private_metadata !== undefined && view.private_metadata.length > LIMITS.privateMetadata) {
    problems.push(`private_metadata: ${view.private_metadata.length} > ${LIMITS.privateMetadata}`);
  }
  if (view.blocks.length > LIMITS.modalBlocks) problems.push(`blocks: ${view.blocks.length} > ${LIMITS.modalBlocks}`);
  if (view.blocks.some((b) => b.type === "markdown")) problems.push("markdown blocks are for messages only");
  if (!view.submit && view.blocks.some((b) => b.type === "input")) problems.push("input blocks need a submit button");
  return problems.concat(blockViolations(view.blocks));
}

function checker(problems: string[]): Check {
  return (path, value, max) => {
    if (typeof value !== "string") problems.push(`${path}: missing text`);
    else if (value.length === 0) problems.push(`${path}: empty`);
    else if (value.length > max) problems.push(`${path}: ${value.length} > ${max}`);
  };
}

function blockViolations(blocks: readonly unknown[]): string[] {
  const problems: string[] = [];
  const check = checker(problems);
  const blockIds = new Set<string>();
  blocks.forEach((raw, i) => {
    const block = raw as Json;
    const at = `blocks[${i}] ${String(block.type)}`;
    if (typeof block.block_id === "string") {
      check(`${at}.block_id`, block.block_id, LIMITS.id);
      if (blockIds.has(block.block_id)) problems.push(`${at}: duplicate block_id ${block.block_id}`);
      blockIds.add(block.block_id);
    }
    checkBlock(block, at, check, problems);
  });
  return problems;
}

function checkBlock(block: Json, at: string, check: Check, problems: string[]): void {
  const elements = (block.elements as Json[] | undefined) ?? [];
  switch (block.type) {
    case "section": {
      const fields = (block.fields as Json[] | undefined) ?? [];
      if (block.text === undefined && fields.length === 0) problems.push(`${at}: needs text or fields`);
      if (block.text !== undefined) check(`${at}.text`, text(block.text), LIMITS.sectionText);
      if (fields.length > LIMITS.fields) problems.push(`${at}.fields: ${fields.length} > ${LIMITS.fields}`);
      fields.forEach((f, j) => check(`${at}.fields[${j}]`, f.text, LIMITS.fieldText));
      if (block.accessory) checkElement(block.accessory as Json, `${at}.accessory`, check, problems);
      break;
    }
    case "header":
      check(`${at}.text`, text(block.text), LIMITS.header);
      break;
    case "markdown":
      check(`${at}.text`, block.text, LIMITS.markdownTotal);
      break;
    case "context":
      if (elements.length === 0 || elements.length > LIMITS.contextElements) problems.push(`${at}.elements: ${elements.length}`);
      elements.forEach((e, j) => e.type !== "image" && check(`${at}.elements[${j}]`, e.text, LIMITS.contextText));
      break;
    case "actions":
      if (elements.length === 0 || elements.length > LIMITS.actionsElements) problems.push(`${at}.elements: ${elements.length}`);
      elements.forEach((e, j) => checkElement(e, `${at}.elements[${j}]`, check, problems));
      break;
    case "input":
      check(`${at}.label`, text(block.label), LIMITS.inputLabel);
      if (block.hint !== undefined) check(`${at}.hint`, text(block.hint), LIMITS.hint);
      checkElement(block.element as Json, `${at}.element`, check, problems);
      break;
    case "divider":
      break;
    default:
      problems.push(`${at}: unexpected block type`);
  }
}

function checkElement(element: Json, at: string, check: Check, problems: string[]): void {
  if (element.action_id !== undefined) check(`${at}.action_id`, element.action_id, LIMITS.id);
  if (element.placeholder !== undefined) check(`${at}.placeholder`, text(element.placeholder), LIMITS.placeholder);
  switch (element.type) {
    case "button":
      check(`${at}.text`, text(element.text), LIMITS.buttonText);
      if (element.value !== undefined) check(`${at}.value`, element.value, LIMITS.buttonValue);
      break;
    case "plain_text_input": {
      const max = (element.max_length as number | undefined) ?? LIMITS.plainTextInput;
      if (max > LIMITS.plainTextInput) problems.push(`${at}.max_length: ${max} > ${LIMITS.plainTextInput}`);
      const initial = element.initial_value;
      if (typeof initial === "string" && initial.length > max) problems.push(`${at}.initial_value: ${initial.length} > ${max}`);
      break;
    }
    case "static_select": {
      const options = (element.options as Json[] | undefined) ?? [];
      if (options.length === 0 || options.length > LIMITS.selectOptions) problems.push(`${at}.options: ${options.length}`);
      const values = new Set<unknown>();
      options.forEach((o, j) => {
        check(`${at}.options[${j}].text`, text(o.text), LIMITS.optionText);
        check(`${at}.options[${j}].value`, o.value, LIMITS.optionValue);
        if (o.description !== undefined) check(`${at}.options[${j}].description`, text(o.description), LIMITS.optionDescription);
        if (values.has(o.value)) problems.push(`${at}.options[${j}]: duplicate value`);
        values.add(o.value);
      });
      break;
    }
    case "users_select":
      // A person picker (the Reassign modal): Slack fills in its options; nothing of ours to bound.
      break;
    default:
      problems.push(`${at}: unexpected element type ${String(element.type)}`);
  }
}
