import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { CREW_GET_LONGEST_MS, CREW_POST_LONGEST_MS } from "../../src/adapters/crew/client.js";
import { APPROVE_ACTION, FEEDBACK_BLOCK, REJECT_ACTION } from "../../src/adapters/slack/blocks/index.js";
import type { FakeMessage } from "../support/fake-slack.js";
import { CHANNEL, CREW_TOKEN, eventually, type Harness, startHarness, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { clickReview, pendingReview, resumeCalls, resumingThrough, startRunViaSlack } from "../support/reviews.js";
import { usePostgres } from "../support/test-database.js";

let h: Harness;
afterEach(async () => h?.close());

const BOB = "U0BOB";

function reviewMessages(h: Harness): FakeMessage[] {
  return h.slack
    .messages(CHANNEL)
    .filter(
      (m) =>
        /^✔️ Task finished/.test(m.text ?? "") ||
        JSON.stringify(m.blocks ?? []).includes(APPROVE_ACTION) ||
        /Approved by|Rejected by|No decision/.test(JSON.stringify(m.blocks ?? [])),
    );
}

describe("review loop", () => {
  it("kickoff → review in thread → reject with feedback → round 2 → approve → … → completion in the channel", async () => {
    h = await startHarness();
    const execution = await startRunViaSlack(h);

    const first = await pendingReview(h);
    expect(first.msg.thread_ts).toBe(execution.threadTs);
    const firstText = JSON.stringify(first.msg.blocks);
    expect(firstText).toContain("research_task");
    expect(firstText).toContain("Senior Research Analyst");
    expect(firstText).toContain(REJECT_ACTION);
    expect(firstText).toContain(FEEDBACK_BLOCK);
    // The message ts is stored right after Slack answers the post.
    const stored = await eventually(() => prismaOf(h.bot.database).review.findFirst({ where: { id: first.reviewId, messageTs: { not: null } } }));
    // A real deployment's task webhook names no task id: the human-input request gives the one /resume wants.
    expect(stored).toMatchObject({ round: 1, state: "pending", messageTs: first.msg.ts, taskKey: "research_task", resumeTaskId: "task-research" });

    // Reject without feedback (blank, or only characters that show nothing): refused, nothing reaches the crew.
    await clickReview(h, first, false, "  ");
    await clickReview(h, first, false, " \n\u200B\u200D\uFEFF ");
    const refusals = await eventually(() => (h.slack.callsTo("chat.postEphemeral").length >= 2 ? h.slack.callsTo("chat.postEphemeral") : undefined));
    for (const refusal of refusals) expect(refusal.args.text).toMatch(/write what should change in the feedback field/);
    expect(resumeCalls(h)).toHaveLength(0);

    await clickReview(h, first, false, "Cite primary sources");
    const resume = await eventually(() => resumeCalls(h)[0]);
    const body = resume.body as any;
    expect(resume.headers.authorization).toBe(`Bearer ${CREW_TOKEN}`);
    expect(body.execution_id).toBe(execution.kickoffId);
    expect(body.task_id).toBe("task-research");
    expect(body.human_feedback).toBe("Cite primary sources");
    expect(body.is_approve).toBe(false);
    const hooks = h.crew.requests.find((r) => r.path === "/kickoff")!.body as any;
    expect(body.taskWebhookUrl).toBe(hooks.taskWebhookUrl);
    expect(body.stepWebhookUrl).toBe(hooks.stepWebhookUrl);
    expect(body.crewWebhookUrl).toBe(hooks.crewWebhookUrl);

    // The message is rewritten in place: no buttons, who rejected, the feedback quoted.
    await eventually(
      () => {
        const updated = h.slack.messages(CHANNEL).find((m) => m.ts === first.msg.ts)!;
        const text = JSON.stringify(updated.blocks);
        // …and the crew's answer to the resume.
        return (
          !text.includes(APPROVE_ACTION) &&
          text.includes(`<@${USER}>`) &&
          text.includes("Cite primary sources") &&
          /Rejected/.test(text) &&
          text.includes("Crew: retrying — Task will be retried")
        );
      },
      { what: "the rejected review message" },
    );

    // The retried task arrives as round 2 in the same thread.
    const second = await pendingReview(h, { containing: "round 2" });
    expect(second.reviewId).not.toBe(first.reviewId);
    expect(second.msg.thread_ts).toBe(execution.threadTs);
    expect(JSON.stringify(second.msg.blocks)).toMatch(/round 2/i);
    expect(JSON.stringify(second.msg.blocks)).toContain("Cite primary sources");
    await clickReview(h, second, true, "");
    await eventually(() => resumeCalls(h).length === 2);
    expect((resumeCalls(h)[1]!.body as any).is_approve).toBe(true);

    const third = await pendingReview(h, { containing: "writing_task" });
    await clickReview(h, third, true, "Ship it");
    expect((await eventually(() => resumeCalls(h)[2])).body).toMatchObject({ task_id: "task-write", is_approve: true, human_feedback: "Ship it" });

    // Completion is announced in the channel itself, not only in the thread.
    const notice = await eventually(() => h.slack.messages(CHANNEL).find((m) => !m.thread_ts && /finished/.test(m.text ?? "")));
    const noticeText = JSON.stringify(notice.blocks);
    expect(noticeText).toContain(`<@${USER}>`);
    expect(noticeText).toContain("research");
    const finished = await eventually(async () => {
      const e = await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } });
      return e.completionTs ? e : undefined;
    });
    expect(finished.state).toBe("completed");
    expect(finished.output).toBeTruthy();
    // The announcement shows the final state.
    await eventually(() => JSON.stringify(h.slack.messages(CHANNEL).find((m) => m.ts === execution.threadTs)!.blocks).includes("Completed"));
    expect(h.slack.messages(CHANNEL).filter((m) => !m.thread_ts && /finished/.test(m.text ?? ""))).toHaveLength(1);
    const rounds = await prismaOf(h.bot.database).review.findMany({ orderBy: { createdAt: "asc" } });
    expect(rounds.map((r) => [r.taskKey, r.resumeTaskId, r.round, r.state, r.decidedBy])).toEqual([
      ["research_task", "task-research", 1, "rejected", USER],
      ["research_task", "task-research", 2, "approved", USER],
      ["writing_task", "task-write", 1, "approved", USER],
    ]);
  });

  it("calls /resume once when two people click at the same moment", async () => {
    h = await startHarness();
    await startRunViaSlack(h);
    const review = await pendingReview(h);
    await Promise.all([clickReview(h, review, true, ""), clickReview(h, review, true, "", BOB), clickReview(h, review, true, "")]);
    await eventually(() => h.slack.callsTo("chat.postEphemeral").length === 2);
    await h.settled();
    expect(resumeCalls(h)).toHaveLength(1);
    for (const note of h.slack.callsTo("chat.postEphemeral")) expect(note.args.text).toMatch(/already/);
  });

  it("puts the review back to pending when /resume fails with a 5xx, so it can be decided again", async () => {
    h = await startHarness();
    await startRunViaSlack(h);
    const review = await pendingReview(h);
    h.crew.setOptions({ failWith: [{ endpoint: "resume", status: 500, times: 1, body: { error: "boom" } }] });
    await clickReview(h, review, true, "");
    const note = await eventually(() => h.slack.callsTo("chat.postEphemeral")[0]);
    expect(note.args.text).toMatch(/open again/);
    expect(note.args.text).not.toMatch(/\n\s+at /);
    expect((await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state).toBe("pending");
    await clickReview(h, review, true, "");
    await eventually(async () => (await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state === "approved");
  });

  it("takes over a decision whose process died after claiming it: the review opens again, the thread says so, the next click resumes once", async () => {
    h = await startHarness({ crewline: { watcher: { abandonedDecisionMs: 500, sweepMs: 200 } } });
    await startRunViaSlack(h);
    const review = await pendingReview(h);
    // A replica claimed the decision and died before calling /resume.
    await prismaOf(h.bot.database).review.update({
      where: { id: review.reviewId },
      data: { state: "deciding", decidedBy: USER, decision: "approve", decidedAt: new Date(Date.now() - 10_000) },
    });
    await eventually(async () => (await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state === "pending", {
      what: "the review open again",
    });
    const notice = await eventually(() => h.slack.callsTo("chat.postMessage").find((c) => /was interrupted before it reached the crew/.test(String(c.args.text))));
    expect(notice.args.thread_ts).toBe(review.msg.thread_ts);
    expect(resumeCalls(h)).toHaveLength(0);
    await clickReview(h, review, true, "");
    await eventually(() => resumeCalls(h).length === 1);
    await eventually(async () => (await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state === "approved");
  });

  it("takes over a decision whose process died after the crew took it: recorded as approved, not sent again", async () => {
    h = await startHarness({ crewline: { watcher: { abandonedDecisionMs: 500, sweepMs: 200 } } });
    const execution = await startRunViaSlack(h);
    const review = await pendingReview(h);
    const row = await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } });
    // The dead replica's /resume reached the crew; its answer never came back.
    const sent = await fetch(`${h.crew.url}/resume`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${CREW_TOKEN}` },
      body: JSON.stringify({ execution_id: execution.kickoffId, task_id: row.resumeTaskId ?? row.taskKey, human_feedback: "Approved", is_approve: true }),
    });
    expect(sent.status).toBeLessThan(300);
    await prismaOf(h.bot.database).review.update({
      where: { id: review.reviewId },
      data: { state: "deciding", decidedBy: USER, decision: "approve", decidedAt: new Date(Date.now() - 10_000) },
    });
    await eventually(async () => (await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state === "approved", {
      what: "the decision recorded as taken",
    });
    // The message shows the decision, and the crew was not asked twice.
    await eventually(() => /Approved/.test(h.slack.messages(CHANNEL).find((m) => m.ts === review.msg.ts)?.text ?? ""), { what: "the review shown as approved" });
    await h.settled();
    expect(resumeCalls(h)).toHaveLength(1);
  });

  it("a decision still on its way when the sweep takes it over: its late answer moves nothing, and the review shows the decision that holds it", async () => {
    // Alice's /resume takes 4 s to reach the crew, Bob's 7 s (a slow network; the client's own retries take longer).
    // Alice's must land after the sweep took her claim over (about 2.8 s after her click) and before it
    // takes Bob's (about 3 s after his): measured 1.3 s and 1.8 s to spare (with a 1 s window, 0.9 and 1.2,
    // and a busy PostgreSQL pass once missed).
    const delays = [4000, 7000];
    const crewClient = resumingThrough(async (real, r) => {
      await sleep(delays.shift() ?? 0);
      return real.resume(r);
    });
    // The claim window scaled down below the call's time (the default is above its longest).
    h = await startHarness({ crewline: { crewClient, watcher: { abandonedDecisionMs: 2000, sweepMs: 200 } } });
    await startRunViaSlack(h);
    const review = await pendingReview(h);
    const row = () => prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } });
    await clickReview(h, review, false, "Needs sources", "U0ALICE");
    await eventually(async () => (await row()).state === "deciding", { what: "Alice's claim" });
    // The sweep takes Alice's decision over while her call is on its way, and opens the review again.
    await eventually(async () => (await row()).state === "pending", { what: "the review open again", timeoutMs: 3800 });
    await clickReview(h, review, true, "", BOB);
    await eventually(async () => (await row()).decidedBy === BOB, { what: "Bob's claim" });
    // Alice's reject reaches the crew and is taken; then Bob's approval.
    await eventually(() => resumeCalls(h).length === 2, { what: "both calls at the crew", timeoutMs: 12_000 });
    await eventually(async () => (await row()).state === "approved", { what: "Bob's decision settled", timeoutMs: 10_000 });
    expect(await row()).toMatchObject({ state: "approved", decision: "approve", decidedBy: BOB });
    const audits = await prismaOf(h.bot.database).auditRecord.findMany({ where: { kind: "decision" }, orderBy: { createdAt: "asc" } });
    expect(audits.map((a) => [a.actor, a.decision, (a.detail as { claimTakenOver?: boolean }).claimTakenOver ?? false])).toContainEqual(["U0ALICE", "reject", true]);
    // Alice is told that her decision came late, not left to think it held.
    const told = await eventually(() => h.slack.ephemerals.find((e) => e.user === "U0ALICE" && /reached the crew late/.test(e.text ?? "")), { what: "Alice told" });
    expect(told.text).toMatch(/opened the review again, so the review shows what happened since/);
  }, 30_000);

  it("waits for a decision's /resume longer than the call can take before taking it over as abandoned, and holds a poll's lease longer than its status call", async () => {
    h = await startHarness();
    expect(h.bot.watcher.options.abandonedDecisionMs).toBeGreaterThanOrEqual(CREW_POST_LONGEST_MS);
    expect(h.bot.watcher.options.leaseMs).toBeGreaterThan(CREW_GET_LONGEST_MS);
  });

  it("a newer round of a task closes the review of an earlier one left undecided: its buttons go, and a click on them sends nothing", async () => {
    h = await startHarness();
    const execution = await startRunViaSlack(h);
    const first = await pendingReview(h);
    const row = () => prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: first.reviewId } });
    // The crew ran the task again without this decision (a decision elsewhere, or one whose answer was lost): its new output comes.
    const sent = await fetch(`${h.botUrl}/hooks/${execution.id}/task/${execution.webhookSecret}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: (await row()).taskName, output: "A second version of the brief", kickoff_id: execution.kickoffId }),
    });
    expect(sent.status).toBe(202);
    await eventually(async () => (await row()).state === "closed", { what: "the earlier round closed" });
    const shown = await eventually(() => h.slack.messages(CHANNEL).find((m) => m.ts === first.msg.ts && /ran the task again \(round 2\)/.test(JSON.stringify(m.blocks))), {
      what: "the earlier round shown closed",
    });
    expect(JSON.stringify(shown.blocks)).not.toContain(APPROVE_ACTION);
    // The crew is running again (round 2 is only a task message until the crew waits on it): the run no longer says it waits.
    await eventually(async () => (await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } })).state === "running", {
      what: "the run running again",
    });
    // Its buttons, clicked before the update reached someone's screen, decide nothing.
    await clickReview(h, first, true, "", BOB);
    await eventually(() => h.slack.callsTo("chat.postEphemeral").find((c) => c.args.user === BOB), { what: "Bob told" });
    await h.settled();
    expect(resumeCalls(h)).toHaveLength(0);
  });

  it("shows 'not waiting for review' (400) plainly and closes the review", async () => {
    h = await startHarness();
    await startRunViaSlack(h);
    const review = await pendingReview(h);
    h.crew.setOptions({ failWith: [{ endpoint: "resume", status: 400, times: 1, body: { error: "Bad request", message: "Execution is not in pending human input state" } }] });
    await clickReview(h, review, true, "");
    const note = await eventually(() => h.slack.callsTo("chat.postEphemeral")[0]);
    expect(note.args.text).toMatch(/wasn't waiting/);
    expect((await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state).toBe("closed");
  });

  it("refuses forged and unknown callbacks without side effects, and bad bodies with 4xx", async () => {
    h = await startHarness();
    const execution = await startRunViaSlack(h);
    await pendingReview(h);
    const post = (path: string, body: string, headers: Record<string, string> = { "content-type": "application/json" }) =>
      fetch(`${h.botUrl}${path}`, { method: "POST", body, headers }).then((r) => r.status);
    const task = JSON.stringify({ task_id: "x", name: "forged", output: "pwned", kickoff_id: execution.kickoffId });
    expect(await post(`/hooks/${execution.id}/task/wrong-secret`, task)).toBe(401);
    expect(await post(`/hooks/00000000-0000-4000-8000-000000000000/task/${execution.webhookSecret}`, task)).toBe(404);
    expect(await post(`/hooks/not-a-uuid/task/x`, task)).toBe(404);
    expect(await post(`/hooks/${execution.id}/task/${execution.webhookSecret}/extra`, task)).toBe(404);
    expect(await post(`/hooks/${execution.id}/task/%E0%A4%A`, task)).toBe(404);
    expect(await post(`/hooks/${execution.id}/task/${execution.webhookSecret}`, "{not json")).toBe(400);
    expect(await post(`/hooks/${execution.id}/task/${execution.webhookSecret}`, JSON.stringify({ kickoff_id: execution.kickoffId }))).toBe(400);
    // A body naming another run than its URL is refused (409), whatever else it holds.
    expect(await post(`/hooks/${execution.id}/task/${execution.webhookSecret}`, JSON.stringify({ kickoff_id: "k", name: "x", output: "y" }))).toBe(409);
    expect(await post(`/hooks/${execution.id}/task/${execution.webhookSecret}`, JSON.stringify({ output: "x".repeat(3 * 1024 * 1024) }))).toBe(413);
    await h.settled();
    // The run's own progress may still update; nothing from the refused callbacks reaches Slack.
    expect(h.slack.calls.filter((c) => JSON.stringify(c.args).includes("pwned"))).toHaveLength(0);
    expect(await prismaOf(h.bot.database).review.count({ where: { taskName: "forged" } })).toBe(0);
  });

  it("posts one message for duplicate task and crew deliveries", async () => {
    h = await startHarness({ crew: { tasks: [{ id: "t1", name: "only_task", agent: "Writer", humanInput: false, delayMs: 20 }] } });
    const execution = await startRunViaSlack(h);
    await eventually(() => h.slack.messages(CHANNEL).some((m) => !m.thread_ts && /finished/.test(m.text ?? "")));
    const deliveries = h.crew.webhookDeliveries.filter((d) => d.kind !== "step");
    for (const d of deliveries) {
      const res = await fetch(d.url, { method: "POST", body: JSON.stringify(d.body), headers: { "content-type": "application/json" } });
      // Delivered again after the run ended: refused as gone, the crew callback included.
      expect(res.status).toBe(410);
    }
    await h.settled();
    expect(reviewMessages(h).filter((m) => m.thread_ts === execution.threadTs)).toHaveLength(1);
    expect(h.slack.messages(CHANNEL).filter((m) => !m.thread_ts && /finished/.test(m.text ?? ""))).toHaveLength(1);
  });

  it("shows a long Markdown output as an excerpt with the whole text as a file in the thread", async () => {
    const long = `# Report\n\n${Array.from({ length: 400 }, (_, i) => `- **Finding ${i}**: ${"lorem ipsum ".repeat(6)}`).join("\n")}`;
    h = await startHarness({ crew: { tasks: [{ id: "t1", name: "long_task", agent: "Analyst", humanInput: true, delayMs: 20, output: long }] } });
    const execution = await startRunViaSlack(h);
    const review = await pendingReview(h);
    expect(JSON.stringify(review.msg.blocks)).toMatch(/full text is attached/);
    const file = await eventually(() => h.slack.files.find((f) => f.thread_ts === execution.threadTs));
    expect(file.content).toBe(long);
  });

  it("coalesces a burst of 500 step callbacks into a bounded number of updates showing the last step", async () => {
    h = await startHarness({ crew: { tasks: [{ id: "t1", name: "t", agent: "A", humanInput: true, delayMs: 5000, steps: 0 }] } });
    // Progress as one updated message: the form where Slack refuses streaming.
    h.slack.refuseStreaming("T0TEAM");
    const execution = await startRunViaSlack(h);
    const url = (h.crew.requests.find((r) => r.path === "/kickoff")!.body as any).stepWebhookUrl as string;
    const started = Date.now();
    for (let i = 1; i <= 500; i += 25) {
      await Promise.all(
        Array.from({ length: 25 }, (_, j) =>
          fetch(url, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ thought: `thinking step ${i + j}`, kickoff_id: execution.kickoffId }),
          }),
        ),
      );
    }
    const elapsed = Date.now() - started;
    await eventually(
      () => {
        const progress = h.slack.messages(CHANNEL).find((m) => m.ts === execution.progressTs || /step/.test(m.text ?? ""));
        return progress && JSON.stringify(progress.blocks).includes("thinking step 500") && JSON.stringify(progress.blocks).includes("500 steps");
      },
      { what: "the progress message showing step 500" },
    );
    const progressCalls = h.slack.calls.filter((c) => (c.method === "chat.update" || c.method === "chat.postMessage") && /step/.test(String(c.args.text)));
    // progressIntervalMs is 200 in the harness: at most one call per interval, plus the first and the trailing one.
    expect(progressCalls.length).toBeLessThanOrEqual(Math.ceil(elapsed / 200) + 3);
    expect(progressCalls.length).toBeLessThan(50);
  });
});

describe.runIf(usePostgres)("a run ending while its review is promoted (PostgreSQL)", () => {
  it("the crew's completion arrives while another replica promotes the run's review (its row, then the run's): the review closes, not left decidable on a finished run", async () => {
    h = await startHarness();
    const execution = await startRunViaSlack(h);
    const review = await pendingReview(h);
    const db = new pg.Client({ connectionString: h.db.url! });
    const other = new pg.Client({ connectionString: h.db.url! });
    await Promise.all([db.connect(), other.connect()]);
    const crewHook = h.crew.webhookDeliveries.find((d) => d.url.includes(`/${execution.id}/task/`))!.url.replace("/task/", "/crew/");
    try {
      // A task message not yet decidable, promoted by another replica (usecases/reviews.ts promote):
      // in one transaction, the review's row, then the run's.
      await db.query(`UPDATE "Review" SET state = 'posted' WHERE id = $1`, [review.reviewId]);
      await other.query("BEGIN");
      await other.query(`UPDATE "Review" SET state = 'pending' WHERE id = $1 AND state = 'posted'`, [review.reviewId]);
      const answered = fetch(crewHook, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ kickoff_id: execution.kickoffId, result: "done" }),
      });
      expect((await answered).status).toBe(202);
      // Ending the run waits for the review's row (before, it ended the run and passed the review by).
      await eventually(
        async () =>
          (await db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows[0].n > 0 ||
          (await db.query(`SELECT state FROM "Execution" WHERE id = $1`, [execution.id])).rows[0].state === "completed",
        { what: "the run's end waiting for the review's row, or done" },
      );
      await other.query(`UPDATE "Execution" SET state = 'waiting' WHERE id = $1 AND state IN ('starting', 'running', 'waiting')`, [execution.id]);
      await other.query("COMMIT");
    } finally {
      await Promise.all([db.end(), other.end()]);
    }
    await eventually(async () => (await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } })).state === "completed", { what: "the run's end" });
    await h.settled();
    expect((await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state).toBe("closed");
  });
});
