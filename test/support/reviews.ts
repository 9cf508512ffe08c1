// Review messages as a test sees them in the fake Slack, and clicks on them as Slack would send them.

import { CrewClient } from "../../src/adapters/crew/client.js";
import {
  APPROVE_ACTION,
  EDIT_ACTION,
  EDIT_INPUT_ACTION,
  EDIT_NOTE_BLOCK,
  EDIT_TEXT_BLOCK,
  EDIT_VIEW_CALLBACK,
  FEEDBACK_ACTION,
  FEEDBACK_BLOCK,
  REASSIGN_REASON_ACTION,
  REASSIGN_REASON_BLOCK,
  REASSIGN_USER_ACTION,
  REASSIGN_USER_BLOCK,
  REJECT_ACTION,
} from "../../src/adapters/slack/blocks/index.js";
import { silentLogger } from "../../src/log/log.js";
import type { CrewApi, ResumeRequest, ResumeResult } from "../../src/protocols/crew/types.js";
import type { Clock } from "../../src/usecases/ports.js";
import { type ReviewRequestDeps, ReviewRequests } from "../../src/usecases/review-requests.js";
import type { FakeMessage } from "./fake-slack.js";
import { CHANNEL, eventually, type Harness, kickoffViaSlack, startHarness, USER } from "./harness.js";
import { prismaOf } from "./prisma.js";

export interface PendingReview {
  msg: FakeMessage;
  blockId: string;
  reviewId: string;
}

/** The buttons of a review message that is still open (decided ones have none). */
function openReview(msg: FakeMessage): PendingReview | undefined {
  const actions = (msg.blocks as any[] | undefined)?.find((b) => b.type === "actions" && b.elements.some((e: any) => e.action_id === APPROVE_ACTION));
  if (!actions) return undefined;
  const approve = actions.elements.find((e: any) => e.action_id === APPROVE_ACTION);
  return { msg, blockId: actions.block_id, reviewId: approve.value };
}

/** Waits for an open review (in `channel`, default CHANNEL): the `index`-th one, optionally containing a text, skipping `exclude`d ids. */
export function pendingReview(h: Harness, opts: { index?: number; containing?: string; exclude?: Set<string>; timeoutMs?: number; channel?: string } = {}) {
  const { index = 0, containing = "", exclude, channel = CHANNEL } = opts;
  return eventually(
    async () => {
      const review = h.slack
        .messages(channel)
        .filter((m) => JSON.stringify(m.blocks ?? []).includes(containing))
        .map(openReview)
        .filter((r): r is PendingReview => !!r && !exclude?.has(r.reviewId))[index];
      // Slack has the message a moment before the bot stores its ts; wait for both.
      const stored = review && (await h.bot.database.sql.selectFrom("Review").select("id").where("id", "=", review.reviewId).where("messageTs", "is not", null).executeTakeFirst());
      return stored ? review : undefined;
    },
    { what: `pending review #${index + 1}${containing ? ` containing "${containing}"` : ""}`, timeoutMs: opts.timeoutMs },
  );
}

/** Waits for a message in a run's thread (a task message, or a review) whose blocks contain a text. */
export function threadMessage(h: Harness, containing: string, timeoutMs?: number) {
  return eventually(() => h.slack.messages(CHANNEL).find((m) => m.thread_ts && JSON.stringify(m.blocks ?? []).includes(JSON.stringify(containing).slice(1, -1))), {
    what: `a thread message containing "${containing}"`,
    timeoutMs,
  });
}

/** A signed Approve/Reject click with the feedback field's value, as Slack sends it. */
export function clickReview(h: Harness, review: PendingReview, approve: boolean, feedback = "", user = USER) {
  return h.requests.blockAction({
    user_id: user,
    channel_id: review.msg.channel,
    message_ts: review.msg.ts,
    thread_ts: review.msg.thread_ts,
    action: { action_id: approve ? APPROVE_ACTION : REJECT_ACTION, block_id: review.blockId, value: review.reviewId },
    stateValues: { [FEEDBACK_BLOCK]: { [FEEDBACK_ACTION]: { type: "plain_text_input", value: feedback } } },
  });
}

/** The POST /resume calls the crew service received. */
export const resumeCalls = (h: Harness) => h.crew.requests.filter((r) => r.path === "/resume");

/** Starts a run through /crew and its modal; resolves with the stored execution once kicked off. */
export async function startRunViaSlack(h: Harness, topic = "Deep sea vents", timeoutMs?: number) {
  await kickoffViaSlack(h, { topic });
  return eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { kickoffId: { not: null } }, orderBy: { createdAt: "desc" } }), {
    what: "the kickoff",
    timeoutMs,
  });
}

/** Clicks "Edit and approve…" on a review and waits for the modal it opens; resolves with the stored view. */
export async function openEditModal(h: Harness, review: PendingReview, user = USER) {
  const before = h.slack.callsTo("views.open").length;
  await h.requests.blockAction({
    user_id: user,
    channel_id: CHANNEL,
    message_ts: review.msg.ts,
    thread_ts: review.msg.thread_ts,
    trigger_id: h.slack.issueTrigger(user),
    action: { action_id: EDIT_ACTION, block_id: review.blockId, value: review.reviewId },
  });
  await eventually(() => h.slack.callsTo("views.open").length > before, { what: "the edit modal" });
  return [...h.slack.views.values()].filter((v) => v.view.callback_id === EDIT_VIEW_CALLBACK).at(-1)!;
}

/** Submits an edit modal with the edited text and an optional note, as Slack sends it. */
export function submitEdit(h: Harness, view: { id: string; view: any }, edited: string, note = "", user = USER) {
  return h.requests.viewSubmission({
    user_id: user,
    view: {
      id: view.id,
      callback_id: view.view.callback_id,
      private_metadata: view.view.private_metadata,
      state: {
        values: {
          [EDIT_TEXT_BLOCK]: { [EDIT_INPUT_ACTION]: { type: "plain_text_input", value: edited } },
          [EDIT_NOTE_BLOCK]: { [EDIT_INPUT_ACTION]: { type: "plain_text_input", value: note } },
        },
      },
    },
  });
}

/** The current text of a message's blocks (after every chat.update). */
export function messageText(h: Harness, ts: string): string {
  return JSON.stringify(h.slack.messages(CHANNEL).find((m) => m.ts === ts)?.blocks ?? []);
}

/** Submits a Reassign modal as Slack sends it: the person picked and the reason typed. */
export function submitReassign(h: Harness, modal: any, user: string, to: string, reason: string) {
  return h.requests.viewSubmission({
    user_id: user,
    view: {
      callback_id: modal.callback_id,
      private_metadata: modal.private_metadata,
      state: {
        values: {
          [REASSIGN_USER_BLOCK]: { [REASSIGN_USER_ACTION]: { type: "users_select", selected_user: to } },
          [REASSIGN_REASON_BLOCK]: { [REASSIGN_REASON_ACTION]: { type: "plain_text_input", value: reason } },
        },
      },
    },
  });
}

/**
 * Another process's ReviewRequests on the harness bot's database (a second replica's): its Slack
 * effects go into the same outbox, performed by the harness bot's worker; its decisions go through the
 * bot's Reviews. No reviewer rules, escalation or deadlines unless given.
 */
export function otherReviewRequests(h: Harness, clock: Clock, p: Partial<ReviewRequestDeps> & Pick<ReviewRequestDeps, "reminders">): ReviewRequests {
  return new ReviewRequests({
    db: h.bot.database.sql,
    outbox: h.bot.outbox,
    audit: h.bot.lifecycle.audit,
    log: silentLogger,
    clock,
    rulesOf: () => undefined,
    escalateToOf: () => undefined,
    decide: (decision) => h.bot.lifecycle.reviews.decide(decision),
    ...p,
  });
}

/**
 * The bot's own crew client (`crewline.crewClient`), its /resume passed through `resume` (the real
 * call given): a slow network, or an answer held back until something else has happened.
 */
export function resumingThrough(resume: (real: CrewApi, request: ResumeRequest) => Promise<ResumeResult>) {
  return (crew: { name: string; baseUrl: string; token: string }): CrewApi => {
    const real = new CrewClient(crew);
    return {
      listInputs: () => real.listInputs(),
      kickoff: (r) => real.kickoff(r),
      status: (id) => real.status(id),
      stop: (id) => real.stop(id),
      resume: (r) => resume(real, r),
    };
  };
}

/** A clock the test moves on by hand (`offsetMs`), for reminders, deadlines and escalations. */
export function offsetClock() {
  const clock = { offsetMs: 0, now: () => new Date(Date.now() + clock.offsetMs) };
  return clock;
}

/** The research crew's reviewer rules, set on the running bot. */
export const setRules = (h: Harness, users: string[], usergroups: string[] = []) => (h.bot.crews.config("research")!.reviewers = { users, usergroups });

/** A bot where `reviewer` decides by the crew's rules and a review nobody decided by its one reminder (a minute on) is escalated to `escalateTo`. */
export async function escalatingHarness(reviewer: string, escalateTo: string): Promise<{ h: Harness; clock: ReturnType<typeof offsetClock> }> {
  const clock = offsetClock();
  const h = await startHarness({
    config: { reviewReminders: { afterMinutes: 1, max: 1 } },
    research: { escalateTo: { users: [escalateTo], usergroups: [] } },
    crewline: { clock },
  });
  setRules(h, [reviewer]);
  return { h, clock };
}
