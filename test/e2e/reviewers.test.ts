// Reviewer rules, audit trail, reminders and App Home, through signed requests, fake Slack and the local crew.
import { afterEach, describe, expect, it } from "vitest";
import { HOME_APPROVE_ACTION, HOME_FLOW_APPROVE_ACTION, REASSIGN_ACTION, REASSIGN_USER_BLOCK, REVIEW_ACTIONS_BLOCK } from "../../src/adapters/slack/blocks/index.js";
import { FLOW_CHANNEL, FLOW_NAME, FLOW_SECRET, type FlowHarness, pendingFlowRequest, startFlowHarness } from "../support/flows.js";
import { CHANNEL, eventually, type Harness, startHarness, USER } from "../support/harness.js";
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

let h: Harness;
let f: FlowHarness | undefined;
afterEach(async () => {
  await h?.close();
  await f?.close();
  f = undefined;
});

const BOB = "U0BOB";
const CAROL = "U0CAROL";
const DAN = "U0DAN";
const GROUP = "S0REVIEW";

const homesOf = (h: Harness, user: string) => h.slack.callsTo("views.publish").filter((c) => c.args.user_id === user);
const homeText = (call: { args: Record<string, unknown> }) => JSON.stringify((call.args.view as any).blocks);
/** The Home's reviews part: from its "Reviews waiting for you" header to the divider after it. */
function reviewsPart(call: { args: Record<string, unknown> }): string {
  const blocks = (call.args.view as any).blocks as any[];
  const start = blocks.findIndex((b) => b.type === "header" && String(b.text.text).startsWith("Reviews waiting for you"));
  const end = blocks.findIndex((b, i) => i > start && b.type === "divider");
  return JSON.stringify(blocks.slice(start, end));
}

async function reviewState(h: Harness, id: string) {
  return (await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id } })).state;
}

describe("reviewer rules", () => {
  it("refuses a user not named by the rules with an ephemeral naming who may decide; a named user decides", async () => {
    h = await startHarness();
    setRules(h, [BOB]);
    await startRunViaSlack(h);
    const review = await pendingReview(h);

    await clickReview(h, review, true, "", USER);
    const refusal = await eventually(() => h.slack.callsTo("chat.postEphemeral")[0]);
    expect(refusal.args.user).toBe(USER);
    expect(refusal.args.text).toContain(`<@${BOB}>`);
    expect(refusal.args.text).toMatch(/nothing was sent/i);
    expect(resumeCalls(h)).toHaveLength(0);
    expect(await reviewState(h, review.reviewId)).toBe("pending");
    expect(await prismaOf(h.bot.database).auditRecord.count({ where: { kind: "decision" } })).toBe(0);

    await clickReview(h, review, true, "", BOB);
    await eventually(() => resumeCalls(h).length === 1);
    await eventually(async () => (await reviewState(h, review.reviewId)) === "approved");
    const decided = await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } });
    expect(decided.decidedBy).toBe(BOB);
  });

  it("allows members of a user group (served by usergroups.users.list) and refuses others", async () => {
    h = await startHarness();
    h.slack.setUsergroup(GROUP, [CAROL]);
    setRules(h, [], [GROUP]);
    await startRunViaSlack(h);
    const review = await pendingReview(h);

    await clickReview(h, review, false, "More depth", USER);
    const refusal = await eventually(() => h.slack.callsTo("chat.postEphemeral")[0]);
    expect(refusal.args.text).toContain(`<!subteam^${GROUP}>`);
    expect(resumeCalls(h)).toHaveLength(0);
    expect(await reviewState(h, review.reviewId)).toBe("pending");

    await clickReview(h, review, false, "More depth", CAROL);
    const resume = await eventually(() => resumeCalls(h)[0]);
    expect((resume.body as any).is_approve).toBe(false);
    await eventually(async () => (await reviewState(h, review.reviewId)) === "rejected");
    // The group was looked up once and cached for the next click.
    expect(h.slack.callsTo("usergroups.users.list").length).toBe(1);
  });

  it("refuses /crew in a channel outside the crew's allow-list", async () => {
    h = await startHarness();
    h.bot.crews.config("research")!.channels = ["C0ELSEWHERE"];
    await h.requests.command({ text: "", user_id: USER, channel_id: CHANNEL });
    const [update] = await h.slack.waitForCalls("views.update", 1);
    expect(JSON.stringify(update!.args.view)).toMatch(/No crew may be started in this channel/);
    expect((update!.args.view as any).submit).toBeUndefined();

    await h.requests.command({ text: "research", user_id: USER, channel_id: CHANNEL });
    const [, named] = await h.slack.waitForCalls("views.update", 2);
    expect(JSON.stringify(named!.args.view)).toMatch(/may not be started in this channel/);
    expect(h.crew.requests.filter((r) => r.path === "/inputs" || r.path === "/kickoff")).toHaveLength(0);
    expect(await prismaOf(h.bot.database).execution.count()).toBe(0);
  });
});

describe("audit trail", () => {
  it("records kickoff, each decision round and completion; /crew audit shows them and exports JSON and CSV", async () => {
    h = await startHarness();
    const execution = await startRunViaSlack(h);
    const first = await pendingReview(h, { index: 0 });
    await clickReview(h, first, false, "Cite primary sources", USER);
    const next = async (previous: string) =>
      eventually(async () => {
        const r = await pendingReview(h, { index: 0 });
        return r.reviewId !== previous ? r : undefined;
      });
    const second = await next(first.reviewId);
    await clickReview(h, second, true, "", USER);
    const third = await next(second.reviewId);
    await clickReview(h, third, true, "Ship it", USER);
    await eventually(async () => (await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } })).completionTs);

    const rows = await eventually(
      async () => {
        const r = await prismaOf(h.bot.database).auditRecord.findMany({ where: { executionId: execution.id }, orderBy: { createdAt: "asc" } });
        return r.length === 5 ? r : undefined;
      },
      { what: "5 audit rows" },
    );
    expect(rows.map((r) => [r.kind, r.taskKey, r.round, r.decision])).toEqual([
      ["kickoff", null, null, null],
      ["decision", "research_task", 1, "reject"],
      ["decision", "research_task", 2, "approve"],
      ["decision", "writing_task", 1, "approve"],
      ["completion", null, null, null],
    ]);
    expect(rows[0]).toMatchObject({ actor: USER, detail: { crewName: "research", kickoffId: execution.kickoffId, inputs: { topic: "Deep sea vents" } } });
    const reject = rows[1]!;
    expect(reject).toMatchObject({ actor: USER, feedback: "Cite primary sources", detail: { outcome: "decided" } });
    const firstReview = await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: first.reviewId } });
    expect(reject.outputHash).toBe(firstReview.outputHash);
    expect(reject.msToDecision).toBeGreaterThanOrEqual(0);
    expect(rows[3]!.feedback).toBe("Ship it");
    expect(rows[4]).toMatchObject({ detail: { event: "succeeded" } });
    expect(rows[4]!.outputHash).toMatch(/^[0-9a-f]{64}$/);

    await h.requests.command({ text: `audit ${execution.kickoffId}`, user_id: USER, channel_id: CHANNEL });
    const answer = await eventually(() => h.slack.callsTo("response_url").at(-1));
    const text = String(answer.args.text);
    expect(text).toContain("Audit trail");
    expect(text).toContain("rejected *research_task* round 1");
    expect(text).toContain("Cite primary sources");
    expect(text).toMatch(/run's thread/);

    const files = await eventually(() => (h.slack.files.length >= 2 ? h.slack.files : undefined));
    expect(files.every((f) => f.channel === CHANNEL && f.thread_ts === execution.threadTs)).toBe(true);
    const json = JSON.parse(files.find((f) => f.filename.endsWith(".json"))!.content);
    expect(json).toHaveLength(5);
    expect(json[1]).toMatchObject({ kind: "decision", actor: USER, decision: "reject", feedback: "Cite primary sources", round: 1 });
    const csv = files
      .find((f) => f.filename.endsWith(".csv"))!
      .content.trim()
      .split("\r\n");
    expect(csv[0]).toBe("createdAt,kind,executionId,taskKey,round,actor,decision,feedback,outputHash,msToDecision,resumeStatus,resumeMessage,detail,flowRequestId");
    expect(csv).toHaveLength(6);
    expect(csv[2]).toContain(",decision,");
    expect(csv[2]).toContain("Cite primary sources");

    await h.requests.command({ text: `audit ${execution.kickoffId} csv`, user_id: USER, channel_id: CHANNEL });
    await eventually(() => h.slack.files.length === 3);
    expect(h.slack.files[2]!.filename).toMatch(/\.csv$/);
  });

  it("records a refused-then-failed resume as a decision row and never updates audit rows", async () => {
    h = await startHarness({ crew: { failWith: [{ endpoint: "resume", status: 503, body: { error: "down" } }] } });
    const execution = await startRunViaSlack(h);
    const review = await pendingReview(h);
    await clickReview(h, review, true, "", USER);
    await eventually(() => h.slack.callsTo("chat.postEphemeral")[0]);
    const rows = await eventually(async () => {
      const r = await prismaOf(h.bot.database).auditRecord.findMany({ where: { executionId: execution.id, kind: "decision" } });
      return r.length ? r : undefined;
    });
    expect(rows[0]).toMatchObject({ decision: "approve", detail: { outcome: "resume_failed" } });
    expect(await reviewState(h, review.reviewId)).toBe("pending");
  });
});

describe("review reminders", () => {
  it("reminds the reviewers once when due, backs off ×2, stops at the maximum, and once per replica set", async () => {
    const clock = offsetClock();
    h = await startHarness({ config: { reviewReminders: { afterMinutes: 1, max: 2 } }, crewline: { clock } });
    setRules(h, [BOB], [GROUP]);
    const execution = await startRunViaSlack(h);
    await pendingReview(h);
    const reminders = () => h.slack.messages(CHANNEL).filter((m) => m.thread_ts === execution.threadTs && /⏰/.test(m.text ?? ""));

    expect(await h.bot.reviewRequests.remindDue()).toBe(0);
    clock.offsetMs = 61_000;
    // Two replicas (same configuration) tick at the same time: one reminder, whichever sends it.
    const other = otherReviewRequests(h, clock, { reminders: { afterMs: 60_000, max: 2 }, rulesOf: (crew) => h.bot.reviewers.rulesFor(crew) });
    const sent = await Promise.all([h.bot.reviewRequests.remindDue(), other.remindDue()]);
    expect(sent[0]! + sent[1]!).toBe(1);
    await eventually(() => reminders().length === 1, { what: "the first reminder" });
    expect(reminders()[0]!.text).toContain(`<@${BOB}>, <!subteam^${GROUP}>`);
    expect(await h.bot.reviewRequests.remindDue()).toBe(0);

    // Next one 2 minutes after the first (3 minutes after the review).
    clock.offsetMs = 2 * 60_000 + 30_000;
    expect(await h.bot.reviewRequests.remindDue()).toBe(0);
    clock.offsetMs = 3 * 60_000 + 5_000;
    expect(await h.bot.reviewRequests.remindDue()).toBe(1);
    clock.offsetMs = 60 * 60_000;
    expect(await h.bot.reviewRequests.remindDue()).toBe(0);
    await eventually(() => reminders().length === 2, { what: "the second reminder" });
    await h.settled();
    expect(reminders()).toHaveLength(2);
    const stored = await prismaOf(h.bot.database).review.findFirstOrThrow();
    expect(stored).toMatchObject({ remindersSent: 2, nextReminderAt: null });
  });

  it("mentions the run's starter when there are no rules, and sends none after the decision", async () => {
    const clock = offsetClock();
    h = await startHarness({ config: { reviewReminders: { afterMinutes: 1, max: 3 } }, crewline: { clock } });
    const execution = await startRunViaSlack(h);
    const review = await pendingReview(h);
    const reminders = () => h.slack.messages(CHANNEL).filter((m) => m.thread_ts === execution.threadTs && /⏰/.test(m.text ?? ""));
    clock.offsetMs = 61_000;
    expect(await h.bot.reviewRequests.remindDue()).toBe(1);
    expect((await eventually(() => reminders()[0])).text).toContain(`<@${USER}>`);

    await clickReview(h, review, true, "", USER);
    await eventually(async () => (await reviewState(h, review.reviewId)) === "approved");
    // The next task's review is new; only the decided one is checked here.
    clock.offsetMs = 10 * 60_000;
    await h.bot.reviewRequests.remindDue();
    const decided = await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } });
    expect(decided.remindersSent).toBe(1);
    expect(reminders().filter((m) => m.text!.includes("Research") || m.text!.includes("research"))).toHaveLength(1);
  });
});

describe("App Home", () => {
  /** Bob decides by the crew's rules; a review nobody decided by its one reminder goes to Carol. */
  async function escalatingToCarol() {
    const started = await escalatingHarness(BOB, CAROL);
    h = started.h;
    return started.clock;
  }

  it("shows a reviewer the reviews waiting for them with thread links, and the starter their runs", async () => {
    h = await startHarness();
    setRules(h, [BOB]);
    const execution = await startRunViaSlack(h);
    const review = await pendingReview(h);

    await h.requests.appHomeOpened({ user_id: BOB });
    const [published] = await h.slack.waitForCalls("views.publish", 1);
    expect(published!.args.user_id).toBe(BOB);
    const view = published!.args.view as any;
    expect(view.type).toBe("home");
    expect(view.blocks.length).toBeLessThanOrEqual(100);
    const bobText = JSON.stringify(view.blocks);
    expect(bobText).toContain("Reviews waiting for you (1)");
    expect(bobText).toContain(`/archives/${CHANNEL}/p${review.msg.ts.replace(".", "")}?thread_ts=${execution.threadTs}`);
    expect(bobText).toContain("research");

    await h.requests.appHomeOpened({ user_id: USER });
    const calls = await h.slack.waitForCalls("views.publish", 2);
    const aliceText = JSON.stringify((calls[1]!.args.view as any).blocks);
    expect(aliceText).not.toContain("Reviews waiting for you (");
    expect(aliceText).toContain(execution.kickoffId!);
    expect(aliceText).toContain("Crews you can start");
  });

  it("a review escalated to someone not in its run's private channel is on their Home without its content or Approve; a forged Approve sends nothing; once in the channel, they approve it there", async () => {
    const clock = await escalatingToCarol();
    h.slack.setMembers(CHANNEL, [USER, BOB]);
    await startRunViaSlack(h);
    const pending = await pendingReview(h);
    clock.offsetMs = 61_000;
    expect(await h.bot.reviewRequests.remindDue()).toBe(1);
    await eventually(async () => (await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: pending.reviewId } })).escalatedTo === CAROL);

    // Carol's Home says a review escalated to her waits in the run's channel, and nothing of what it is.
    await h.requests.appHomeOpened({ user_id: CAROL });
    const home = await eventually(() => homesOf(h, CAROL)[0], { what: "Carol's Home" });
    const waiting = reviewsPart(home);
    expect(waiting).toContain("Reviews waiting for you (1)");
    expect(waiting).toContain(`A review escalated to you waits in <#${CHANNEL}>, a channel you are not in`);
    for (const content of ["research", "/archives/", HOME_APPROVE_ACTION, pending.reviewId]) expect(waiting).not.toContain(content);
    const approveFromHome = () =>
      h.requests.blockAction({
        user_id: CAROL,
        channel_id: "",
        message_ts: "",
        view: { id: "V0HOME", type: "home" } as any,
        action: { action_id: HOME_APPROVE_ACTION, block_id: "b", value: pending.reviewId },
      });

    // A forged Approve (the review's id guessed): the output is not hers to read, so nothing reaches the crew.
    await approveFromHome();
    const refused = await eventually(() => homesOf(h, CAROL)[1], { what: "Carol's Home again" });
    expect(homeText(refused)).toContain("I can't find this review any more, so nothing was sent to the crew.");
    await h.settled();
    expect(resumeCalls(h)).toHaveLength(0);
    expect(await reviewState(h, pending.reviewId)).toBe("pending");

    // Once she is in it (its member list read again after a minute), Home lists it with Approve, which approves.
    h.slack.setMembers(CHANNEL, [USER, BOB, CAROL]);
    clock.offsetMs += 2 * 60_000;
    await h.requests.appHomeOpened({ user_id: CAROL });
    const listed = await eventually(() => homesOf(h, CAROL)[2], { what: "Carol's Home once in the channel" });
    const item = ((listed.args.view as any).blocks as any[]).find((b) => b.accessory?.action_id === HOME_APPROVE_ACTION);
    expect(item.accessory.value).toBe(pending.reviewId);
    expect(reviewsPart(listed)).toContain("research");
    expect(reviewsPart(listed)).not.toContain("a channel you are not in");
    await approveFromHome();
    await eventually(() => resumeCalls(h).length === 1, { what: "the crew resumed" });
    await eventually(async () => (await reviewState(h, pending.reviewId)) === "approved");
    expect((await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: pending.reviewId } })).decidedBy).toBe(CAROL);
  });

  it("who may see the listed runs is read once per channel and waited on for a bounded time: a slow Slack withholds them, the next Home shows them from the cache", async () => {
    const clock = await escalatingToCarol();
    h.slack.setMembers(CHANNEL, [USER, BOB, CAROL]);
    await startRunViaSlack(h, "Deep sea vents");
    const first = await pendingReview(h);
    await startRunViaSlack(h, "Coral reefs");
    const second = await pendingReview(h, { exclude: new Set([first.reviewId]) });
    clock.offsetMs = 61_000;
    expect(await h.bot.reviewRequests.remindDue()).toBe(2);
    await eventually(async () => (await prismaOf(h.bot.database).review.count({ where: { escalatedTo: CAROL } })) === 2, { what: "both escalated" });
    const membersCalls = () => h.slack.callsTo("conversations.members").length;
    const before = membersCalls();

    // Slack takes 6 s to list the channel's members: Carol's Home does not wait for it.
    h.slack.delayNext("conversations.members", 6_000);
    const opened = Date.now();
    await h.requests.appHomeOpened({ user_id: CAROL });
    const home = await eventually(() => homesOf(h, CAROL)[0], { what: "Carol's Home" });
    expect(Date.now() - opened).toBeLessThan(5_000);
    expect(reviewsPart(home)).toContain(`2 reviews escalated to you wait in <#${CHANNEL}>`);
    expect(reviewsPart(home)).not.toContain(HOME_APPROVE_ACTION);

    // Once Slack answered (one call for both reviews), her next Home lists both, asking Slack nothing more.
    await eventually(() => !h.slack.inFlight.some((c) => c.method === "conversations.members"), { what: "Slack's slow answer", timeoutMs: 15_000 });
    expect(membersCalls() - before).toBe(1);
    await h.requests.appHomeOpened({ user_id: CAROL });
    const again = await eventually(() => homesOf(h, CAROL)[1], { what: "Carol's Home again" });
    const values = ((again.args.view as any).blocks as any[]).filter((b) => b.accessory?.action_id === HOME_APPROVE_ACTION).map((b) => b.accessory.value);
    expect(values.sort()).toEqual([first.reviewId, second.reviewId].sort());
    expect(membersCalls() - before).toBe(1);
  });
});

describe("App Home in a busy workspace", () => {
  /** The workspace the harness's Slack names. */
  const TEAM = "T0TEAM";
  const approveValues = (home: { args: Record<string, unknown> }, actionId: string) =>
    ((home.args.view as any).blocks as any[]).filter((b) => b.accessory?.action_id === actionId).map((b) => b.accessory.value);

  it("lists a user's review however many older reviews of others' runs wait in the workspace; they approve it from there", async () => {
    h = await startHarness();
    const db = prismaOf(h.bot.database);
    // 520 reviews, shown in Slack and waiting a minute already, on Bob's waiting runs (never polled during the test).
    const since = Date.now() - 60_000;
    const runs = await Promise.all(
      [0, 1, 2, 3].map((i) =>
        db.execution.create({
          data: {
            crewName: "research",
            teamId: TEAM,
            channelId: CHANNEL,
            userId: BOB,
            inputs: { topic: `older ${i}` },
            state: "waiting",
            requestId: `seeded-${i}`,
            kickoffId: `seeded-kickoff-${i}`,
            webhookSecret: "seeded",
            createdAt: new Date(since),
            nextPollAt: new Date(Date.now() + 86_400_000),
          },
        }),
      ),
    );
    await db.review.createMany({
      data: Array.from({ length: 520 }, (_, i) => ({
        executionId: runs[i % runs.length]!.id,
        taskKey: `seeded-${i}`,
        taskName: `Seeded task ${i}`,
        round: 1,
        output: "An older output",
        outputHash: `seeded-${i}`,
        state: "pending",
        messageTs: `1700000000.${String(i).padStart(6, "0")}`,
        createdAt: new Date(since + i),
      })),
    });

    const execution = await startRunViaSlack(h);
    expect(execution.teamId).toBe(TEAM);
    const review = await pendingReview(h);
    await h.requests.appHomeOpened({ user_id: USER });
    const home = await eventually(() => homesOf(h, USER)[0], { what: "Alice's Home" });
    expect(reviewsPart(home)).toContain("Reviews waiting for you (1)");
    expect(approveValues(home, HOME_APPROVE_ACTION)).toEqual([review.reviewId]);

    // Approved from there, the next Home (published again) lists none of hers.
    await h.requests.blockAction({
      user_id: USER,
      channel_id: "",
      message_ts: "",
      view: { id: "V0HOME", type: "home" } as any,
      action: { action_id: HOME_APPROVE_ACTION, block_id: "b", value: review.reviewId },
    });
    await eventually(() => resumeCalls(h).length === 1, { what: "the crew resumed" });
    const again = await eventually(() => homesOf(h, USER)[1], { what: "Alice's Home again" });
    expect(approveValues(again, HOME_APPROVE_ACTION)).toEqual([]);
    expect(await reviewState(h, review.reviewId)).toBe("approved");
  });

  it("lists a flow request for its reviewer however many older requests of another flow wait", async () => {
    const flow = (name: string, reviewer: string) => ({ name, secret: FLOW_SECRET, channel: FLOW_CHANNEL, reviewers: { users: [reviewer], usergroups: [] } });
    f = await startFlowHarness({ config: { flows: [flow(FLOW_NAME, BOB), flow("intake", CAROL)] } });
    h = f.h;
    // 520 requests of a flow Carol answers, shown in Slack and waiting a minute already.
    const since = Date.now() - 60_000;
    await prismaOf(h.bot.database).flowRequest.createMany({
      data: Array.from({ length: 520 }, (_, i) => ({
        flowName: "intake",
        requestId: `seeded-${i}`,
        channelId: FLOW_CHANNEL,
        output: "An older draft",
        emit: ["approved", "rejected"],
        callbackUrl: "http://127.0.0.1:9/never",
        state: "pending",
        messageTs: `1700000000.${String(i).padStart(6, "0")}`,
        createdAt: new Date(since + i),
      })),
    });

    await f.flow.send({ output: "Draft" });
    const req = await pendingFlowRequest(h, "Draft");
    await h.requests.appHomeOpened({ user_id: BOB });
    const home = await eventually(() => homesOf(h, BOB)[0], { what: "Bob's Home" });
    expect(approveValues(home, HOME_FLOW_APPROVE_ACTION)).toEqual([req.id]);
    await h.requests.appHomeOpened({ user_id: CAROL });
    const carol = await eventually(() => homesOf(h, CAROL)[0], { what: "Carol's Home" });
    // Carol's are the other flow's, not Bob's.
    expect(approveValues(carol, HOME_FLOW_APPROVE_ACTION)).toHaveLength(30);
    expect(approveValues(carol, HOME_FLOW_APPROVE_ACTION)).not.toContain(req.id);
  });
});

describe("reassignment", () => {
  async function reassignForm(h: Harness, pending: PendingReview, user: string) {
    const before = h.slack.callsTo("views.open").length;
    await h.requests.blockAction({
      user_id: user,
      channel_id: CHANNEL,
      message_ts: pending.msg.ts,
      thread_ts: pending.msg.thread_ts,
      action: { action_id: REASSIGN_ACTION, block_id: REVIEW_ACTIONS_BLOCK, value: pending.reviewId },
    });
    return (await h.slack.waitForCalls("views.open", before + 1)).at(-1)!.args.view as any;
  }

  it("refuses, on the modal's person field and saying why, anyone who could not act on the review; hands it to someone who can", async () => {
    h = await startHarness({ research: { selfApproval: false } });
    setRules(h, [BOB]);
    const GONE = "U0GONE";
    const GUEST = "U0GUEST";
    const OTHER_BOT = "U0OTHERBOT";
    // All but Carol are in the run's channel.
    h.slack.setMembers(CHANNEL, [USER, DAN, GONE, GUEST, OTHER_BOT, h.slack.botUserId]);
    h.slack.setUser(GONE, { deleted: true });
    h.slack.setUser(GUEST, { team_id: "T0PARTNER" });
    h.slack.setUser(OTHER_BOT, { is_bot: true });
    const execution = await startRunViaSlack(h);
    const pending = await pendingReview(h);
    const modal = await reassignForm(h, pending, BOB);

    // Slack cannot tell who Dan is just now: not handed on blindly.
    h.slack.failNext("users.info", "fatal_error");
    const refusals: [string, string][] = [
      [DAN, "Crewline could not check that person just now; try again in a moment."],
      [h.slack.botUserId, "That's a bot: reassign to a person."],
      [OTHER_BOT, "That's a bot: reassign to a person."],
      [GONE, "That person's account is deactivated: reassign to someone active."],
      [GUEST, "That person is of another organisation (a guest in a shared channel), who may not decide it: reassign to someone of this workspace."],
      // The crew does not let a run's starter approve it (selfApproval: false).
      [USER, "That person started this run, and this crew does not let a run's starter approve it: reassign to someone else."],
      [CAROL, "That person is not in this run's channel, so they could not see it."],
    ];
    for (const [to, text] of refusals) {
      const answer = await submitReassign(h, modal, BOB, to, "Over to you");
      expect(answer.json, to).toEqual({ response_action: "errors", errors: { [REASSIGN_USER_BLOCK]: text } });
    }
    await h.settled();
    expect(await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: pending.reviewId } })).toMatchObject({ reassignedTo: null });
    expect(await prismaOf(h.bot.database).auditRecord.count({ where: { kind: "reassignment" } })).toBe(0);
    expect(h.slack.messages(CHANNEL).filter((m) => m.thread_ts === execution.threadTs && /↪️/.test(m.text ?? ""))).toHaveLength(0);
    expect(h.slack.callsTo("views.publish")).toHaveLength(0);

    // Dan, a person of this workspace in the run's channel, is handed it.
    const handed = await submitReassign(h, modal, BOB, DAN, "Dan knows the sources");
    expect(handed.status).toBe(200);
    expect(handed.json).toBeUndefined();
    await eventually(async () => (await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: pending.reviewId } })).reassignedTo === DAN, {
      what: "the review handed to Dan",
    });
    await eventually(() => homesOf(h, DAN)[0], { what: "Dan's Home" });
  });
});
