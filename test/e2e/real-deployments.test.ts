// Real deployments (field notes, first section): a task webhook after every task, a separate
// human-input webhook for the task the crew waits on, status at /status/{id}. Crewline asks for a
// decision only when the crew waits for one, and stays correct against the seed interface.
import { afterEach, describe, expect, it } from "vitest";
import { APPROVE_ACTION } from "../../src/adapters/slack/blocks/index.js";
import type { SimTask } from "../../src/sim/crew-service.js";
import { CHANNEL, eventually, type Harness, startHarness } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { clickReview, pendingReview, resumeCalls, startRunViaSlack } from "../support/reviews.js";

let h: Harness;
afterEach(async () => h?.close());

const AUTO_HUMAN_AUTO: SimTask[] = [
  { id: "t-gather", name: "gather_task", agent: "Gatherer", delayMs: 20, steps: 1 },
  { id: "t-review", name: "draft_task", agent: "Writer", humanInput: true, delayMs: 20, steps: 1 },
  { id: "t-polish", name: "polish_task", agent: "Editor", delayMs: 20, steps: 1 },
];

/** Thread messages that are reviews (asking for a decision, or showing one), as Slack shows them now. */
const reviewMessages = (h: Harness) => h.slack.messages(CHANNEL).filter((m) => m.thread_ts && /^(📝 Review needed|Approved:|Rejected:|No decision needed)/.test(m.text ?? ""));

/** Posts of a task's output in the thread (a task message or a review), not the progress message. */
const taskPosts = (h: Harness, name: string) =>
  h.slack
    .callsTo("chat.postMessage")
    .filter((c) => c.args.thread_ts && /^(✔️ Task finished|📝 Review needed)/.test(String(c.args.text ?? "")) && JSON.stringify(c.args.blocks ?? []).includes(name));

const completionNotices = (h: Harness) => h.slack.messages(CHANNEL).filter((m) => !m.thread_ts && /finished/.test(m.text ?? ""));

describe.each(["deployed", "seed"] as const)("a crew of automatic, human and automatic tasks (%s simulator)", (mode) => {
  it("posts every task in the thread, asks for exactly one decision, resumes it once and announces the end once", async () => {
    h = await startHarness({ crew: { mode, tasks: AUTO_HUMAN_AUTO } });
    const execution = await startRunViaSlack(h);

    const review = await pendingReview(h, { containing: "draft_task", timeoutMs: 15_000 });
    expect(review.msg.thread_ts).toBe(execution.threadTs);
    // The automatic task before it is in the thread, without controls.
    const gather = taskPosts(h, "gather_task");
    expect(gather).toHaveLength(1);
    expect(JSON.stringify(gather[0]!.args.blocks)).not.toContain(APPROVE_ACTION);
    // The review is the task's own message, turned into a review in place (or posted as one): one message.
    expect(taskPosts(h, "draft_task")).toHaveLength(1);

    await clickReview(h, review, true, "Ship it");
    await eventually(() => completionNotices(h).length === 1 || undefined, { what: "the completion notice", timeoutMs: 15_000 });
    await h.settled();

    expect(taskPosts(h, "polish_task")).toHaveLength(1);
    expect(JSON.stringify(taskPosts(h, "polish_task")[0]!.args.blocks)).not.toContain(APPROVE_ACTION);
    expect(reviewMessages(h)).toHaveLength(1);
    expect(
      h.slack.callsTo("chat.postMessage").filter((c) => /gather_task|polish_task/.test(JSON.stringify(c.args.blocks)) && JSON.stringify(c.args.blocks).includes(APPROVE_ACTION)),
    ).toHaveLength(0);
    expect(completionNotices(h)).toHaveLength(1);

    // One /resume, taken by the crew (no "not waiting" 400), with the task id the crew named.
    expect(resumeCalls(h)).toHaveLength(1);
    const resume = resumeCalls(h)[0]!.body as Record<string, any>;
    expect(resume).toMatchObject({ execution_id: execution.kickoffId, task_id: "t-review", is_approve: true, human_feedback: "Ship it" });
    const reviews = await prismaOf(h.bot.database).review.findMany({ where: { executionId: execution.id }, orderBy: { createdAt: "asc" } });
    expect(reviews.map((r) => [r.taskName, r.state])).toEqual([
      ["gather_task", "posted"],
      ["draft_task", "approved"],
      ["polish_task", "posted"],
    ]);
    expect(reviews[1]!.resumeStatus).toBe("resumed");

    // Every webhook setting goes again with the resume (the service carries none over).
    const kickoff = h.crew.requests.find((r) => r.path === "/kickoff")!.body as Record<string, any>;
    for (const field of ["taskWebhookUrl", "stepWebhookUrl", "crewWebhookUrl", "humanInputWebhook"]) {
      expect(kickoff[field]).toBeTruthy();
      expect(resume[field]).toEqual(kickoff[field]);
    }
    expect(kickoff.humanInputWebhook).toMatchObject({ authentication: { strategy: "bearer" } });
    expect(kickoff.humanInputWebhook.authentication.token).toMatch(/^[A-Za-z0-9_-]{40,}$/);
    expect(kickoff.humanInputWebhook.url).toContain(`/hooks/${execution.id}/input/`);
    expect(kickoff.inputs).not.toHaveProperty("id");
  });
});

describe("the human-input webhook", () => {
  /** A run whose only task takes long enough that the test sends the callbacks itself (so settled() leaves its crew run out). */
  async function quietRun() {
    h = await startHarness({ crew: { tasks: [{ id: "t-slow", name: "slow_task", agent: "Thinker", humanInput: true, delayMs: 60_000, steps: 0 }] } });
    const execution = await startRunViaSlack(h);
    const kickoff = h.crew.requests.find((r) => r.path === "/kickoff")!.body as Record<string, any>;
    const post = (url: string, body: unknown, authorization?: string) =>
      fetch(url, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) } }).then(
        (r) => r.status,
      );
    const bearer = `Bearer ${kickoff.humanInputWebhook.authentication.token}`;
    return { execution, kickoff, post, bearer };
  }

  const output = "## Draft\n\nThe piece the crew wants a person to look at.";
  const taskBody = (kickoffId: string) => ({ name: "slow_task", agent: "Thinker", output, kickoff_id: kickoffId });
  const inputBody = (kickoffId: string) => ({ execution_id: kickoffId, task_id: "t-slow-uuid", name: "slow_task", task_output: output });

  async function expectOneReview(executionId: string) {
    const review = await pendingReview(h, { containing: "slow_task", timeoutMs: 10_000 });
    await h.settled({ crewRuns: false });
    expect(taskPosts(h, "slow_task")).toHaveLength(1);
    expect(reviewMessages(h)).toHaveLength(1);
    expect(reviewMessages(h)[0]!.ts).toBe(review.msg.ts);
    const rows = await prismaOf(h.bot.database).review.findMany({ where: { executionId } });
    expect(rows.map((r) => [r.state, r.resumeTaskId])).toEqual([["pending", "t-slow-uuid"]]);
    return review;
  }

  it("before its task webhook: one review, and the decision resumes the task id the request named", async () => {
    const { execution, kickoff, post, bearer } = await quietRun();
    expect(await post(kickoff.humanInputWebhook.url, inputBody(execution.kickoffId!), bearer)).toBe(202);
    expect(await post(kickoff.taskWebhookUrl, taskBody(execution.kickoffId!))).toBe(202);
    const review = await expectOneReview(execution.id);
    // The same request again changes nothing.
    expect(await post(kickoff.humanInputWebhook.url, inputBody(execution.kickoffId!), bearer)).toBeLessThan(300);
    await clickReview(h, review, false, "More detail");
    const resume = await eventually(() => resumeCalls(h)[0]);
    expect(resume.body).toMatchObject({ task_id: "t-slow-uuid", is_approve: false });
  });

  it("after its task webhook: the task message becomes the review in place", async () => {
    const { execution, kickoff, post, bearer } = await quietRun();
    expect(await post(kickoff.taskWebhookUrl, taskBody(execution.kickoffId!))).toBe(202);
    const plain = await eventually(() => taskPosts(h, "slow_task")[0], { what: "the task message" });
    expect(JSON.stringify(plain.args.blocks)).not.toContain(APPROVE_ACTION);
    // The scheme in lower case, as HTTP allows any case for it.
    expect(await post(kickoff.humanInputWebhook.url, inputBody(execution.kickoffId!), bearer.replace("Bearer ", "bearer "))).toBe(202);
    const review = await expectOneReview(execution.id);
    // The same message, now with its controls.
    expect(h.slack.callsTo("chat.update").some((c) => c.args.ts === review.msg.ts && JSON.stringify(c.args.blocks).includes(APPROVE_ACTION))).toBe(true);
  });

  it("refuses a wrong, missing or malformed authorization, a wrong URL secret and an unknown run, with no effect", async () => {
    const { execution, kickoff, post, bearer } = await quietRun();
    const body = inputBody(execution.kickoffId!);
    const url: string = kickoff.humanInputWebhook.url;
    expect(await post(url, body)).toBe(401);
    expect(await post(url, body, "Bearer wrong-token")).toBe(401);
    expect(await post(url, body, bearer.replace("Bearer ", "Basic "))).toBe(401);
    expect(await post(url, body, `${bearer}x`)).toBe(401);
    expect(await post(url.replace(/input\/[^/]+$/, "input/not-the-secret"), body, bearer)).toBe(401);
    expect(await post(url.replace(execution.id, "00000000-0000-4000-8000-000000000000"), body, bearer)).toBe(404);
    // Right credentials, but nothing to review: a clear 400.
    expect(await post(url, { execution_id: execution.kickoffId, task_id: "t" }, bearer)).toBe(400);
    await h.settled({ crewRuns: false });
    expect(taskPosts(h, "slow_task")).toHaveLength(0);
    expect(await prismaOf(h.bot.database).review.count()).toBe(0);
    expect(await prismaOf(h.bot.database).webhookEvent.count({ where: { kind: "input" } })).toBe(0);
  });
});

describe("the event stream (opt-in per crew)", () => {
  const eventBatches = (h: Harness) => h.crew.webhookDeliveries.filter((d) => d.kind === "events");

  it("a crew that sends only its event stream shows progress, its review and its completion, each once", async () => {
    h = await startHarness({ research: { eventStream: true }, crew: { tasks: AUTO_HUMAN_AUTO, eventStream: { only: true, chaos: true } } });
    // Progress as one updated message: the form where Slack refuses streaming (test/e2e/live-plan.test.ts has the plan).
    h.slack.refuseStreaming("T0TEAM");
    const execution = await startRunViaSlack(h);
    const kickoff = h.crew.requests.find((r) => r.path === "/kickoff")!.body as Record<string, any>;
    expect(kickoff.webhooks).toMatchObject({ realtime: false, url: expect.stringContaining(`/hooks/${execution.id}/events/`), authentication: { strategy: "bearer" } });
    expect(kickoff.webhooks.events).toEqual(expect.arrayContaining(["task_completed", "crew_kickoff_completed", "crew_kickoff_failed", "tool_usage_started"]));

    const review = await pendingReview(h, { containing: "draft_task", timeoutMs: 15_000 });
    // Progress came from tool and LLM events: one progress message in the thread (posted after the
    // review, if need be: a review goes before progress).
    const progress = () => h.slack.callsTo("chat.postMessage").filter((c) => c.args.thread_ts && /^(Working|Finished):/.test(String(c.args.text ?? "")));
    await eventually(() => progress().length > 0, { what: "the progress message" });
    await clickReview(h, review, true);
    await eventually(() => completionNotices(h).length === 1 || undefined, { what: "the completion notice", timeoutMs: 15_000 });
    const resume = resumeCalls(h)[0]!.body as Record<string, any>;
    expect(resume.webhooks).toEqual(kickoff.webhooks);
    // Only the stream was sent, and every batch was accepted.
    expect(new Set(h.crew.webhookDeliveries.map((d) => d.kind))).toEqual(new Set(["events"]));
    expect(eventBatches(h).every((d) => d.status !== undefined && d.status < 300)).toBe(true);

    // Duplicated and reordered batches change nothing: one effect per event (after the run ended, they are refused as gone).
    // Task messages go after the completion notice when Slack is short (progress is last), so count once all is done.
    await h.settled();
    const events = await prismaOf(h.bot.database).webhookEvent.count({ where: { executionId: execution.id } });
    const calls = h.slack.calls.filter((c) => c.method === "chat.postMessage").length;
    for (const batch of [...eventBatches(h)].reverse()) {
      const res = await fetch(batch.url, {
        method: "POST",
        body: JSON.stringify(batch.body),
        headers: { "content-type": "application/json", authorization: `Bearer ${kickoff.webhooks.authentication.token}` },
      });
      expect(res.status).toBe(410);
    }
    await h.settled();
    expect(progress()).toHaveLength(1);
    expect(await prismaOf(h.bot.database).webhookEvent.count({ where: { executionId: execution.id } })).toBe(events);
    expect(h.slack.calls.filter((c) => c.method === "chat.postMessage").length).toBe(calls);
    expect(completionNotices(h)).toHaveLength(1);
    // Reordered batches may record the tasks in another order; each task has one row in its final state.
    const reviews = await prismaOf(h.bot.database).review.findMany({ where: { executionId: execution.id } });
    expect(Object.fromEntries(reviews.map((r) => [r.taskName, r.state]))).toEqual({ gather_task: "posted", draft_task: "approved", polish_task: "posted" });
    expect(reviews).toHaveLength(3);
  });

  it("task and crew events and callbacks describing the same thing have one effect, whichever comes first", async () => {
    h = await startHarness({ research: { eventStream: true }, crew: { tasks: AUTO_HUMAN_AUTO, eventStream: { chaos: true } } });
    const execution = await startRunViaSlack(h);
    await clickReview(h, await pendingReview(h, { containing: "draft_task", timeoutMs: 15_000 }), true);
    await eventually(() => completionNotices(h).length === 1 || undefined, { what: "the completion notice", timeoutMs: 15_000 });
    await h.settled();
    expect(eventBatches(h).length).toBeGreaterThan(0);
    for (const name of ["gather_task", "draft_task", "polish_task"]) expect(taskPosts(h, name)).toHaveLength(1);
    expect(completionNotices(h)).toHaveLength(1);
    expect(await prismaOf(h.bot.database).review.count({ where: { executionId: execution.id } })).toBe(3);
  });

  it("refuses event batches without the right token or URL, and malformed ones, with no effect", async () => {
    h = await startHarness({ research: { eventStream: true }, crew: { tasks: [{ id: "t", name: "slow_task", agent: "A", delayMs: 60_000, steps: 0 }] } });
    const execution = await startRunViaSlack(h);
    const kickoff = h.crew.requests.find((r) => r.path === "/kickoff")!.body as Record<string, any>;
    const batch = { events: [{ id: "e1", execution_id: execution.kickoffId, timestamp: new Date().toISOString(), type: "crew_kickoff_completed", data: { output: "forged" } }] };
    const post = (url: string, body: unknown, authorization?: string) =>
      fetch(url, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) } }).then(
        (r) => r.status,
      );
    const token = `Bearer ${kickoff.webhooks.authentication.token}`;
    expect(await post(kickoff.webhooks.url, batch)).toBe(401);
    expect(await post(kickoff.webhooks.url, batch, "Bearer nope")).toBe(401);
    expect(await post(kickoff.webhooks.url.replace(/events\/[^/]+$/, "events/wrong"), batch, token)).toBe(401);
    expect(await post(kickoff.webhooks.url, { events: "nope" }, token)).toBe(400);
    expect(await post(kickoff.webhooks.url, { events: [{ id: "x", type: "something_new", data: {} }] }, token)).toBe(200);
    // The crew's one task runs for a minute on purpose: only its webhooks under way would count.
    await h.settled({ crewRuns: false });
    expect(h.slack.messages(CHANNEL).some((m) => JSON.stringify(m).includes("forged"))).toBe(false);
    expect((await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } })).state).toBe("running");
  });
});

describe("a lost message update", () => {
  it("when the update that adds the controls fails, the recovery sweep shows the review anyway (once, in place)", async () => {
    h = await startHarness({
      crew: { tasks: [{ id: "t-1", name: "draft_task", agent: "Writer", humanInput: true, delayMs: 20, steps: 0 }] },
      crewline: { watcher: { sweepMs: 300, tickMs: 100 } },
    });
    h.slack.failNext("chat.update", "message_not_found", 3);
    const execution = await startRunViaSlack(h);
    const review = await pendingReview(h, { containing: "draft_task", timeoutMs: 15_000 });
    expect(h.slack.callsTo("chat.update").filter((c) => c.error === "message_not_found").length).toBeGreaterThan(0);
    expect(taskPosts(h, "draft_task")).toHaveLength(1);
    // The update's result is recorded just after Slack shows it.
    await eventually(async () => (await prismaOf(h.bot.database).review.findFirstOrThrow({ where: { executionId: execution.id } })).shownState === "pending", {
      what: "shownState recorded",
    });
    const row = await prismaOf(h.bot.database).review.findFirstOrThrow({ where: { executionId: execution.id } });
    expect(row).toMatchObject({ state: "pending", shownState: "pending", messageTs: review.msg.ts });
  });
});
