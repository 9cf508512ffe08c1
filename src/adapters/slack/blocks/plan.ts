// A run's live plan in Slack's message streaming (chat.startStream → appendStream → stopStream):
// the plan's title (plan_update) and one task card per crew task (task_update). Pure: the chunks a
// call sends, and what each card then shows, so the next append sends only the cards that changed
// (and, a call carrying at most PLAN_CHUNKS_PER_CALL, what it had no room for).
// Every text from outside (crew name, inputs, task names, steps, outputs) is cut first, then escaped
// (a `<!channel>` in a task's output shows as text, and a million characters cost what 300 do).

import type { types } from "@slack/bolt";
import type { PlanTask, RunPlan } from "../../../domain/plan.js";
import { context, section } from "./kit.js";
import { escapeMrkdwn, formatUtcTime, humanizeInputName, truncatePlain } from "./text.js";

export type PlanChunk = types.PlanUpdateChunk | types.TaskUpdateChunk;

/** Characters kept of each text before escaping (escaping may lengthen it up to five times). */
export const PLAN_LIMITS = { title: 150, taskTitle: 120, details: 300, output: 500, inputs: 3, inputValue: 40 } as const;

/**
 * Chunks one streaming call carries at most (chat.startStream, chat.appendStream, chat.stopStream).
 * Slack's pages for the three methods and the platform notes (docs/spec/slack-platform-notes.md) name
 * no count, only the 12,000 characters of markdown_text and stopStream's 50 blocks; the stand-in, which
 * checks chunks as those notes describe them, refuses more than 100 with `invalid_chunks`
 * (src/playground/slack-stream.ts). Half of that leaves room below a count of Slack's own, and keeps a
 * call's body to a few hundred kB (a card's texts, escaped, run to a few thousand characters).
 */
export const PLAN_CHUNKS_PER_CALL = 50;

/**
 * Cards a plan shows at most: the first tasks each have their own card, and every task after them
 * shows on the last one (a crew of thousands of tasks would otherwise build a message no one reads,
 * and store what each of its cards showed with the run).
 */
export const PLAN_CARDS_MAX = 200;

/** The id of the card that stands for the tasks after the first PLAN_CARDS_MAX - 1 (a task's is task-n). */
export const REST_CARD_ID = "task-rest";

/** What the stream shows now: the plan's title and each card, keyed by card id (stored with the run). */
export type PlanShown = Record<string, string>;

const TITLE_KEY = "#title";

const cut = (text: string, max: number) => escapeMrkdwn(truncatePlain(text, max));

const OUTCOMES = { stopped: "stopped", abandoned: "no longer followed" } as const;

/** The plan's title: the crew and (the first few of) its inputs; its outcome once the run ended. */
export function planTitle(p: { crewName: string; inputs: Record<string, unknown>; plan?: Pick<RunPlan, "ended" | "failed" | "stopped"> }): string {
  const entries = Object.entries(p.inputs ?? {}).slice(0, PLAN_LIMITS.inputs);
  const inputs = entries.map(
    ([k, v]) => `${truncatePlain(humanizeInputName(k), 30)}: ${truncatePlain(typeof v === "string" ? v : (JSON.stringify(v) ?? ""), PLAN_LIMITS.inputValue)}`,
  );
  const outcome = p.plan?.ended ? ` — ${p.plan.stopped ? OUTCOMES[p.plan.stopped] : p.plan.failed ? "failed" : "finished"}` : "";
  const crew = truncatePlain(p.crewName || "Unnamed crew", 60);
  // The crew and inputs are cut, never the outcome: long inputs must not hide how the run ended.
  return `${cut(`${crew}${inputs.length ? ` (${inputs.join(", ")})` : ""}`, PLAN_LIMITS.title)}${escapeMrkdwn(outcome)}`;
}

export function taskChunk(t: PlanTask): types.TaskUpdateChunk {
  const details = t.details?.trim() ? cut(t.details, PLAN_LIMITS.details) : undefined;
  const output = t.output?.trim() ? cut(t.output, PLAN_LIMITS.output) : undefined;
  return {
    type: "task_update",
    id: t.id,
    title: cut(t.title || t.id, PLAN_LIMITS.taskTitle) || t.id,
    status: t.status,
    ...(details ? { details } : {}),
    ...(output ? { output } : {}),
  };
}

/**
 * The cards the plan shows: one per task, in order, up to PLAN_CARDS_MAX; beyond that the last card
 * stands for every task from the PLAN_CARDS_MAX-th on: titled with their numbers, showing what a
 * person would look for first among them (a decision waited for, then work under way, then a
 * failure), and the latest one's step or output.
 */
export function planCards(tasks: readonly PlanTask[]): PlanTask[] {
  if (tasks.length < PLAN_CARDS_MAX) return [...tasks];
  const own = tasks.slice(0, PLAN_CARDS_MAX - 1);
  const rest = tasks.slice(PLAN_CARDS_MAX - 1);
  const latest = rest[rest.length - 1]!;
  // One task past the others: its card as it is (under the id the rest will share).
  if (rest.length === 1) return [...own, { ...latest, id: REST_CARD_ID }];
  const has = (status: PlanTask["status"]) => rest.some((t) => t.status === status);
  const status = has("pending") ? "pending" : has("in_progress") ? "in_progress" : has("error") ? "error" : "complete";
  const name = latest.title || latest.id;
  const card: PlanTask = {
    id: REST_CARD_ID,
    title: `Tasks ${PLAN_CARDS_MAX}–${tasks.length}`,
    status,
    details: latest.details?.trim() ? `${name}: ${latest.details}` : name,
    ...(latest.output?.trim() ? { output: latest.output } : {}),
  };
  return [...own, card];
}

/**
 * The chunks to send so that the stream shows `plan` under `title`, given what it shows already
 * (`shown`; empty for a new stream): the title when it changed, then every card that changed, in
 * order, at most `max` chunks in all. `shown` is what the stream will show once they are sent;
 * `more`: cards changed that had no room, for the next call (sent in order, so a new card never
 * comes before one above it).
 */
export function planChunks(title: string, plan: RunPlan, shown: PlanShown = {}, max: number = PLAN_CHUNKS_PER_CALL): { chunks: PlanChunk[]; shown: PlanShown; more: boolean } {
  const room = Math.max(1, max);
  const next: PlanShown = { ...shown };
  const chunks: PlanChunk[] = [];
  if (shown[TITLE_KEY] !== title) {
    chunks.push({ type: "plan_update", title });
    next[TITLE_KEY] = title;
  }
  for (const task of planCards(plan.tasks)) {
    const chunk = taskChunk(task);
    const fingerprint = JSON.stringify([chunk.title, chunk.status, chunk.details ?? "", chunk.output ?? ""]);
    if (shown[task.id] === fingerprint) continue;
    if (chunks.length >= room) return { chunks, shown: next, more: true };
    chunks.push(chunk);
    next[task.id] = fingerprint;
  }
  return { chunks, shown: next, more: false };
}

/** A stored `shown` read back (a jsonb column: anything else counts as nothing shown). */
export function planShownOf(value: unknown): PlanShown {
  if (!value || typeof value !== "object" || Array.isArray(value)) return {};
  const out: PlanShown = {};
  for (const [k, v] of Object.entries(value)) if (typeof v === "string") out[k] = v;
  return out;
}

/**
 * The message that shows a run's latest step while its live plan waits for Slack to let it start
 * (chat.startStream is Tier 2: about 20 a minute per workspace). Posted in the run's thread, refreshed
 * now and then until the plan starts below it, and then left as it is: its words are true either way
 * (the step is named with the time it came, and the plan is said to follow below it).
 */
export function earlyProgressMessage(p: { title: string; plan: RunPlan; stepAt: Date; stopped?: boolean }): { text: string; blocks: types.KnownBlock[] } {
  const card = p.plan.tasks[p.plan.tasks.length - 1];
  const task = card ? cut(card.title || card.id, PLAN_LIMITS.taskTitle) : "";
  const details = card?.details?.trim() ? cut(card.details, PLAN_LIMITS.details) : "_Working…_";
  return {
    text: `${p.title}: ${task ? `${task}: ` : ""}${details}`,
    blocks: [
      section(`⏳ *${p.title}*`),
      section(`${task ? `*${task}* · ` : ""}${details}`),
      context(
        p.stopped
          ? `Latest step at ${formatUtcTime(p.stepAt)}. The run was stopped before its live plan started.`
          : `Latest step at ${formatUtcTime(p.stepAt)}. The run's live plan follows below this message once Slack lets it start (a workspace starts about 20 a minute); until then the latest step shows here.`,
      ),
    ],
  };
}
