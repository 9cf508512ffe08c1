// Review deadlines, escalation, reassignment and approval from App Home (issue #14), through signed
// requests to /slack/events, the Slack stand-in and the local crew service, with an injected clock.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { APPROVE_ACTION, HOME_APPROVE_ACTION, REASSIGN_ACTION, REVIEW_ACTIONS_BLOCK } from "../../src/adapters/slack/blocks/index.js";
import { type Crewline, createCrewline } from "../../src/app.js";
import { silentLogger } from "../../src/log/log.js";
import { openDatabase } from "../../src/store/db/database.js";
import { DEADLINE_ACTOR } from "../../src/usecases/decisions/core.js";
import { FLOW_CHANNEL, type FlowHarness, flowRow, pendingFlowRequest, startFlowHarness } from "../support/flows.js";
import { CHANNEL, eventually, freePort, type Harness, startHarness, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import {
  clickReview,
  escalatingHarness,
  offsetClock,
  otherReviewRequests,
  type PendingReview,
  pendingReview,
  resumeCalls,
  setRules,
  startRunViaSlack,
  submitReassign,
} from "../support/reviews.js";
import { usePostgres } from "../support/test-database.js";

let h: Harness;
const extra: Crewline[] = [];
const dropLater: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (extra.length) await extra.pop()!.stop();
  await h?.close();
  // Closed once: a later describe's tests do not use it.
  h = undefined as unknown as Harness;
  while (dropLater.length) await dropLater.pop()!().catch(() => {});
});

const BOB = "U0BOB";
const CAROL = "U0CAROL";
const DAN = "U0DAN";
const MIN = 60_000;

const review = (h: Harness, id: string) => prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id } });
const messageText = (h: Harness, ts: string) => JSON.stringify(h.slack.messages(CHANNEL).find((m) => m.ts === ts)?.blocks ?? []);
const threadReplies = (h: Harness, threadTs: string | null, pattern: RegExp) => h.slack.messages(CHANNEL).filter((m) => m.thread_ts === threadTs && pattern.test(m.text ?? ""));

/** A second bot on the same database (another replica, or the same bot after a restart). */
async function secondBot(h: Harness, database: ReturnType<typeof openDatabase>, clock: { now(): Date }): Promise<Crewline> {
  const port = await freePort();
  const bot = createCrewline(
    { ...h.config, port, publicUrl: `http://127.0.0.1:${port}` },
    { log: silentLogger, database, clock, progressIntervalMs: 200, slackRetries: { retries: 2, factor: 1, minTimeout: 10, maxTimeout: 50 } },
  );
  await bot.start();
  return bot;
}

describe("review deadlines", () => {
  it("onTimeout reject: the message shows when and what; at the deadline the crew gets one rejection saying it timed out", async () => {
    const clock = offsetClock();
    h = await startHarness({ research: { decideWithinMs: 30 * MIN, onTimeout: "reject" }, crewline: { clock } });
    const execution = await startRunViaSlack(h);
    const pending = await pendingReview(h);

    const stored = await review(h, pending.reviewId);
    expect(stored.onTimeout).toBe("reject");
    expect(Math.abs(stored.decideBy!.getTime() - (Date.now() + 30 * MIN))).toBeLessThan(10_000);
    const shown = await eventually(() => {
      const text = messageText(h, pending.msg.ts);
      return text.includes("rejected automatically") ? text : undefined;
    });
    const unix = Math.floor(stored.decideBy!.getTime() / 1000);
    expect(shown).toContain(`If nobody decides in 30 minutes, at <!date^${unix}^{time} {date_short_pretty}|${stored.decideBy!.toISOString().slice(11, 16)} UTC`);
    expect(shown).toContain("it will be rejected automatically");

    // Not yet due.
    expect(await h.bot.reviewRequests.deadlinesDue()).toBe(0);
    clock.offsetMs = 29 * MIN;
    expect(await h.bot.reviewRequests.deadlinesDue()).toBe(0);
    expect(resumeCalls(h)).toHaveLength(0);

    clock.offsetMs = 31 * MIN;
    expect(await h.bot.reviewRequests.deadlinesDue()).toBe(1);
    const resume = await eventually(() => resumeCalls(h)[0]);
    expect(resume.body).toMatchObject({
      execution_id: execution.kickoffId,
      is_approve: false,
      human_feedback: "No decision within 30 minutes: rejected automatically by Crewline",
    });
    const decided = await review(h, pending.reviewId);
    expect(decided).toMatchObject({ state: "rejected", decidedByDeadline: true, decidedBy: DEADLINE_ACTOR });
    await eventually(() => /Rejected by deadline/.test(messageText(h, pending.msg.ts)) && !messageText(h, pending.msg.ts).includes(APPROVE_ACTION), {
      what: "the review message saying it was rejected by deadline",
    });
    const audit = await prismaOf(h.bot.database).auditRecord.findFirstOrThrow({ where: { kind: "decision", executionId: execution.id } });
    expect(audit).toMatchObject({ actor: DEADLINE_ACTOR, decision: "reject", feedback: "No decision within 30 minutes: rejected automatically by Crewline" });
    expect(audit.detail).toMatchObject({ outcome: "decided", byDeadline: true });

    // Taken once: later passes do nothing more for this round.
    expect(await h.bot.reviewRequests.deadlinesDue()).toBe(0);
    expect(resumeCalls(h)).toHaveLength(1);
    // The retried task comes back as round 2, with a deadline of its own from now.
    const round2 = await pendingReview(h, { containing: "round 2" });
    expect((await review(h, round2.reviewId)).decideBy!.getTime()).toBeGreaterThan(Date.now() + 60 * MIN - 10_000);
  });

  it("onTimeout approve: the crew gets one approval, through the same claim as a click (a later click is told it was decided)", async () => {
    const clock = offsetClock();
    h = await startHarness({ research: { decideWithinMs: 90_000, onTimeout: "approve" }, crewline: { clock } });
    await startRunViaSlack(h);
    const pending = await pendingReview(h);
    await eventually(() => messageText(h, pending.msg.ts).includes("approved automatically"));

    clock.offsetMs = 2 * MIN;
    expect(await h.bot.reviewRequests.deadlinesDue()).toBe(1);
    const resume = await eventually(() => resumeCalls(h)[0]);
    expect(resume.body).toMatchObject({ is_approve: true, human_feedback: "No decision within 90 seconds: approved automatically by Crewline" });
    await eventually(() => /Approved by deadline/.test(messageText(h, pending.msg.ts)));

    await clickReview(h, pending, true, "", USER);
    const reply = await eventually(() => h.slack.callsTo("chat.postEphemeral")[0]);
    expect(String(reply.args.text)).toMatch(/already|decided/i);
    expect(resumeCalls(h)).toHaveLength(1);
  });

  it("onTimeout remind: a reminder in the thread at the deadline (counted as one), nothing sent to the crew", async () => {
    const clock = offsetClock();
    h = await startHarness({ research: { decideWithinMs: 30 * MIN, onTimeout: "remind" }, crewline: { clock } });
    setRules(h, [BOB]);
    const execution = await startRunViaSlack(h);
    const pending = await pendingReview(h);
    await eventually(() => messageText(h, pending.msg.ts).includes("its reviewers will be reminded"));

    clock.offsetMs = 31 * MIN;
    expect(await h.bot.reviewRequests.deadlinesDue()).toBe(1);
    expect(await h.bot.reviewRequests.deadlinesDue()).toBe(0);
    await eventually(() => threadReplies(h, execution.threadTs, /⏰/).length > 0, { what: "the deadline's reminder" });
    const reminders = threadReplies(h, execution.threadTs, /⏰/);
    expect(reminders).toHaveLength(1);
    expect(reminders[0]!.text).toContain(`<@${BOB}>: the deadline for *research_task* has passed (no decision within 30 minutes)`);
    expect(resumeCalls(h)).toHaveLength(0);
    expect(await review(h, pending.reviewId)).toMatchObject({ state: "pending", remindersSent: 1 });
    await eventually(() => !messageText(h, pending.msg.ts).includes("will be reminded"), { what: "the message without the passed deadline" });
    const audit = await prismaOf(h.bot.database).auditRecord.findFirstOrThrow({ where: { kind: "deadline" } });
    expect(audit).toMatchObject({ actor: DEADLINE_ACTOR, executionId: execution.id, taskKey: "research_task" });
    expect(audit.detail).toMatchObject({ action: "remind", remindersSent: 1 });
  });

  it("onTimeout remind: a reminder Slack held back (429) is not posted once the review was decided meanwhile", async () => {
    const clock = offsetClock();
    h = await startHarness({ research: { decideWithinMs: 30 * MIN, onTimeout: "remind" }, crewline: { clock } });
    setRules(h, [BOB]);
    const execution = await startRunViaSlack(h);
    const pending = await pendingReview(h);
    await eventually(() => messageText(h, pending.msg.ts).includes("its reviewers will be reminded"));
    await h.settled();

    // Slack turns the reminder away for 5 s; Bob approves meanwhile.
    h.slack.rateLimitNext("chat.postMessage", 1, 5);
    clock.offsetMs = 31 * MIN;
    expect(await h.bot.reviewRequests.deadlinesDue()).toBe(1);
    await eventually(() => h.slack.callsTo("chat.postMessage").some((c) => c.error === "ratelimited" && /⏰/.test(String(c.args.text))), {
      what: "the deadline's reminder rate limited",
    });
    await clickReview(h, pending, true, "", BOB);
    await eventually(async () => (await review(h, pending.reviewId)).state === "approved");

    await h.settled();
    expect(threadReplies(h, execution.threadTs, /⏰/)).toHaveLength(0);
    expect(messageText(h, pending.msg.ts)).toContain(`Approved by <@${BOB}>`);
    expect(resumeCalls(h)).toHaveLength(1);
  });

  it("is taken once when two instances on one database reach the deadline together", async () => {
    const clock = offsetClock();
    h = await startHarness({ research: { decideWithinMs: 30 * MIN, onTimeout: "reject" }, crewline: { clock } });
    await startRunViaSlack(h);
    const pending = await pendingReview(h);
    // A second instance in this process, on the same database (embedded or PostgreSQL).
    const other = otherReviewRequests(h, clock, { reminders: { afterMs: 60 * MIN, max: 3 }, deadlineOf: () => ({ withinMs: 30 * MIN, onTimeout: "reject" }) });
    clock.offsetMs = 31 * MIN;
    const taken = await Promise.all([h.bot.reviewRequests.deadlinesDue(), other.deadlinesDue()]);
    expect(taken[0]! + taken[1]!).toBe(1);
    await eventually(async () => (await review(h, pending.reviewId)).state === "rejected");
    expect(resumeCalls(h)).toHaveLength(1);
    expect(await prismaOf(h.bot.database).auditRecord.count({ where: { kind: "decision" } })).toBe(1);
  });

  it("retakes, once, a deadline claimed by a process that died before acting (once the claim is stale)", async () => {
    const clock = offsetClock();
    h = await startHarness({ research: { decideWithinMs: 30 * MIN, onTimeout: "approve" }, crewline: { clock } });
    await startRunViaSlack(h);
    const pending = await pendingReview(h);
    clock.offsetMs = 31 * MIN;
    // What a replica that claimed the deadline and was killed leaves behind.
    await prismaOf(h.bot.database).review.update({ where: { id: pending.reviewId }, data: { deadlineHandledAt: clock.now() } });
    expect(await h.bot.reviewRequests.deadlinesDue()).toBe(0);
    clock.offsetMs = 31 * MIN + 30_000;
    expect(await h.bot.reviewRequests.deadlinesDue()).toBe(0);
    expect(resumeCalls(h)).toHaveLength(0);

    clock.offsetMs = 33 * MIN;
    expect(await h.bot.reviewRequests.deadlinesDue()).toBe(1);
    const resume = await eventually(() => resumeCalls(h)[0]);
    expect(resume.body).toMatchObject({ is_approve: true, human_feedback: "No decision within 30 minutes: approved automatically by Crewline" });
    expect((await review(h, pending.reviewId)).deadlineDoneAt).not.toBeNull();
    clock.offsetMs = 40 * MIN;
    expect(await h.bot.reviewRequests.deadlinesDue()).toBe(0);
    expect(resumeCalls(h)).toHaveLength(1);
  });

  it.runIf(usePostgres)("is taken once by two bots (createCrewline) sharing one PostgreSQL database", async () => {
    const clock = offsetClock();
    h = await startHarness({ research: { decideWithinMs: 30 * MIN, onTimeout: "reject" }, crewline: { clock } });
    await startRunViaSlack(h);
    const pending = await pendingReview(h);
    const replica = await secondBot(h, openDatabase({ databaseUrl: h.db.url!, poolSize: 5 }), clock);
    extra.push(replica);

    clock.offsetMs = 31 * MIN;
    const taken = await Promise.all([h.bot.reviewRequests.deadlinesDue(), replica.reviewRequests.deadlinesDue()]);
    expect(taken[0]! + taken[1]!).toBe(1);
    expect((await Promise.all([h.bot.reviewRequests.deadlinesDue(), replica.reviewRequests.deadlinesDue()])).every((n) => n === 0)).toBe(true);
    await eventually(async () => (await review(h, pending.reviewId)).state === "rejected");
    expect(resumeCalls(h)).toHaveLength(1);
    expect(await prismaOf(h.bot.database).auditRecord.count({ where: { kind: "decision", actor: DEADLINE_ACTOR } })).toBe(1);
    // The review's message is updated by the outbox after the decision commits.
    const decidedMessages = () => h.slack.messages(CHANNEL).filter((m) => /Rejected by deadline/.test(JSON.stringify(m.blocks ?? [])));
    await eventually(() => decidedMessages().length > 0 || undefined, { what: "the review updated as rejected by deadline" });
    expect(decidedMessages()).toHaveLength(1);
  });

  it("survives a restart: the deadline that passed while the bot was down is taken once by the next start", async () => {
    const clock = offsetClock();
    const dataDir = usePostgres ? undefined : fs.mkdtempSync(path.join(os.tmpdir(), "crewline-deadline-"));
    let pgUrl: string | undefined;
    const open = () => (usePostgres ? openDatabase({ databaseUrl: pgUrl!, poolSize: 5 }) : openDatabase({ dataDir }));
    if (usePostgres) {
      const { createTestDatabaseUrl } = await import("../support/test-database.js");
      const created = await createTestDatabaseUrl();
      pgUrl = created.url;
      dropLater.push(created.drop);
    }
    const firstDatabase = open();
    h = await startHarness({ research: { decideWithinMs: 30 * MIN, onTimeout: "reject" }, crewline: { clock, database: firstDatabase } });
    await startRunViaSlack(h, "Deep sea vents", 20_000);
    const pending = await pendingReview(h, { timeoutMs: 20_000 });
    // The bot goes down, and its database connection with it (an embedded data folder is one process's at a time).
    await h.bot.stop();
    await firstDatabase.close();

    clock.offsetMs = 31 * MIN;
    const restarted = await secondBot(h, open(), clock);
    const first = h;
    // The harness would stop the first bot again; the restarted one is what runs now.
    h = {
      ...first,
      bot: restarted,
      close: async () => {
        await restarted.stop();
        await first.crew.close();
        await first.slack.close();
        await first.db.drop().catch(() => {});
      },
    };
    expect(await restarted.reviewRequests.deadlinesDue()).toBe(1);
    const resume = await eventually(() => resumeCalls(h)[0]);
    expect((resume.body as any).human_feedback).toBe("No decision within 30 minutes: rejected automatically by Crewline");
    await eventually(async () => (await review(h, pending.reviewId)).state === "rejected");
    expect(await restarted.reviewRequests.deadlinesDue()).toBe(0);
    expect(resumeCalls(h)).toHaveLength(1);
  }, 60_000);
});

describe("escalation after the last reminder", () => {
  /** One reminder a minute after the review, then Carol as escalateTo; Bob is the reviewer. */
  async function startEscalating() {
    const started = await escalatingHarness(BOB, CAROL);
    h = started.h;
    return started.clock;
  }

  it("mentions escalateTo after the last reminder; they may decide only from then on", async () => {
    const clock = await startEscalating();
    const execution = await startRunViaSlack(h);
    const pending = await pendingReview(h);

    // Before escalation Carol is not a reviewer: refused, nothing sent.
    await clickReview(h, pending, true, "", CAROL);
    const refusal = await eventually(() => h.slack.callsTo("chat.postEphemeral")[0]);
    expect(refusal.args.user).toBe(CAROL);
    expect(String(refusal.args.text)).toContain(`Only <@${BOB}>`);
    expect(resumeCalls(h)).toHaveLength(0);
    expect(threadReplies(h, execution.threadTs, /🔺/)).toHaveLength(0);

    clock.offsetMs = 61_000;
    expect(await h.bot.reviewRequests.remindDue()).toBe(1);
    const escalation = await eventually(() => threadReplies(h, execution.threadTs, /🔺/)[0]);
    expect(escalation.text).toContain(`<@${CAROL}>: *research_task* is still waiting for a decision after a reminder`);
    expect(await review(h, pending.reviewId)).toMatchObject({ escalatedTo: CAROL });
    expect((await review(h, pending.reviewId)).escalatedAt).not.toBeNull();
    await eventually(() => messageText(h, pending.msg.ts).includes(`Escalated to <@${CAROL}>`));
    const audit = await prismaOf(h.bot.database).auditRecord.findFirstOrThrow({ where: { kind: "escalation" } });
    expect(audit.detail).toMatchObject({ reviewId: pending.reviewId, escalatedTo: [CAROL] });
    // Escalated once, whatever ticks later.
    await h.bot.reviewRequests.remindDue();
    expect(threadReplies(h, execution.threadTs, /🔺/)).toHaveLength(1);

    await clickReview(h, pending, true, "", CAROL);
    await eventually(() => resumeCalls(h).length === 1);
    await eventually(async () => (await review(h, pending.reviewId)).state === "approved");
    expect((await review(h, pending.reviewId)).decidedBy).toBe(CAROL);
  });

  it("an escalation Slack held back (429) is not posted once the review was decided meanwhile", async () => {
    const clock = await startEscalating();
    const execution = await startRunViaSlack(h);
    const pending = await pendingReview(h);
    await h.settled();

    // The reminder and the escalation go out together: whichever asks first hears a 429 (both, if at
    // once), and the pause it sets holds the other. Bob approves meanwhile.
    h.slack.rateLimitNext("chat.postMessage", 2, 3);
    clock.offsetMs = 61_000;
    expect(await h.bot.reviewRequests.remindDue()).toBe(1);
    await eventually(() => h.slack.callsTo("chat.postMessage").some((c) => c.error === "ratelimited"), { what: "a rate limited post" });
    expect(threadReplies(h, execution.threadTs, /🔺/)).toHaveLength(0);
    await clickReview(h, pending, true, "", BOB);
    await eventually(async () => (await review(h, pending.reviewId)).state === "approved");

    await h.settled();
    expect(threadReplies(h, execution.threadTs, /🔺/)).toHaveLength(0);
    expect(messageText(h, pending.msg.ts)).toContain(`Approved by <@${BOB}>`);
  });
});

describe("reassignment", () => {
  function clickReassign(h: Harness, pending: PendingReview, user: string) {
    return h.requests.blockAction({
      user_id: user,
      channel_id: CHANNEL,
      message_ts: pending.msg.ts,
      thread_ts: pending.msg.thread_ts,
      action: { action_id: REASSIGN_ACTION, block_id: REVIEW_ACTIONS_BLOCK, value: pending.reviewId },
    });
  }

  it("a reviewer hands the review to a named person, who is mentioned, sees it on App Home and may decide it", async () => {
    h = await startHarness();
    setRules(h, [BOB]);
    // Dan is in the run's channel: he could see it (someone who could not is refused: reviewers.test.ts).
    h.slack.setMembers(CHANNEL, [DAN]);
    const execution = await startRunViaSlack(h);
    const pending = await pendingReview(h);
    expect(JSON.stringify(pending.msg.blocks)).toContain(REASSIGN_ACTION);

    // Dan may not decide yet.
    await clickReview(h, pending, true, "", DAN);
    await eventually(() => h.slack.callsTo("chat.postEphemeral").find((c) => c.args.user === DAN));
    // Someone who may not decide may not reassign either.
    const modalsBefore = h.slack.callsTo("views.open").length;
    await clickReassign(h, pending, USER);
    await eventually(() => h.slack.callsTo("chat.postEphemeral").find((c) => c.args.user === USER && /may reassign/.test(String(c.args.text))));
    expect(h.slack.callsTo("views.open")).toHaveLength(modalsBefore);

    await clickReassign(h, pending, BOB);
    const opened = (await h.slack.waitForCalls("views.open", modalsBefore + 1)).at(-1);
    const modal = opened!.args.view as any;
    expect(JSON.stringify(modal.blocks)).toContain("users_select");
    // The form is Bob's, for this message: submitted by someone else, or with a bare review id for
    // metadata (a request signed by Slack may carry any), it is refused and nothing is handed on.
    for (const [user, form] of [
      [CAROL, modal],
      [BOB, { ...modal, private_metadata: pending.reviewId }],
    ] as const) {
      const refused = await submitReassign(h, form, user, user, "Mine now");
      expect(refused.json).toMatchObject({ response_action: "errors" });
    }
    expect(await review(h, pending.reviewId)).toMatchObject({ reassignedTo: null });
    const submitted = await submitReassign(h, modal, BOB, DAN, "Dan knows the sources");
    expect(submitted.status).toBe(200);
    const notice = await eventually(() => threadReplies(h, execution.threadTs, /↪️/)[0]);
    expect(notice.text).toContain(`<@${BOB}> reassigned *research_task* to <@${DAN}>`);
    expect(notice.text).toContain("Dan knows the sources");
    expect(await review(h, pending.reviewId)).toMatchObject({ reassignedTo: DAN, reassignedBy: BOB, reassignReason: "Dan knows the sources" });
    await eventually(() => messageText(h, pending.msg.ts).includes(`Reassigned to <@${DAN}>`));
    const audit = await prismaOf(h.bot.database).auditRecord.findFirstOrThrow({ where: { kind: "reassignment" } });
    expect(audit).toMatchObject({ actor: BOB, feedback: "Dan knows the sources" });
    expect(audit.detail).toMatchObject({ reassignedTo: DAN });
    // The same form sent again hands it to nobody new, and Bob hears so.
    await submitReassign(h, modal, BOB, DAN, "Dan knows the sources");
    const same = await eventually(() => h.slack.ephemerals.find((e) => e.user === BOB && /already/.test(e.text ?? "")), { what: "the nothing-changed answer" });
    expect(same.text).toBe(`This review is reassigned to <@${DAN}> already, so nothing changed.`);
    expect(await prismaOf(h.bot.database).auditRecord.count({ where: { kind: "reassignment" } })).toBe(1);

    // Dan's Home tab is published at once, and again when he opens it.
    const [pushed] = await h.slack.waitForCalls("views.publish", 1);
    expect(pushed!.args.user_id).toBe(DAN);
    expect(JSON.stringify((pushed!.args.view as any).blocks)).toContain("Reassigned to you");
    await h.requests.appHomeOpened({ user_id: DAN });
    const home = (await h.slack.waitForCalls("views.publish", 2))[1];
    const homeText = JSON.stringify((home!.args.view as any).blocks);
    expect(homeText).toContain("Reviews waiting for you (1)");
    expect(homeText).toContain(`Reassigned to you by <@${BOB}>`);

    await clickReview(h, pending, false, "Needs the 2024 data", DAN);
    const resume = await eventually(() => resumeCalls(h)[0]);
    expect(resume.body).toMatchObject({ is_approve: false, human_feedback: "Needs the 2024 data" });
    await eventually(async () => (await review(h, pending.reviewId)).state === "rejected");
    expect((await review(h, pending.reviewId)).decidedBy).toBe(DAN);
  });
});

describe("approval from App Home", () => {
  it("a reviewer approves from the Home tab: the crew gets one approval, the thread message is updated, Home is published again", async () => {
    h = await startHarness();
    setRules(h, [BOB]);
    const execution = await startRunViaSlack(h);
    const pending = await pendingReview(h);

    // Someone who may not decide gets no Approve button for it (nothing is listed).
    await h.requests.appHomeOpened({ user_id: CAROL });
    const [carolHome] = await h.slack.waitForCalls("views.publish", 1);
    expect(JSON.stringify((carolHome!.args.view as any).blocks)).not.toContain(HOME_APPROVE_ACTION);

    await h.requests.appHomeOpened({ user_id: BOB });
    const bobHome = (await h.slack.waitForCalls("views.publish", 2))[1]!;
    const blocks = (bobHome.args.view as any).blocks as any[];
    const item = blocks.find((b) => b.accessory?.action_id === HOME_APPROVE_ACTION);
    expect(item.accessory.value).toBe(pending.reviewId);
    expect(JSON.stringify(item)).toContain("Open the thread");
    const viewId = [...h.slack.views.values()].find((v: any) => v.user === BOB && v.view.type === "home")!.id;

    // A forged click on the Home tab by someone who may not decide: refused, nothing sent.
    await h.requests.blockAction({
      user_id: CAROL,
      channel_id: "",
      message_ts: "",
      view: { id: viewId, type: "home" } as any,
      action: { action_id: HOME_APPROVE_ACTION, block_id: item.block_id ?? "b", value: pending.reviewId },
    });
    const carolAfter = (await h.slack.waitForCalls("views.publish", 3))[2]!;
    expect(carolAfter.args.user_id).toBe(CAROL);
    expect(resumeCalls(h)).toHaveLength(0);

    await h.requests.blockAction({
      user_id: BOB,
      channel_id: "",
      message_ts: "",
      view: { id: viewId, type: "home" } as any,
      action: { action_id: HOME_APPROVE_ACTION, block_id: item.block_id ?? "b", value: pending.reviewId },
    });
    const resume = await eventually(() => resumeCalls(h)[0]);
    expect(resume.body).toMatchObject({ execution_id: execution.kickoffId, is_approve: true });
    await eventually(async () => (await review(h, pending.reviewId)).state === "approved");
    expect((await review(h, pending.reviewId)).decidedBy).toBe(BOB);
    await eventually(() => {
      const text = messageText(h, pending.msg.ts);
      return text.includes(`Approved by <@${BOB}>`) && !text.includes(APPROVE_ACTION);
    });
    const republished = await eventually(() => h.slack.callsTo("views.publish").filter((c) => c.args.user_id === BOB)[1]);
    const text = JSON.stringify((republished.args.view as any).blocks);
    expect(text).toContain("You approved *research_task*");
    expect(text).not.toContain(`"value":"${pending.reviewId}"`);
    // A second click (a stale tab) sends nothing more.
    await h.requests.blockAction({
      user_id: BOB,
      channel_id: "",
      message_ts: "",
      view: { id: viewId, type: "home" } as any,
      action: { action_id: HOME_APPROVE_ACTION, block_id: item.block_id ?? "b", value: pending.reviewId },
    });
    const again = await eventually(() => h.slack.callsTo("views.publish").filter((c) => c.args.user_id === BOB)[2]);
    expect(JSON.stringify((again.args.view as any).blocks)).toContain("You already approved this review.");
    expect(resumeCalls(h)).toHaveLength(1);
  });
});

describe("flow feedback request deadlines", () => {
  let f: FlowHarness | undefined;
  afterEach(async () => {
    await f?.close();
    f = undefined;
  });

  it("onTimeout reject: the request shows its deadline; at the deadline the flow gets its reject outcome once, saying it timed out", async () => {
    const clock = offsetClock();
    f = await startFlowHarness({ flow: { decideWithinMs: 30 * MIN, onTimeout: "reject" }, crewline: { clock } });
    expect((await f.flow.send({ output: "Draft" })).status).toBe(202);
    const req = await pendingFlowRequest(f.h);
    expect(JSON.stringify(req.msg.blocks)).toMatch(
      /If nobody decides in 30 minutes, at <!date\^\d+\^\{time\} \{date_short_pretty\}\|\d\d:\d\d UTC.*>, it will be rejected automatically/,
    );

    expect(await f.h.bot.flows.deadlinesDue()).toBe(0);
    clock.offsetMs = 31 * MIN;
    const taken = await Promise.all([f.h.bot.flows.deadlinesDue(), f.h.bot.flows.deadlinesDue()]);
    expect(taken[0]! + taken[1]!).toBe(1);
    await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
    expect(f.flow.answers[0]).toMatchObject({ feedback: "rejected\n\nNo decision within 30 minutes: rejected automatically by Crewline", source: "slack" });
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "answered", outcome: "rejected", decidedByDeadline: true, decidedBy: DEADLINE_ACTOR });
    await eventually(() => /Answered by deadline/.test(JSON.stringify(f!.h.slack.messages(FLOW_CHANNEL).find((m) => m.ts === req.msg.ts)?.blocks ?? [])));
    const audit = await prismaOf(f.h.bot.database).auditRecord.findFirstOrThrow({ where: { flowRequestId: req.id } });
    expect(audit).toMatchObject({ kind: "flow_decision", actor: DEADLINE_ACTOR, decision: "rejected" });
    expect(audit.detail).toMatchObject({ byDeadline: true, outcome: "answered" });
    expect(await f.h.bot.flows.deadlinesDue()).toBe(0);
    expect(f.flow.calls).toHaveLength(1);
  });

  it("onTimeout remind: a reminder under the request, counted as one, nothing sent to the flow", async () => {
    const clock = offsetClock();
    f = await startFlowHarness({ flow: { decideWithinMs: 90_000, onTimeout: "remind", reviewers: { users: [BOB], usergroups: [] } }, crewline: { clock } });
    await f.flow.send({ output: "Draft" });
    const req = await pendingFlowRequest(f.h);
    clock.offsetMs = 2 * MIN;
    expect(await f.h.bot.flows.deadlinesDue()).toBe(1);
    const reminder = await eventually(() => f!.h.slack.messages(FLOW_CHANNEL).find((m) => m.thread_ts === req.msg.ts && /⏰/.test(m.text ?? "")));
    expect(reminder.text).toContain(`<@${BOB}>: the deadline for flow *content*'s request has passed (no answer within 90 seconds)`);
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "pending", remindersSent: 1 });
    expect(f.flow.calls).toHaveLength(0);
    expect(await f.h.bot.flows.deadlinesDue()).toBe(0);
  });
});
