// Review decisions teams ask for (#14): edit and approve, required approvals, self-approval, round
// diffs. Through signed requests to /slack/events, the Slack stand-in and the local crew service.
import { afterEach, describe, expect, it } from "vitest";
import { EDIT_TEXT_BLOCK, FLOW_EDIT_VIEW_CALLBACK, HOME_APPROVE_ACTION } from "../../src/adapters/slack/blocks/index.js";
import { EDIT_ROOM, EDITED_OUTPUT_END, EDITED_OUTPUT_START } from "../../src/domain/approvals.js";
import type { SimTask } from "../../src/sim/crew-service.js";
import { clickFlow, FLOW_CHANNEL, type FlowHarness, flowRow, openFlowEdit, pendingFlowRequest, startFlowHarness } from "../support/flows.js";
import { CHANNEL, eventually, type Harness, startHarness, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { clickReview, messageText, offsetClock, openEditModal, pendingReview, resumeCalls, startRunViaSlack, submitEdit } from "../support/reviews.js";

let h: Harness;
let f: FlowHarness | undefined;
afterEach(async () => {
  await h?.close();
  await f?.close();
  h = undefined as unknown as Harness;
  f = undefined;
});

const BOB = "U0BOB";
const CAROL = "U0CAROL";
const MIN = 60_000;

/** A clock a test moves forward (a deadline passing). */
const review = (id: string) => prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id } });
const ephemeralsFor = (user: string) => h.slack.ephemerals.filter((e) => e.user === user);
const resumeBody = (i: number) => resumeCalls(h)[i]!.body as { is_approve: boolean; human_feedback: string };
/** Lets anything that would wrongly reach the crew arrive before asserting that nothing did: the bot has nothing left to do (settled() in test/support/harness.ts). */
const settle = () => (f?.h ?? h).settled();

function tasks(outputs: Record<string, (round: number) => string>): SimTask[] {
  return Object.entries(outputs).map(([name, output], i) => ({ id: `task-${i}`, name, agent: "Writer", humanInput: true, output: (ctx) => output(ctx.round) }));
}

describe("edit and approve", () => {
  it("opens the output in a modal; submitting approves with the edit: the crew gets it, the thread shows the diff", async () => {
    h = await startHarness();
    await startRunViaSlack(h);
    const pending = await pendingReview(h);
    const original = (await review(pending.reviewId)).output;
    expect(original).toContain("has grown steadily");

    const modal = await openEditModal(h, pending);
    const input = modal.view.blocks.find((b: any) => b.block_id === EDIT_TEXT_BLOCK);
    expect(input.element.initial_value).toBe(original);
    expect(JSON.stringify(modal.view.blocks)).not.toMatch(/kept unchanged/);

    const edited = original.replace("has grown steadily", "has doubled");
    const answer = await submitEdit(h, modal, edited, "Tightened the first finding");
    expect(answer.status).toBe(200);

    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    const body = resumeBody(0);
    expect(body.is_approve).toBe(true);
    expect(body.human_feedback).toMatch(/The reviewer U0ALICE replaced this task's output with an edited version/);
    expect(body.human_feedback).toContain("Reviewer's note: Tightened the first finding");
    expect(body.human_feedback).toContain(`${EDITED_OUTPUT_START}\n${edited}\n${EDITED_OUTPUT_END}`);

    const text = await eventually(() => {
      const t = messageText(h, pending.msg.ts);
      return t.includes("Approved with edits") ? t : undefined;
    });
    expect(text).toContain(`Approved with edits by <@${USER}>`);
    expect(text).toContain("[-grown steadily-]{+doubled+}");
    expect(text).not.toContain("review_approve");
    const stored = await review(pending.reviewId);
    expect(stored).toMatchObject({ state: "approved", decidedBy: USER, feedback: "Tightened the first finding" });
    expect(await prismaOf(h.bot.database).reviewApproval.findMany({ where: { reviewId: pending.reviewId } })).toMatchObject([{ userId: USER, editedOutput: edited }]);
    const audit = await prismaOf(h.bot.database).auditRecord.findFirstOrThrow({ where: { kind: "decision", taskKey: "research_task" } });
    expect(audit).toMatchObject({ actor: USER, decision: "approve", feedback: "Tightened the first finding", detail: { outcome: "decided", edited: true, editedBy: USER } });
    // Short: no file for the edited version.
    expect(h.slack.files.filter((f) => f.filename.includes("edited"))).toHaveLength(0);

    // A replayed submission sends nothing more.
    await submitEdit(h, modal, `${edited} again`);
    await settle();
    expect(resumeCalls(h)).toHaveLength(1);
    expect(h.slack.violations).toEqual([]);
  });

  it("offers the first part of an output too long for a text input, appends the rest unchanged, and attaches the edited version", async () => {
    const line = (i: number) => `Paragraph ${i}: ${"the reef survey recorded steady numbers ".repeat(4).trim()}.`;
    const long = Array.from({ length: 80 }, (_, i) => line(i)).join("\n");
    expect(long.length).toBeGreaterThan(10_000);
    h = await startHarness({ crew: { tasks: tasks({ report_task: () => long }) } });
    await startRunViaSlack(h);
    const pending = await pendingReview(h);

    const modal = await openEditModal(h, pending);
    const head: string = modal.view.blocks.find((b: any) => b.block_id === EDIT_TEXT_BLOCK).element.initial_value;
    expect(head.length).toBeLessThanOrEqual(3000 - EDIT_ROOM);
    expect(long.startsWith(head)).toBe(true);
    const all = JSON.stringify(modal.view.blocks);
    expect(all).toMatch(/the first [\d,]+ are here to edit, with room to add/);
    expect(all).toMatch(/kept unchanged and appended after your edit/);

    const editedHead = head.replace("Paragraph 0:", "Opening:");
    await submitEdit(h, modal, editedHead);
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    const expected = editedHead + long.slice(head.length);
    expect(resumeBody(0).human_feedback).toContain(`${EDITED_OUTPUT_START}\n${expected}\n${EDITED_OUTPUT_END}`);
    const file = await eventually(() => h.slack.files.find((f) => f.filename.endsWith("-edited.md")), { what: "the edited version's file" });
    expect(file.content).toBe(expected);
    expect(await eventually(() => messageText(h, pending.msg.ts).includes("Approved with edits"))).toBe(true);
    expect(messageText(h, pending.msg.ts)).toContain("The edited version is attached below as a file.");
    expect(h.slack.violations).toEqual([]);
  });

  it("an output that fits its first message but not beside an edit: once approved with edits, its whole text comes as a file, as the message says", async () => {
    const line = (i: number) => `Paragraph ${i}: ${"the reef survey recorded steady numbers ".repeat(4).trim()}.`;
    const long = Array.from({ length: 50 }, (_, i) => line(i)).join("\n");
    expect(long.length).toBeGreaterThan(8_000);
    expect(long.length).toBeLessThan(9_500);
    h = await startHarness({ crew: { tasks: tasks({ report_task: () => long }) } });
    await startRunViaSlack(h);
    const pending = await pendingReview(h);
    expect(messageText(h, pending.msg.ts)).not.toContain("Output shortened");

    const modal = await openEditModal(h, pending);
    await submitEdit(h, modal, long.replace("Paragraph 0:", "Opening:").slice(0, 3000));
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    await eventually(() => messageText(h, pending.msg.ts).includes("Approved with edits"), { what: "the message approved" });
    expect(messageText(h, pending.msg.ts)).toContain("Output shortened — the full text is attached below as a file.");
    const file = await eventually(() => h.slack.files.find((f) => f.filename === "report_task-round-1.md"), { what: "the original output's file" });
    expect(file.content).toBe(long);
    expect(h.slack.violations).toEqual([]);
  });

  it("submitting the form unchanged is a plain approval with the note, not an edit", async () => {
    h = await startHarness();
    await startRunViaSlack(h);
    const pending = await pendingReview(h);
    const modal = await openEditModal(h, pending);
    const head: string = modal.view.blocks.find((b: any) => b.block_id === EDIT_TEXT_BLOCK).element.initial_value;
    await submitEdit(h, modal, `${head.replace(/\n/g, "\r\n")}\n`, "All good");
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    expect(resumeBody(0)).toMatchObject({ is_approve: true, human_feedback: "All good" });
    const text = await eventually(() => (messageText(h, pending.msg.ts).includes("Approved by") ? messageText(h, pending.msg.ts) : undefined));
    expect(text).not.toContain("with edits");
    expect((await prismaOf(h.bot.database).reviewApproval.findFirstOrThrow({ where: { reviewId: pending.reviewId } })).editedOutput).toBeNull();
  });

  it("follows the reviewer rules: no form for someone who may not decide, and the submission is checked again", async () => {
    h = await startHarness();
    h.bot.crews.config("research")!.reviewers = { users: [BOB], usergroups: [] };
    await startRunViaSlack(h);
    const pending = await pendingReview(h);
    const opened = h.slack.callsTo("views.open").length;
    await h.requests.blockAction({
      user_id: CAROL,
      channel_id: CHANNEL,
      message_ts: pending.msg.ts,
      thread_ts: pending.msg.thread_ts,
      trigger_id: h.slack.issueTrigger(CAROL),
      action: { action_id: "review_edit", block_id: pending.blockId, value: pending.reviewId },
    });
    await eventually(() => ephemeralsFor(CAROL).find((e) => e.text?.includes(`Only <@${BOB}> may decide`)), { what: "the refusal" });
    expect(h.slack.callsTo("views.open")).toHaveLength(opened);

    // Bob opens the form, then loses the right to decide before submitting: nothing reaches the crew.
    const modal = await openEditModal(h, pending, BOB);
    h.bot.crews.config("research")!.reviewers = { users: [CAROL], usergroups: [] };
    await submitEdit(h, modal, "Bob's version", "", BOB);
    await eventually(() => ephemeralsFor(BOB).find((e) => e.text?.includes(`Only <@${CAROL}> may decide`)), { what: "the refusal on submission" });
    await settle();
    expect(resumeCalls(h)).toHaveLength(0);
    expect((await review(pending.reviewId)).state).toBe("pending");
    expect(await prismaOf(h.bot.database).reviewApproval.count()).toBe(0);
  });

  it("refuses an edit form submitted by someone other than who opened it", async () => {
    h = await startHarness();
    await startRunViaSlack(h);
    const pending = await pendingReview(h);
    const modal = await openEditModal(h, pending);
    const answer = await submitEdit(h, modal, "Entirely different text", "", BOB);
    expect(answer.json).toMatchObject({ response_action: "errors", errors: { [EDIT_TEXT_BLOCK]: expect.stringMatching(/opened by someone else/) } });
    await settle();
    expect(resumeCalls(h)).toHaveLength(0);
    expect((await review(pending.reviewId)).state).toBe("pending");
    expect(await prismaOf(h.bot.database).reviewApproval.count()).toBe(0);
  });
});

describe("required approvals", () => {
  it("resumes once two distinct people approved; the same person twice still waits; each note reaches the crew", async () => {
    h = await startHarness();
    h.bot.crews.config("research")!.approvals = 2;
    const execution = await startRunViaSlack(h);
    const pending = await pendingReview(h);

    await clickReview(h, pending, true, "Looks right to me", USER);
    await eventually(() => ephemeralsFor(USER).find((e) => /1 of 2 approvals/.test(e.text ?? "")), { what: "the first approval's note" });
    await eventually(() => messageText(h, pending.msg.ts).includes(`1 of 2 approvals: <@${USER}>`), { what: "1 of 2 in the message" });
    expect(messageText(h, pending.msg.ts)).toContain("review_approve");

    await clickReview(h, pending, true, "", USER);
    await eventually(() => ephemeralsFor(USER).find((e) => /already approved/.test(e.text ?? "")), { what: "already approved" });
    await settle();
    expect(resumeCalls(h)).toHaveLength(0);
    expect((await review(pending.reviewId)).state).toBe("pending");
    // A new note from the same person replaces their earlier one, says so, and is audited; still one approval.
    await clickReview(h, pending, true, "Looks right, cite the survey", USER);
    await eventually(() => ephemeralsFor(USER).find((e) => /1 of 2 approvals\): what you sent now replaces your earlier note/.test(e.text ?? "")), {
      what: "the note replaced",
    });
    expect(resumeCalls(h)).toHaveLength(0);

    await clickReview(h, pending, true, "Ship it", BOB);
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    const body = resumeBody(0);
    expect(body.is_approve).toBe(true);
    expect(body.human_feedback).toContain(`Approved by 2 reviewers: ${USER}, ${BOB}.`);
    expect(body.human_feedback).toContain(`- ${USER}: Looks right, cite the survey`);
    expect(body.human_feedback).not.toContain("Looks right to me");
    expect(body.human_feedback).toContain(`- ${BOB}: Ship it`);
    await eventually(async () => (await review(pending.reviewId)).state === "approved");
    const text = await eventually(() => (messageText(h, pending.msg.ts).includes("Approved by") ? messageText(h, pending.msg.ts) : undefined));
    expect(text).toContain(`2 of 2 approvals: <@${USER}>, <@${BOB}>`);

    // A third click changes nothing.
    await clickReview(h, pending, true, "", CAROL);
    await settle();
    expect(resumeCalls(h)).toHaveLength(1);

    const rows = await prismaOf(h.bot.database).auditRecord.findMany({ where: { taskKey: "research_task" }, orderBy: { createdAt: "asc" } });
    expect(rows.map((r) => [r.kind, r.actor, r.decision, r.feedback])).toEqual([
      ["approval", USER, "approve", "Looks right to me"],
      ["approval", USER, "approve", "Looks right, cite the survey"],
      ["decision", BOB, "approve", expect.any(String)],
    ]);
    expect(rows[0]!.detail).toMatchObject({ approvals: 1, required: 2 });
    expect(rows[2]!.detail).toMatchObject({ outcome: "decided", approvers: [USER, BOB] });
    await h.requests.command({ text: `audit ${execution.kickoffId}`, user_id: USER, channel_id: CHANNEL });
    const answer = await eventually(() => h.slack.callsTo("response_url").at(-1), { what: "the audit answer" });
    // Mentions are mentions (the lines are mrkdwn already, not escaped a second time).
    expect(String(answer.args.text)).toContain(`<@${USER}> approved *research_task* round 1 (1 of 2 approvals): “Looks right to me”`);
    expect(String(answer.args.text)).toMatch(/<@U0BOB> approved \*research_task\* round 1 after/);
    expect(h.slack.violations).toEqual([]);
  });

  it("an approval whose message update was lost is shown on the outbox's retry", async () => {
    h = await startHarness({ crewline: { outbox: { minBackoffMs: 100, maxBackoffMs: 500 } } });
    h.bot.crews.config("research")!.approvals = 2;
    await startRunViaSlack(h);
    const pending = await pendingReview(h);
    // With the worker paused, the approval's update is the only Slack effect due when it resumes.
    await h.bot.outboxWorker.idle();
    h.bot.outboxWorker.stop();
    await clickReview(h, pending, true, "", BOB);
    await eventually(() => ephemeralsFor(BOB).find((e) => /1 of 2 approvals/.test(e.text ?? "")), { what: "the approval" });
    const before = h.slack.callsTo("chat.update").length;
    h.slack.failNext("chat.update", "internal_error");
    h.bot.outboxWorker.start();
    await eventually(() => messageText(h, pending.msg.ts).includes(`1 of 2 approvals: <@${BOB}>`), { what: "the approval shown after the retry" });
    const attempts = h.slack
      .callsTo("chat.update")
      .slice(before)
      .filter((c) => c.args.ts === pending.msg.ts);
    expect(attempts.map((c) => c.error ?? "ok")).toEqual(["internal_error", "ok"]);
  });

  it("a reject by any allowed reviewer rejects at once, after an approval", async () => {
    h = await startHarness();
    h.bot.crews.config("research")!.approvals = 2;
    await startRunViaSlack(h);
    const pending = await pendingReview(h);
    await clickReview(h, pending, true, "", BOB);
    await eventually(() => messageText(h, pending.msg.ts).includes("1 of 2 approvals"));
    await clickReview(h, pending, false, "Needs primary sources", CAROL);
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    expect(resumeBody(0)).toMatchObject({ is_approve: false, human_feedback: "Needs primary sources" });
    await eventually(async () => (await review(pending.reviewId)).state === "rejected");
    expect(await review(pending.reviewId)).toMatchObject({ decidedBy: CAROL, decision: "reject" });
  });

  it("two approvals at once from different people resume the crew exactly once", async () => {
    h = await startHarness();
    h.bot.crews.config("research")!.approvals = 2;
    await startRunViaSlack(h);
    const pending = await pendingReview(h);
    await Promise.all([clickReview(h, pending, true, "", BOB), clickReview(h, pending, true, "", CAROL)]);
    await eventually(async () => (await review(pending.reviewId)).state === "approved");
    await settle();
    expect(resumeCalls(h)).toHaveLength(1);
    expect(resumeBody(0).human_feedback).toMatch(/^Approved by 2 reviewers: (U0BOB, U0CAROL|U0CAROL, U0BOB)\.$/);
    // Neither is told that the other decided: both approvals counted.
    expect(h.slack.ephemerals.filter((e) => /already/.test(e.text ?? ""))).toEqual([]);
  });
});

describe("self-approval", () => {
  it("refuses the run's starter privately (no resume), lets them reject, and lets someone else approve", async () => {
    h = await startHarness();
    h.bot.crews.config("research")!.selfApproval = false;
    await startRunViaSlack(h);
    const pending = await pendingReview(h);

    await clickReview(h, pending, true, "Mine is fine", USER);
    const refusal = await eventually(() => ephemeralsFor(USER).find((e) => /You started this run/.test(e.text ?? "")), { what: "the refusal" });
    expect(refusal.text).toMatch(/nothing was sent to the crew/);
    expect(refusal.text).toMatch(/may still reject/);
    // Their App Home lists the review without an Approve button they could not use.
    await h.requests.appHomeOpened({ user_id: USER });
    const [home] = await h.slack.waitForCalls("views.publish", 1);
    const homeText = JSON.stringify((home!.args.view as { blocks: unknown[] }).blocks);
    expect(homeText).toContain("You started this run: someone else approves it");
    expect(homeText).not.toContain(HOME_APPROVE_ACTION);
    // The edit form is refused the same way, before it opens.
    const opened = h.slack.callsTo("views.open").length;
    await h.requests.blockAction({
      user_id: USER,
      channel_id: CHANNEL,
      message_ts: pending.msg.ts,
      thread_ts: pending.msg.thread_ts,
      trigger_id: h.slack.issueTrigger(USER),
      action: { action_id: "review_edit", block_id: pending.blockId, value: pending.reviewId },
    });
    await eventually(() => ephemeralsFor(USER).filter((e) => /You started this run/.test(e.text ?? "")).length === 2, { what: "the edit refusal" });
    await settle();
    expect(h.slack.callsTo("views.open")).toHaveLength(opened);
    expect(resumeCalls(h)).toHaveLength(0);
    expect(await prismaOf(h.bot.database).reviewApproval.count()).toBe(0);
    expect((await review(pending.reviewId)).state).toBe("pending");

    await clickReview(h, pending, false, "Add sources", USER);
    await eventually(() => resumeCalls(h).length === 1);
    expect(resumeBody(0).is_approve).toBe(false);

    const round2 = await pendingReview(h, { exclude: new Set([pending.reviewId]) });
    await clickReview(h, round2, true, "", BOB);
    await eventually(() => resumeCalls(h).length === 2);
    expect(resumeBody(1).is_approve).toBe(true);
  });
});

describe("round diffs", () => {
  it("round 2 shows what changed since round 1 and quotes the feedback that asked for it", async () => {
    h = await startHarness();
    await startRunViaSlack(h);
    const first = await pendingReview(h);
    await clickReview(h, first, false, "Cite primary sources", USER);
    const second = await pendingReview(h, { exclude: new Set([first.reviewId]) });
    expect((await review(second.reviewId)).round).toBe(2);
    const text = messageText(h, second.msg.ts);
    expect(text).toContain(`Round 1 was rejected by <@${USER}> with this feedback:`);
    expect(text).toContain("with this feedback:\\n> Cite primary sources");
    expect(text).toContain("Changes since round 1");
    expect(text).toMatch(/\{\+[^}]*## Revision \(round 2\)/);
    expect(h.slack.files.filter((f) => f.filename.endsWith(".diff"))).toHaveLength(0);
    // Round 1 shows no diff.
    expect(messageText(h, first.msg.ts)).not.toContain("Changes since");
    expect(h.slack.violations).toEqual([]);
  });

  it("attaches the whole diff as a file when it is long", async () => {
    const words = (round: number) => Array.from({ length: 400 }, (_, i) => `word${i}-r${round}`).join(" ");
    h = await startHarness({ crew: { tasks: tasks({ draft_task: (round) => words(round) }) } });
    await startRunViaSlack(h);
    const first = await pendingReview(h);
    await clickReview(h, first, false, "Rewrite all of it", USER);
    const second = await pendingReview(h, { exclude: new Set([first.reviewId]) });
    const file = await eventually(() => h.slack.files.find((f) => f.filename.endsWith(".diff")), { what: "the diff file" });
    expect(file.filename).toBe("draft_task-round-1-to-2.diff");
    expect(file.content).toContain("--- round-1");
    expect(file.content).toContain("+++ round-2");
    expect(file.content).toContain(`+${words(2)}`);
    expect(messageText(h, second.msg.ts)).toContain("The whole diff is attached below as a file.");
    expect(h.slack.violations).toEqual([]);
  });
});

describe("flow feedback requests", () => {
  const flowText = (ts: string) => JSON.stringify(f!.h.slack.messages(FLOW_CHANNEL).find((m) => m.ts === ts)?.blocks ?? []);

  it("edit and approve: the flow gets its approve outcome with the edited text; the message shows the diff", async () => {
    f = await startFlowHarness();
    await f.flow.send({ output: "The reef grew by five percent this year." });
    const req = await pendingFlowRequest(f.h);
    const modal = await openFlowEdit(f.h, req);
    expect(modal.view.blocks.find((b: any) => b.block_id === EDIT_TEXT_BLOCK).element.initial_value).toBe("The reef grew by five percent this year.");

    await submitEdit(f.h, modal, "The reef grew by seven percent this year.", "Checked the survey");
    await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
    const feedback = String(f.flow.answers[0]!.feedback);
    expect(feedback.startsWith("approved\n\nThe reviewer U0ALICE replaced the output with an edited version and approved it.")).toBe(true);
    expect(feedback).toContain("Reviewer's note: Checked the survey");
    expect(feedback).toContain(`${EDITED_OUTPUT_START}\nThe reef grew by seven percent this year.\n${EDITED_OUTPUT_END}`);
    await eventually(async () => (await flowRow(f!.h, req.id)).state === "answered");
    const text = await eventually(() => (flowText(req.msg.ts).includes("Approved with edits") ? flowText(req.msg.ts) : undefined));
    expect(text).toContain(`Approved with edits by <@${USER}>`);
    expect(text).toContain("[-five-]{+seven+}");
    const audit = await prismaOf(f.h.bot.database).auditRecord.findFirstOrThrow({ where: { flowRequestId: req.id, kind: "flow_decision" } });
    expect(audit).toMatchObject({ actor: USER, decision: "approved", detail: { outcome: "answered", edited: true } });
    expect(f.flow.calls).toHaveLength(1);
  });

  it("edit and approve of an output that fits its first message but not beside the edit: its whole text follows as a file", async () => {
    f = await startFlowHarness();
    const long = Array.from({ length: 50 }, (_, i) => `Paragraph ${i}: ${"the reef survey recorded steady numbers ".repeat(4).trim()}.`).join("\n");
    await f.flow.send({ output: long });
    const req = await pendingFlowRequest(f.h);
    expect(f.h.slack.files).toHaveLength(0);
    await submitEdit(f.h, await openFlowEdit(f.h, req), long.slice(0, 3000).replace("Paragraph 0:", "Opening:"));
    await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
    await eventually(() => flowText(req.msg.ts).includes("Output shortened — the full text is attached below as a file."), { what: "the message shortened" });
    const file = await eventually(() => f!.h.slack.files.find((x) => x.content === long), { what: "the original output's file" });
    expect(file.filename.endsWith("-edited.md")).toBe(false);
  });

  it("edit and approve follows the flow's reviewer rules: no form for someone who may not answer", async () => {
    f = await startFlowHarness({ flow: { reviewers: { users: [BOB], usergroups: [] } } });
    await f.flow.send({ output: "Draft one" });
    const req = await pendingFlowRequest(f.h);
    await clickFlow(f.h, req, "Edit and approve…", "", USER);
    const refusal = await eventually(() => f!.h.slack.ephemerals.find((e) => e.user === USER), { what: "the refusal" });
    expect(refusal.text).toBe(`Only <@${BOB}> may answer this request, so nothing was sent to the flow.`);
    await settle();
    expect(f.h.slack.callsTo("views.open")).toHaveLength(0);
    // Bob gets the form.
    expect((await openFlowEdit(f.h, req, BOB)).view.callback_id).toBe(FLOW_EDIT_VIEW_CALLBACK);
  });

  it("edit and approve on a free-feedback flow (no outcomes): the edit is the feedback", async () => {
    f = await startFlowHarness();
    await f.flow.send({ emit: null, output: "Draft one" });
    const req = await pendingFlowRequest(f.h);
    const modal = await openFlowEdit(f.h, req);
    await submitEdit(f.h, modal, "Draft two");
    await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
    const feedback = String(f.flow.answers[0]!.feedback);
    expect(feedback.startsWith("The reviewer U0ALICE replaced the output with an edited version")).toBe(true);
    expect(feedback).toContain(`${EDITED_OUTPUT_START}\nDraft two\n${EDITED_OUTPUT_END}`);
  });

  it("two required approvals: one approval (or the same person twice) sends nothing; the second person's sends once; a reject decides at once", async () => {
    f = await startFlowHarness({ flow: { approvals: 2 } });
    await f.flow.send({ output: "First draft" });
    const req = await pendingFlowRequest(f.h);
    await clickFlow(f.h, req, "approved", "Good", USER);
    await eventually(() => flowText(req.msg.ts).includes(`1 of 2 approvals: <@${USER}>`), { what: "1 of 2" });
    await clickFlow(f.h, req, "approved", "", USER);
    await eventually(() => f!.h.slack.ephemerals.find((e) => /already approved/.test(e.text ?? "")), { what: "already approved" });
    await settle();
    expect(f.flow.calls).toHaveLength(0);
    await clickFlow(f.h, req, "approved", "Fine by me", BOB);
    await eventually(() => f!.flow.answers.length === 1, { what: "the answer" });
    expect(f.flow.answers[0]!.feedback).toBe(`approved\n\nApproved by 2 reviewers: ${USER}, ${BOB}.\n\nReviewers' notes:\n- ${USER}: Good\n- ${BOB}: Fine by me`);
    await eventually(() => flowText(req.msg.ts).includes(`2 of 2 approvals: <@${USER}>, <@${BOB}>`));

    await f.flow.send({ output: "Second draft" });
    const second = await pendingFlowRequest(f.h, "Second draft");
    await clickFlow(f.h, second, "approved", "", USER);
    await eventually(() => flowText(second.msg.ts).includes("1 of 2 approvals"));
    await clickFlow(f.h, second, "rejected", "Not yet", CAROL);
    await eventually(() => f!.flow.answers.length === 2, { what: "the reject" });
    expect(f.flow.answers[1]!.feedback).toBe("rejected\n\nNot yet");
    expect(f.flow.calls).toHaveLength(2);
    // The message says what the flow was sent: the rejection, not the approval counted before it.
    await eventually(async () => (await flowRow(f!.h, second.id)).state === "answered", { what: "the reject recorded" });
    await settle();
    const shown = flowText(second.msg.ts);
    expect(shown).toContain(`Answered by <@${CAROL}> — *rejected*`);
    expect(shown).toContain("Not yet");
    expect(shown).not.toContain("Approved");
    expect(shown).not.toContain("approvals");
  });

  it("the deadline's rejection after an edit whose answer did not arrive: the message shows the rejection the flow got, not the edit", async () => {
    const clock = offsetClock();
    f = await startFlowHarness({ flow: { decideWithinMs: 30 * MIN, onTimeout: "reject" }, crewline: { clock } });
    await f.flow.send({ output: "The reef grew by five percent this year." });
    const req = await pendingFlowRequest(f.h);
    f.flow.failNext(503);
    await submitEdit(f.h, await openFlowEdit(f.h, req), "The reef grew by seven percent this year.");
    await eventually(() => f!.flow.calls.length === 1, { what: "the edit's answer" });
    await settle();
    expect(await flowRow(f.h, req.id)).toMatchObject({ state: "pending", decidedBy: null });
    expect(await prismaOf(f.h.bot.database).flowApproval.findMany({ where: { flowRequestId: req.id } })).toMatchObject([
      { userId: USER, editedOutput: "The reef grew by seven percent this year." },
    ]);

    clock.offsetMs = 31 * MIN;
    expect(await f.h.bot.flows.deadlinesDue()).toBe(1);
    await eventually(() => f!.flow.answers.length === 1, { what: "the deadline's answer" });
    expect(f.flow.answers[0]!.feedback).toBe("rejected\n\nNo decision within 30 minutes: rejected automatically by Crewline");
    await eventually(async () => (await flowRow(f!.h, req.id)).state === "answered", { what: "the answer recorded" });
    await settle();
    const shown = flowText(req.msg.ts);
    expect(shown).toContain("Answered by deadline (Crewline) — *rejected*");
    for (const claim of ["Approved", "edited version", "[-five-]{+seven+}"]) expect(shown).not.toContain(claim);
  });

  it("the deadline's approval with two required and an edit recorded: the flow gets the plain approval, and the message does not claim the edit", async () => {
    const clock = offsetClock();
    f = await startFlowHarness({ flow: { approvals: 2, decideWithinMs: 30 * MIN, onTimeout: "approve" }, crewline: { clock } });
    await f.flow.send({ output: "The reef grew by five percent this year." });
    const req = await pendingFlowRequest(f.h);
    await submitEdit(f.h, await openFlowEdit(f.h, req), "The reef grew by seven percent this year.");
    await eventually(() => flowText(req.msg.ts).includes(`1 of 2 approvals: <@${USER}>`), { what: "1 of 2" });

    clock.offsetMs = 31 * MIN;
    expect(await f.h.bot.flows.deadlinesDue()).toBe(1);
    await eventually(() => f!.flow.answers.length === 1, { what: "the deadline's answer" });
    expect(f.flow.answers[0]!.feedback).toBe("approved\n\nNo decision within 30 minutes: approved automatically by Crewline");
    await eventually(async () => (await flowRow(f!.h, req.id)).state === "answered", { what: "the answer recorded" });
    await settle();
    const shown = flowText(req.msg.ts);
    expect(shown).toContain("Answered by deadline (Crewline) — *approved*");
    for (const claim of ["Approved with edits", "edited version", "[-five-]{+seven+}", "approvals"]) expect(shown).not.toContain(claim);
    expect(f.h.slack.files.filter((file) => file.filename.includes("edited"))).toHaveLength(0);
  });

  it("two required approvals at once from different people answer the flow exactly once", async () => {
    f = await startFlowHarness({ flow: { approvals: 2 } });
    await f.flow.send({ output: "Draft" });
    const req = await pendingFlowRequest(f.h);
    await Promise.all([clickFlow(f.h, req, "approved", "", BOB), clickFlow(f.h, req, "approved", "", CAROL)]);
    await eventually(async () => (await flowRow(f!.h, req.id)).state === "answered", { what: "the answer" });
    await settle();
    expect(f.flow.calls).toHaveLength(1);
    expect(f.h.slack.ephemerals.filter((e) => /already/.test(e.text ?? ""))).toEqual([]);
  });
});
