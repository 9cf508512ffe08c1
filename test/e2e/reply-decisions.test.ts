// Deciding by replying in a review's thread (#24): approve words, reject prefixes, the private question
// for anything else, strangers ignored, repeated deliveries and two replicas deciding once, hostile
// replies; and flow requests answered by reply. Through signed message events on /slack/events, the
// Slack stand-in and the local crew service (and the local flow service).

import crypto from "node:crypto";
import { afterEach, describe, expect, it, vi } from "vitest";
import { REPLY_APPROVE_ACTION, REPLY_IGNORE_ACTION, REPLY_QUESTION_BLOCK, REPLY_REJECT_ACTION, RUN_ON_MESSAGE_SHORTCUT } from "../../src/adapters/slack/blocks/index.js";
import { createCrewline } from "../../src/app.js";
import { silentLogger } from "../../src/log/log.js";
import { openDatabase } from "../../src/store/db/database.js";
import { ReplyDecisions } from "../../src/usecases/reply-decisions.js";
import { FLOW_CHANNEL, type FlowHarness, flowRow, pendingFlowRequest, startFlowHarness } from "../support/flows.js";
import { CHANNEL, eventually, freePort, type Harness, kickoffFormShownAfter, SIGNING_SECRET, startHarness, submitKickoffForm, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { clickReview, messageText, pendingReview, resumeCalls, startRunViaSlack } from "../support/reviews.js";
import { slackRequester } from "../support/slack-requests.js";
import { usePostgres } from "../support/test-database.js";

let h: Harness;
let f: FlowHarness | undefined;
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  while (cleanups.length) await cleanups.pop()!().catch(() => {});
  // A flow harness closes its bot itself.
  if (f) await f.close();
  else await h?.close();
  h = undefined as unknown as Harness;
  f = undefined;
});

const BOB = "U0BOB";
let tsCounter = 0;
/** A fresh Slack ts, later than every message the stand-in posted. */
const newTs = () => `${Math.floor(Date.now() / 1000) + 1000}.${String(++tsCounter).padStart(6, "0")}`;
/** Lets anything that would wrongly happen arrive before asserting that it did not: the bot has nothing left to do (settled() in test/support/harness.ts). */
const settle = () => (f?.h ?? h).settled();

const resumeBody = (i: number) => resumeCalls(h)[i]!.body as { is_approve: boolean; human_feedback: string };
const ephemeralsFor = (user: string) => h.slack.callsTo("chat.postEphemeral").filter((c) => (c.args as any).user === user);

/** A person's reply in a thread, as Slack's Events API delivers it. */
function replyEvent(text: string, threadTs: string, p: { user?: string; channel?: string; ts?: string; extra?: Record<string, unknown> } = {}) {
  return { type: "message", channel: p.channel ?? CHANNEL, user: p.user ?? USER, text, ts: p.ts ?? newTs(), thread_ts: threadTs, channel_type: "channel", ...p.extra };
}

/** Starts a run and waits for its first review; resolves with the run's thread ts and the review. */
async function runWaitingForReview() {
  const execution = await startRunViaSlack(h);
  const review = await pendingReview(h);
  const run = await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } });
  return { threadTs: run.threadTs!, review };
}

const decisionAudit = (reviewId: string) =>
  prismaOf(h.bot.database)
    .auditRecord.findMany({ where: { kind: "decision" } })
    .then((rows) => rows.filter((r) => (r.detail as any)?.reviewId === reviewId));

/** A question as posted (chat.postEphemeral's arguments), with the ts of the ephemeral its replier sees. */
const withTs = (args: any) => {
  const shown = h.slack.ephemerals.find((e) => e.user === args.user && e.channel === args.channel && JSON.stringify(e.blocks) === JSON.stringify(args.blocks));
  return { ...args, ts: shown!.ts };
};

/** The private question asked of a user (its blocks and ts), once posted. */
const questionFor = (user: string) =>
  eventually(
    () => {
      const call = ephemeralsFor(user).find((c) => JSON.stringify((c.args as any).blocks ?? []).includes(REPLY_QUESTION_BLOCK));
      return call && withTs(call.args);
    },
    { what: "the private question" },
  );

/** What the question's replier sees in its place now (undefined once removed). */
const shownQuestion = (question: any) => h.slack.ephemerals.find((e) => e.ts === question.ts && e.user === question.user);

/** A click on a button of a private question, as Slack sends it from the ephemeral, with a response_url handed to the clicker. */
function clickButton(question: any, blockId: string, button: { action_id: string; value: string }, user = USER) {
  return h.requests.blockAction({
    user_id: user,
    channel_id: question.channel,
    message_ts: question.ts,
    thread_ts: question.thread_ts,
    is_ephemeral: true,
    response_url: h.slack.responseUrlFor({ channel: question.channel, user, messageTs: question.ts, threadTs: question.thread_ts }),
    action: { action_id: button.action_id, block_id: blockId, value: button.value },
  });
}

/** A click on one of the question's buttons (Reject with this, Approve, Ignore). */
function clickQuestion(question: any, actionId: string, user = USER) {
  const actions = question.blocks.find((b: any) => b.block_id === REPLY_QUESTION_BLOCK);
  return clickButton(
    question,
    REPLY_QUESTION_BLOCK,
    actions.elements.find((e: any) => e.action_id === actionId),
    user,
  );
}

describe("deciding a review by replying in its thread", () => {
  it("'lgtm' from the starter approves: the crew is resumed once, the review message shows it like a click, the audit says it came from a reply", async () => {
    // One task: once approved, no other review waits in the thread.
    h = await startHarness({ crew: { tasks: [{ id: "task-research", name: "research_task", agent: "Senior Research Analyst", humanInput: true }] } });
    const { threadTs, review } = await runWaitingForReview();
    const event = replyEvent("LGTM!", threadTs);
    expect((await h.requests.event(event)).status).toBe(200);

    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    expect(resumeBody(0)).toMatchObject({ is_approve: true });
    const text = await eventually(() => {
      const t = messageText(h, review.msg.ts);
      return t.includes("Approved") ? t : undefined;
    });
    expect(text).toContain(`<@${USER}>`);
    expect(text).not.toContain("review_approve");
    expect(await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).toMatchObject({ state: "approved", decidedBy: USER });
    const audit = await decisionAudit(review.reviewId);
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ actor: USER, decision: "approve", detail: { outcome: "decided", via: "reply" } });

    // Slack delivers the same message again (a retry): nothing more happens, nothing is said.
    await h.requests.event(event, { retryNum: 1, retryReason: "http_timeout" });
    await settle();
    expect(resumeCalls(h)).toHaveLength(1);
    expect(ephemeralsFor(USER)).toHaveLength(0);

    // Another approve word later, on the decided review: answered privately, nothing sent.
    await h.requests.event(replyEvent("approved", threadTs));
    await eventually(() => ephemeralsFor(USER).some((c) => (c.args as any).text === "You already approved this review."), { what: "the already-decided answer" });
    // Talk in the thread after the decision is not for the bot.
    await h.requests.event(replyEvent("great, thanks everyone", threadTs));
    await settle();
    expect(ephemeralsFor(USER)).toHaveLength(1);
    expect(resumeCalls(h)).toHaveLength(1);
    expect(h.slack.violations).toEqual([]);
  });

  it("an approve written before the review it would decide was posted (Slack delivering it late, after a retry) decides nothing", async () => {
    h = await startHarness();
    const { threadTs, review: round1 } = await runWaitingForReview();
    // Written while round 1 waited (its ts just after round 1's message), but not delivered yet.
    const writtenTs = `${round1.msg.ts}1`;
    // Someone's click rejects round 1 meanwhile, and the crew posts round 2.
    await clickReview(h, round1, false, "shorter");
    const round2 = await pendingReview(h, { exclude: new Set([round1.reviewId]) });
    // Slack's retry of the reply arrives now: it was about round 1, which is decided.
    const late = await h.requests.event(replyEvent("lgtm", threadTs, { ts: writtenTs }), { retryNum: 1, retryReason: "http_error" });
    expect(late.status).toBe(200);
    await settle();
    expect(resumeCalls(h)).toHaveLength(1);
    expect(await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: round2.reviewId } })).toMatchObject({ state: "pending", round: 2 });
    // The same words written now decide round 2.
    await h.requests.event(replyEvent("lgtm", threadTs));
    await eventually(() => resumeCalls(h).length === 2 || undefined, { what: "round 2 approved" });
    expect(resumeBody(1).is_approve).toBe(true);
  });

  it("a reply also sent to the channel (thread_broadcast) decides as any reply does", async () => {
    h = await startHarness();
    const { threadTs, review } = await runWaitingForReview();
    await h.requests.event(replyEvent("lgtm", threadTs, { extra: { subtype: "thread_broadcast" } }));
    await eventually(async () => (await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state === "approved" || undefined, {
      what: "the review approved",
    });
    expect(resumeCalls(h)).toHaveLength(1);
    expect(resumeBody(0).is_approve).toBe(true);
  });

  it("a reply with a file attached (file_share) decides by its text; a file alone asks nothing and decides nothing", async () => {
    h = await startHarness();
    const { threadTs, review } = await runWaitingForReview();
    const files = [{ id: "F0SHOT", name: "screenshot.png", mimetype: "image/png" }];
    await h.requests.event(replyEvent("", threadTs, { extra: { subtype: "file_share", files } }));
    await h.requests.event(replyEvent(" \u200B\n", threadTs, { extra: { subtype: "file_share", files } }));
    await h.settled();
    expect(ephemeralsFor(USER)).toHaveLength(0);
    expect(resumeCalls(h)).toHaveLength(0);
    await h.requests.event(replyEvent("LGTM", threadTs, { extra: { subtype: "file_share", files } }));
    await eventually(async () => (await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state === "approved" || undefined, {
      what: "the review approved",
    });
    expect(resumeCalls(h)).toHaveLength(1);
    expect(resumeBody(0).is_approve).toBe(true);
  });

  it("'changes: …' rejects with the rest as feedback; 'reject:' alone asks for the feedback", async () => {
    h = await startHarness();
    const { threadTs, review } = await runWaitingForReview();
    await h.requests.event(replyEvent("reject:", threadTs));
    await eventually(() => ephemeralsFor(USER).some((c) => /after the colon/.test((c.args as any).text)), { what: "the feedback-needed answer" });
    expect(resumeCalls(h)).toHaveLength(0);

    await h.requests.event(replyEvent("Changes: shorter intro", threadTs));
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    expect(resumeBody(0)).toMatchObject({ is_approve: false, human_feedback: "shorter intro" });
    const stored = await eventually(async () => {
      const r = await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } });
      return r.state === "rejected" ? r : undefined;
    });
    expect(stored).toMatchObject({ decidedBy: USER, feedback: "shorter intro" });
    expect((await decisionAudit(review.reviewId))[0]).toMatchObject({ decision: "reject", feedback: "shorter intro", detail: { via: "reply" } });
    // Round 2 is posted in the same thread and waits.
    await pendingReview(h, { exclude: new Set([review.reviewId]) });
  });

  it("any other reply gets a private question, never a guess: Reject with this sends the reply as feedback; Ignore does nothing", async () => {
    h = await startHarness();
    const { threadTs, review } = await runWaitingForReview();
    const reply = "Could you make the intro shorter and cite the 2019 survey?";
    const event = replyEvent(reply, threadTs);
    await h.requests.event(event);
    const question = await questionFor(USER);
    expect(question).toMatchObject({ channel: CHANNEL, thread_ts: threadTs });
    expect(question.text).toContain("round 1 with your reply as feedback?");
    expect(question.text).toContain("research_task");
    const buttons = question.blocks.find((b: any) => b.block_id === REPLY_QUESTION_BLOCK).elements;
    expect(buttons.map((b: any) => b.text.text)).toEqual(["Reject with this", "Approve", "Ignore"]);
    // Only an id travels in the buttons: the text stays on the server.
    expect(JSON.stringify(buttons)).not.toContain("2019 survey");
    // The same event again (a retry) asks once.
    await h.requests.event(event, { retryNum: 1 });
    await settle();
    expect(ephemeralsFor(USER)).toHaveLength(1);
    expect(resumeCalls(h)).toHaveLength(0);

    // Someone else cannot use the question's buttons.
    await clickQuestion(question, REPLY_REJECT_ACTION, BOB);
    await eventually(() => ephemeralsFor(BOB).some((c) => /can't match this button/.test((c.args as any).text)), { what: "the refusal" });
    expect(resumeCalls(h)).toHaveLength(0);

    await clickQuestion(question, REPLY_REJECT_ACTION);
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    expect(resumeBody(0)).toMatchObject({ is_approve: false, human_feedback: reply });
    await eventually(() => messageText(h, review.msg.ts).includes("Rejected"), { what: "the rejected review message" });
    expect((await decisionAudit(review.reviewId))[0]).toMatchObject({ decision: "reject", feedback: reply, detail: { via: "reply" } });
    // The answered question is replaced in place (through the click's response_url): what was done, no buttons left.
    const answered = await eventually(() => (shownQuestion(question)?.text?.includes("sent as feedback") ? shownQuestion(question) : undefined), {
      what: "the question replaced",
    });
    expect(JSON.stringify(answered!.blocks)).not.toContain(REPLY_QUESTION_BLOCK);
    expect(JSON.stringify(answered!.blocks)).not.toContain('"button"');
    expect(answered!.thread_ts).toBe(threadTs);
    // Bob's click found no question of his to replace (he was told apart); the replier's did.
    expect(h.slack.callsTo("response_url").map((c) => [(c.args as any).replace_original, c.error])).toEqual([
      [true, "message_not_found"],
      [true, undefined],
    ]);
    // A second click on the same question (a stale copy of it) sends nothing more, and says so in its place.
    await clickQuestion(question, REPLY_APPROVE_ACTION);
    await eventually(() => /already answered/.test(shownQuestion(question)?.text ?? ""), { what: "the already-answered note" });
    expect(resumeCalls(h)).toHaveLength(1);

    // Round 2: another question, ignored.
    const round2 = await pendingReview(h, { exclude: new Set([review.reviewId]) });
    const before = ephemeralsFor(USER).length;
    await h.requests.event(replyEvent("hmm, not sure yet", threadTs));
    await eventually(() => ephemeralsFor(USER).length === before + 1, { what: "the second question" });
    const second = withTs(ephemeralsFor(USER).at(-1)!.args);
    expect(second.text).toContain("round 2");
    expect(shownQuestion(second)).toBeDefined();
    // Ignore removes the question.
    await clickQuestion(second, REPLY_IGNORE_ACTION);
    await eventually(() => shownQuestion(second) === undefined, { what: "the ignored question removed" });
    await settle();
    expect(ephemeralsFor(USER)).toHaveLength(before + 1);
    expect(resumeCalls(h)).toHaveLength(1);
    expect((await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: round2.reviewId } })).state).toBe("pending");
  });

  it("a reply edited after its question was asked: Reject with this sends the words as they read now", async () => {
    h = await startHarness();
    const { threadTs } = await runWaitingForReview();
    const event = replyEvent("Cite the 2019 survey", threadTs);
    await h.requests.event(event);
    const question = await questionFor(USER);
    const edited = { ...event, text: "Cite the 2020 survey instead" };
    await h.requests.event({ type: "message", subtype: "message_changed", hidden: true, channel: CHANNEL, ts: newTs(), message: edited, previous_message: event });
    await eventually(async () => (await prismaOf(h.bot.database).threadReply.findFirstOrThrow({ where: { ts: event.ts } })).text === edited.text, { what: "the edit taken" });
    // Someone else's edit event naming the reply changes nothing.
    await h.requests.event({ type: "message", subtype: "message_changed", hidden: true, channel: CHANNEL, ts: newTs(), message: { ...edited, user: BOB, text: "Bob's words" } });
    await settle();
    await clickQuestion(question, REPLY_REJECT_ACTION);
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    expect(resumeBody(0)).toMatchObject({ is_approve: false, human_feedback: "Cite the 2020 survey instead" });
  });

  it("a reply deleted after its question was asked is not sent by the question, and its words are not kept", async () => {
    h = await startHarness();
    const { threadTs } = await runWaitingForReview();
    const event = replyEvent("Actually the intro is wrong, ignore me", threadTs);
    await h.requests.event(event);
    const question = await questionFor(USER);
    await h.requests.event({ type: "message", subtype: "message_deleted", hidden: true, channel: CHANNEL, ts: newTs(), deleted_ts: event.ts, previous_message: { ...event } });
    await eventually(async () => (await prismaOf(h.bot.database).threadReply.findFirstOrThrow({ where: { ts: event.ts } })).text === null, { what: "the words forgotten" });
    await clickQuestion(question, REPLY_REJECT_ACTION);
    await eventually(() => /can't match this button/.test(shownQuestion(question)?.text ?? ""), { what: "the refusal in place" });
    await settle();
    expect(resumeCalls(h)).toHaveLength(0);
  });

  it("talk from people who may not decide, bot messages, edits, other subtypes and other threads are ignored without a word; their approve or reject is told who decides", async () => {
    h = await startHarness();
    const { threadTs, review } = await runWaitingForReview();
    h.bot.crews.config("research")!.reviewers = { users: [USER], usergroups: [] };
    const ignored = [
      replyEvent("what is this?", threadTs, { user: BOB }),
      replyEvent("lgtm", threadTs, { extra: { bot_id: "B0OTHER" } }),
      replyEvent("lgtm", threadTs, { extra: { subtype: "bot_message" } }),
      replyEvent("lgtm", threadTs, { extra: { subtype: "channel_join" } }),
      { type: "message", subtype: "message_changed", channel: CHANNEL, ts: newTs(), message: { type: "message", user: USER, text: "lgtm", ts: newTs(), thread_ts: threadTs } },
      { type: "message", subtype: "message_deleted", channel: CHANNEL, ts: newTs(), deleted_ts: threadTs },
      replyEvent("lgtm", "1700000000.000100"),
      replyEvent("lgtm", threadTs, { channel: "C0ELSEWHERE" }),
      // A top-level message (no thread), and a thread's own parent.
      { type: "message", channel: CHANNEL, user: USER, text: "lgtm", ts: newTs() },
      { type: "message", channel: CHANNEL, user: USER, text: "lgtm", ts: threadTs, thread_ts: threadTs },
      // Malformed: no user, a text that is not a string, ids that are not strings.
      { type: "message", channel: CHANNEL, text: "lgtm", ts: newTs(), thread_ts: threadTs },
      replyEvent("lgtm", threadTs, { extra: { text: { nested: ["lgtm"] } } }),
      replyEvent("lgtm", threadTs, { extra: { user: 42 } }),
      replyEvent("lgtm", threadTs, { extra: { thread_ts: ["x"] } }),
    ];
    for (const event of ignored) expect((await h.requests.event(event)).status, JSON.stringify(event)).toBe(200);
    await settle();
    await h.settled();
    expect(resumeCalls(h)).toHaveLength(0);
    expect(h.slack.callsTo("chat.postEphemeral")).toHaveLength(0);
    expect(await prismaOf(h.bot.database).threadReply.count()).toBe(0);
    expect((await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state).toBe("pending");

    // Bob meant to decide: each approve or reject is told privately who may, once even if Slack delivers it again.
    const lgtm = replyEvent("lgtm", threadTs, { user: BOB });
    for (const event of [lgtm, replyEvent("changes: do it my way", threadTs, { user: BOB }), lgtm]) await h.requests.event(event);
    await eventually(() => ephemeralsFor(BOB).length >= 2, { what: "Bob's refusals" });
    await h.settled();
    expect(ephemeralsFor(BOB).map((c) => (c.args as any).text)).toEqual([
      `Only <@${USER}> may decide this review, so nothing was sent to the crew.`,
      `Only <@${USER}> may decide this review, so nothing was sent to the crew.`,
    ]);
    expect(ephemeralsFor(BOB).every((c) => (c.args as any).thread_ts === threadTs)).toBe(true);
    expect(resumeCalls(h)).toHaveLength(0);
    expect((await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state).toBe("pending");

    // The reviewer's reply still decides.
    await h.requests.event(replyEvent("👍", threadTs));
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
  });

  it("a reply of about 1 MiB of any text is cut, read fast and taken without a crash", async () => {
    h = await startHarness();
    const { threadTs, review } = await runWaitingForReview();
    const filler = "\u0000<!here> ✓ 😀 \u202e".repeat(Math.floor((1024 * 1024 - 4096) / 30));
    const started = Date.now();
    expect((await h.requests.event(replyEvent(`changes: ${filler}`, threadTs))).status).toBe(200);
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    expect(Date.now() - started).toBeLessThan(5000);
    const feedback = resumeBody(0).human_feedback;
    expect(feedback.length).toBeLessThanOrEqual(4000);
    expect(feedback).not.toContain("\u0000");
    // Huge text that asks nothing: one question, which says the reply was cut. (Its round 2 may be
    // stored already: only the rejected round is left out.)
    await pendingReview(h, { exclude: new Set([review.reviewId]) });
    await h.requests.event(replyEvent("x".repeat(1024 * 1024 - 4096), threadTs));
    const question = await questionFor(USER);
    expect(JSON.stringify(question.blocks)).toContain("first 4,000 characters");
    expect(h.slack.violations).toEqual([]);
  });
});

describe("a reply where several reviews wait in one thread", () => {
  /** A click on the "which review" button naming `reviewId` (or on it with a forged value). */
  function clickPick(question: any, reviewId: string, user = USER, value?: string) {
    const block = question.blocks.find((b: any) => b.accessory?.value?.includes(reviewId));
    return clickButton(question, block.block_id, { ...block.accessory, value: value ?? block.accessory.value }, user);
  }
  const questions = () => ephemeralsFor(USER).filter((c) => JSON.stringify((c.args as any).blocks ?? []).includes(REPLY_QUESTION_BLOCK));

  it("an approve or reject that could mean either run's review asks which, never guesses; its button decides the one it names, once", async () => {
    h = await startHarness();
    const first = await runWaitingForReview();
    // A second run, started with the message shortcut on a reply in the first run's thread, shares that thread.
    const viewsBefore = h.slack.callsTo("views.update").length;
    await h.requests.messageShortcut({
      callback_id: RUN_ON_MESSAGE_SHORTCUT,
      user_id: USER,
      channel_id: CHANNEL,
      message: { ts: newTs(), thread_ts: first.threadTs, user: BOB, text: "now the tides" },
    });
    await submitKickoffForm(h, await kickoffFormShownAfter(h, viewsBefore), { topic: "tides" });
    const second = await pendingReview(h, { exclude: new Set([first.review.reviewId]) });
    const runs = await prismaOf(h.bot.database).execution.findMany({ orderBy: { createdAt: "asc" } });
    expect(runs.map((r) => r.threadTs)).toEqual([first.threadTs, first.threadTs]);

    // "reject:" without feedback is told to write it, as with one review, once however often Slack delivers it; no question.
    const bare = replyEvent("reject:", first.threadTs);
    await h.requests.event(bare);
    await eventually(() => ephemeralsFor(USER).some((c) => /write what should change/.test((c.args as any).text)), { what: "the feedback request" });
    await h.requests.event(bare, { retryNum: 1 });
    await settle();
    expect(ephemeralsFor(USER).filter((c) => /write what should change/.test((c.args as any).text))).toHaveLength(1);

    // "changes: …" asks which review gets it; Ignore drops it.
    await h.requests.event(replyEvent("changes: cite the survey", first.threadTs));
    const rejectQuestion = await eventually(() => questions()[0] && withTs(questions()[0]!.args), { what: "the reject question" });
    expect(rejectQuestion.text).toBe("2 reviews wait in this thread. Which one should get your reply as feedback?");
    await clickQuestion(rejectQuestion, REPLY_IGNORE_ACTION);
    await eventually(() => shownQuestion(rejectQuestion) === undefined, { what: "the ignored question removed" });

    // "lgtm": which one? Both reviews are offered, the newest first; nothing reaches the crew.
    await h.requests.event(replyEvent("lgtm", first.threadTs));
    const question = await eventually(() => questions()[1] && withTs(questions()[1]!.args), { what: "the approve question" });
    expect(question.text).toBe("2 reviews wait in this thread. Which one do you approve?");
    const offered = question.blocks.filter((b: any) => b.accessory).map((b: any) => b.accessory.value.split(":")[1]);
    expect(offered).toEqual([second.reviewId, first.review.reviewId]);
    expect(JSON.stringify(question.blocks)).toContain("research_task");
    await settle();
    expect(resumeCalls(h)).toHaveLength(0);

    // Someone else's click, and a forged value naming another review, decide nothing.
    await clickPick(question, second.reviewId, BOB);
    await eventually(() => ephemeralsFor(BOB).some((c) => /can't match this button/.test((c.args as any).text)), { what: "Bob's refusal" });
    const forged = question.blocks.find((b: any) => b.accessory?.value?.includes(second.reviewId)).accessory.value.replace(second.reviewId, crypto.randomUUID());
    await clickPick(question, second.reviewId, USER, forged);
    await eventually(() => /can't match this button/.test(shownQuestion(question)?.text ?? ""), { what: "the forged click refused in place" });
    await settle();
    expect(resumeCalls(h)).toHaveLength(0);

    // The second run's button approves that review alone, once.
    await clickPick(question, second.reviewId);
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    expect(resumeCalls(h)[0]!.body).toMatchObject({ execution_id: runs[1]!.kickoffId, is_approve: true });
    await eventually(() => /Done: approved/.test(shownQuestion(question)?.text ?? ""), { what: "the question replaced" });
    // The audit row is written once the crew took the decision (after its /resume answered).
    const audit = await eventually(async () => (await decisionAudit(second.reviewId))[0], { what: "the decision's audit" });
    expect(audit).toMatchObject({ decision: "approve", detail: { via: "reply" } });
    // The same question's other button: answered already; the first run's review still waits.
    await clickPick(question, first.review.reviewId);
    await eventually(() => /already answered/.test(shownQuestion(question)?.text ?? ""), { what: "the already-answered note" });
    await settle();
    expect(resumeCalls(h)).toHaveLength(1);
    expect((await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: first.review.reviewId } })).state).toBe("pending");
  });
  it("every run of a busy thread counts, and talk is asked about the newest review, not the highest round", async () => {
    h = await startHarness();
    const first = await runWaitingForReview();
    // The first run's review is rejected by reply: its round 2 waits, older than every run started below.
    await h.requests.event(replyEvent("changes: shorter", first.threadTs));
    const seen = new Set([first.review.reviewId]);
    seen.add((await pendingReview(h, { exclude: seen })).reviewId);
    let newest = "";
    for (let i = 0; i < 5; i++) {
      const viewsBefore = h.slack.callsTo("views.update").length;
      await h.requests.messageShortcut({
        callback_id: RUN_ON_MESSAGE_SHORTCUT,
        user_id: USER,
        channel_id: CHANNEL,
        message: { ts: newTs(), thread_ts: first.threadTs, user: BOB, text: `run ${i}` },
      });
      await submitKickoffForm(h, await kickoffFormShownAfter(h, viewsBefore), { topic: `run ${i}` });
      newest = (await pendingReview(h, { exclude: seen })).reviewId;
      seen.add(newest);
    }
    expect(await prismaOf(h.bot.database).review.count({ where: { state: "pending" } })).toBe(6);

    await h.requests.event(replyEvent("lgtm", first.threadTs));
    const which = await eventually(() => questions()[0] && withTs(questions()[0]!.args), { what: "the which question" });
    expect(which.text).toBe("6 reviews wait in this thread. Which one do you approve?");
    expect(JSON.stringify(which.blocks)).toContain("1 more");

    await h.requests.event(replyEvent("hmm, not sure about the intro", first.threadTs));
    const question = await eventually(() => questions()[1] && withTs(questions()[1]!.args), { what: "the question" });
    expect(question.text).toBe("Reject *research_task* round 1 with your reply as feedback?");
    // Its Reject button decides the newest run's review.
    await clickQuestion(question, REPLY_REJECT_ACTION);
    await eventually(() => resumeCalls(h).length === 2, { what: "the resume" });
    const runs = await prismaOf(h.bot.database).execution.findMany({ orderBy: { createdAt: "asc" } });
    expect(resumeCalls(h)[1]!.body).toMatchObject({ execution_id: runs.at(-1)!.kickoffId, is_approve: false, human_feedback: "hmm, not sure about the intro" });
    // The crew has the decision before the bot records it.
    await eventually(async () => (await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: newest } })).state === "rejected", { what: "the newest review rejected" });
  });
});

describe("a reply while the database is down", () => {
  /** As Slack sends a reply in a thread: it names who wrote the thread's parent. */
  const under = (parent: string) => ({ extra: { parent_user_id: parent } });
  const outage = () => vi.spyOn(ReplyDecisions.prototype, "onReply").mockRejectedValue(new Error("Can't reach database server at 127.0.0.1:5432"));

  it("an approve or reject is told it was not taken (nothing reaches the crew); other talk gets nothing", async () => {
    h = await startHarness();
    const { threadTs, review } = await runWaitingForReview();
    const down = outage();
    await h.requests.event(replyEvent("lgtm", threadTs, under(h.slack.botUserId)));
    const note = await eventually(() => ephemeralsFor(USER).at(-1));
    expect(String((note.args as any).text)).toMatch(/not taken as a decision.*try again/);
    expect(String((note.args as any).text)).not.toContain("5432");
    await h.requests.event(replyEvent("what do you all think?", threadTs, under(h.slack.botUserId)));
    await settle();
    expect(ephemeralsFor(USER)).toHaveLength(1);
    expect(resumeCalls(h)).toHaveLength(0);
    down.mockRestore();
    // Back: a new reply decides.
    await h.requests.event(replyEvent("approve", threadTs, under(h.slack.botUserId)));
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    expect((await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).decidedBy).toBe(USER);
  });

  it("an approve in a thread whose parent is someone else's (any other thread of the channel) gets no word; under the bot's, it does", async () => {
    h = await startHarness();
    const { threadTs } = await runWaitingForReview();
    outage();
    // A thread under a person's message: no review can be there, unless a run was started on that
    // message with the shortcut (such a run's approve goes unanswered while the database is down).
    await h.requests.event(replyEvent("lgtm", "1700000000.000100", under(BOB)));
    await h.requests.event(replyEvent("approve", "1700000000.000200", { user: BOB, ...under(USER) }));
    // Under the bot's announcement, the same approve is told.
    await h.requests.event(replyEvent("approve", threadTs, under(h.slack.botUserId)));
    await settle();
    expect(h.slack.callsTo("chat.postEphemeral").map((c) => [(c.args as any).user, (c.args as any).thread_ts])).toEqual([[USER, threadTs]]);
    expect(resumeCalls(h)).toHaveLength(0);
  });
});

describe.runIf(usePostgres)("deciding by reply with two replicas", () => {
  it("the same reply delivered to both replicas at once, and again: one decision, one /resume, one question", async () => {
    h = await startHarness();
    // A second bot on the same database, with its own outbox worker and replica id.
    const port = await freePort();
    const second = createCrewline(
      { ...h.config, port, publicUrl: `http://127.0.0.1:${port}` },
      { log: silentLogger, database: openDatabase({ databaseUrl: h.db.url!, dataDir: "unused" }), progressIntervalMs: 200 },
    );
    await second.start();
    cleanups.push(async () => {
      await second.stop();
      await second.database.close();
    });
    const other = slackRequester({ baseUrl: `http://127.0.0.1:${port}`, signingSecret: SIGNING_SECRET, responseUrlBase: h.slack.responseUrlBase });

    const { threadTs, review } = await runWaitingForReview();
    const approve = replyEvent("ship it", threadTs);
    await Promise.all([h.requests.event(approve), other.event(approve), h.requests.event(approve, { retryNum: 1 }), other.event(approve, { retryNum: 2 })]);
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    await settle();
    expect(resumeCalls(h)).toHaveLength(1);
    expect(await decisionAudit(review.reviewId)).toHaveLength(1);
    expect(ephemeralsFor(USER)).toHaveLength(0);

    await pendingReview(h, { exclude: new Set([review.reviewId]) });
    const question = replyEvent("not sure about the second part", threadTs);
    await Promise.all([h.requests.event(question), other.event(question), other.event(question, { retryNum: 1 })]);
    await questionFor(USER);
    await settle();
    expect(ephemeralsFor(USER)).toHaveLength(1);
  });
});

describe("answering a flow request by reply", () => {
  it("an outcome named in the reply is what the flow receives; anything else asks first", async () => {
    f = await startFlowHarness();
    h = f.h;
    await f.flow.send({ output: "Draft one", message: "Please review" });
    const first = await pendingFlowRequest(f.h, "Draft one");
    await f.h.requests.event(replyEvent("rejected: needs sources", first.msg.ts, { channel: FLOW_CHANNEL }));
    await eventually(() => f!.flow.answers.length === 1, { what: "the answer" });
    expect(f.flow.answers[0]).toMatchObject({ feedback: "rejected\n\nneeds sources", source: "slack" });
    await eventually(async () => (await flowRow(f!.h, first.id)).state === "answered");
    const audit = await prismaOf(f.h.bot.database).auditRecord.findFirstOrThrow({ where: { flowRequestId: first.id, kind: "flow_decision" } });
    expect(audit).toMatchObject({ actor: USER, decision: "rejected", feedback: "needs sources", detail: { via: "reply" } });

    await f.flow.send({ output: "Draft two", message: "Again" });
    const second = await pendingFlowRequest(f.h, "Draft two");
    await f.h.requests.event(replyEvent("hm, the title?", second.msg.ts, { channel: FLOW_CHANNEL }));
    const question = await questionFor(USER);
    expect(question.blocks.find((b: any) => b.block_id === REPLY_QUESTION_BLOCK).elements.map((e: any) => e.text.text)).toEqual(["rejected with this", "approved", "Ignore"]);
    await clickQuestion(question, REPLY_APPROVE_ACTION);
    await eventually(() => f!.flow.answers.length === 2, { what: "the second answer" });
    expect(f.flow.answers[1]).toMatchObject({ feedback: "approved" });
    await eventually(() => shownQuestion(question)?.text === "✅ Done: approved.", { what: "the question replaced" });

    // Replies to an answered request: approve words are answered privately, talk is ignored.
    const before = ephemeralsFor(USER).length;
    await f.h.requests.event(replyEvent("lgtm", second.msg.ts, { channel: FLOW_CHANNEL }));
    await eventually(() => ephemeralsFor(USER).length === before + 1);
    expect((ephemeralsFor(USER).at(-1)!.args as any).text).toMatch(/already answered/);
    await f.h.requests.event(replyEvent("thanks!", second.msg.ts, { channel: FLOW_CHANNEL }));
    await settle();
    expect(ephemeralsFor(USER)).toHaveLength(before + 1);
    expect(f.flow.calls).toHaveLength(2);
  });

  it("a run started on a request's message shares its thread: while both wait an approve is never a guess; then a reply goes to whichever waits", async () => {
    f = await startFlowHarness();
    h = f.h;
    await f.flow.send({ output: "Draft one", message: "Please review", emit: ["ship", "hold"] });
    const request = await pendingFlowRequest(f.h, "Draft one");
    const viewsBefore = h.slack.callsTo("views.update").length;
    await h.requests.messageShortcut({
      callback_id: RUN_ON_MESSAGE_SHORTCUT,
      user_id: USER,
      channel_id: FLOW_CHANNEL,
      message: { ts: request.msg.ts, user: BOB, text: "Draft one" },
    });
    await submitKickoffForm(h, await kickoffFormShownAfter(h, viewsBefore), { topic: "draft" });
    const review = await pendingReview(h, { channel: FLOW_CHANNEL });

    // Both wait: "approved", or the flow's own outcome "ship", is taken as neither, and says so once each.
    await h.requests.event(replyEvent("ship", request.msg.ts, { channel: FLOW_CHANNEL }));
    await eventually(() => ephemeralsFor(USER).some((c) => /both wait/.test((c.args as any).text)), { what: "the both-waiting note for an outcome" });
    const both = replyEvent("approved", request.msg.ts, { channel: FLOW_CHANNEL });
    await h.requests.event(both);
    await eventually(() => ephemeralsFor(USER).some((c) => /both wait/.test((c.args as any).text)), { what: "the both-waiting note" });
    await h.requests.event(both, { retryNum: 1 });
    await settle();
    expect(ephemeralsFor(USER).filter((c) => /both wait/.test((c.args as any).text))).toHaveLength(2);
    expect(resumeCalls(h)).toHaveLength(0);
    expect(f.flow.calls).toHaveLength(0);

    // The crew's review is decided with its button: a reply now answers the request, which still waits.
    await clickReview(h, review, true);
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    await h.requests.event(replyEvent("ship", request.msg.ts, { channel: FLOW_CHANNEL }));
    await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
    expect(f.flow.answers[0]).toMatchObject({ feedback: "ship" });
    await eventually(async () => (await flowRow(f!.h, request.id)).state === "answered");
    expect(resumeCalls(h)).toHaveLength(1);
  });

  it("an outcome named by someone the flow's rules leave out is told who answers; their talk is ignored", async () => {
    f = await startFlowHarness({ flow: { reviewers: { users: [BOB], usergroups: [] } } });
    h = f.h;
    await f.flow.send({ output: "Draft one", message: "Please review" });
    const request = await pendingFlowRequest(f.h, "Draft one");
    await f.h.requests.event(replyEvent("what about the title?", request.msg.ts, { channel: FLOW_CHANNEL }));
    await f.h.requests.event(replyEvent("approved", request.msg.ts, { channel: FLOW_CHANNEL }));
    await eventually(() => ephemeralsFor(USER).length === 1, { what: "the refusal" });
    await settle();
    expect(ephemeralsFor(USER).map((c) => (c.args as any).text)).toEqual([`Only <@${BOB}> may answer this request, so nothing was sent to the flow.`]);
    expect(f.flow.calls).toHaveLength(0);
    expect((await flowRow(f.h, request.id)).state).toBe("pending");
    // Bob's reply answers it.
    await f.h.requests.event(replyEvent("approved", request.msg.ts, { channel: FLOW_CHANNEL, user: BOB }));
    await eventually(() => f!.flow.answers.length === 1, { what: "Bob's answer" });
  });
});
