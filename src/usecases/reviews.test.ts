// The decision path without Slack or HTTP: a real database, the crew and Slack as in-memory ports.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { prismaOf } from "../../test/support/prisma.js";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { silentLogger } from "../log/log.js";
import { DurableOutbox } from "../outbox/index.js";
import { slackEffectPerformer } from "../outbox/perform.js";
import { OutboxWorker } from "../outbox/worker.js";
import { CrewError } from "../protocols/crew/errors.js";
import type { CrewApi, ExecutionStatus, ResumeRequest } from "../protocols/crew/types.js";
import { Lifecycle } from "./lifecycle.js";
import { type CrewDirectory, type Execution, type Review, type RunNotifier, systemClock } from "./ports.js";

const OUTPUT = "## Findings\n\nThe tide rises.";

function timedOutResume(): never {
  throw new CrewError({ kind: "timeout", crewName: "research", operation: "resume", maybeApplied: true });
}

let db: TestDatabase;
let status: ExecutionStatus;
let resumes: ResumeRequest[];
let updates: { review: Review; note?: string }[];
/** Happens while a /resume is under way (before its answer is lost). */
let duringResume: (() => Promise<unknown>) | undefined;

const crew: CrewApi = {
  listInputs: async () => [],
  kickoff: async () => ({ kickoffId: "k-1" }),
  status: async () => status,
  resume: async (req) => {
    resumes.push(req);
    await duringResume?.();
    return timedOutResume();
  },
};
const notifier: RunNotifier = {
  postReview: async () => ({ ts: "100.1" }),
  attachReviewFile: async () => {},
  attachRoundDiff: async () => {},
  attachEditedOutput: async () => {},
  updateReview: async (_e, review, note) => void updates.push({ review, note }),
  postCompletion: async () => ({ ts: "100.9" }),
  attachCompletionFile: async () => {},
  updateAnnouncement: async () => {},
  showProgress: async (_e, _p, ts) => ({ ts: ts ?? "100.5" }),
  postReminder: async () => {},
  findPosted: async () => undefined,
  postThreadNotice: async () => {},
  reviewFiles: () => ({ output: false, diff: false }),
  editNeedsFile: () => false,
  completionNeedsFile: () => false,
  postDeadlineNotice: async () => {},
};

/** The lifecycle with its outbox; `effects()` performs every Slack effect due (through the in-memory notifier). */
function lifecycleWith(crews: CrewDirectory, required = 1): { lifecycle: Lifecycle; effects: () => Promise<void> } {
  const sql = db.database.sql;
  const outbox = new DurableOutbox(sql, systemClock);
  const worker = new OutboxWorker({ db: sql, perform: slackEffectPerformer({ sql, notifier }), log: silentLogger, clock: systemClock, options: { replicaId: "test" } });
  const lifecycle = new Lifecycle({
    db: db.database.sql,
    crews,
    outbox,
    webhookUrls: () => undefined,
    log: silentLogger,
    approvalPolicy: () => ({ required, selfApproval: true }),
  });
  return {
    lifecycle,
    effects: async () => {
      while ((await worker.runDue()) > 0);
    },
  };
}

async function pendingReview(lifecycle: Lifecycle): Promise<{ execution: Execution; review: Review }> {
  const created = await lifecycle.runs.create({ crewName: "research", teamId: "T", channelId: "C", userId: "U1", inputs: { topic: "tides" }, webhooks: false });
  await lifecycle.runs.setThread(created.id, "100.0");
  const execution = await lifecycle.runs.kickedOff(created.id, "k-1");
  const review = await lifecycle.reviews.awaitDecision(execution, { taskKey: "t1", name: "research_task", agent: "Analyst", output: OUTPUT }, { source: "input" });
  return { execution, review: review! };
}

describe("a decision whose /resume answer timed out", () => {
  let lifecycle: Lifecycle;
  let effects: () => Promise<void>;
  beforeEach(async () => {
    db = await createTestDatabase();
    resumes = [];
    updates = [];
    ({ lifecycle, effects } = lifecycleWith({ get: () => crew }));
  });
  afterEach(async () => db.drop());

  it("counts as decided when the crew's status shows it moved on, and is not sent again", async () => {
    const { review } = await pendingReview(lifecycle);
    await effects();
    status = { rawState: "RUNNING", phase: "running" };
    const outcome = await lifecycle.reviews.decide({ reviewId: review.id, userId: "U2", approve: true, feedback: "" });
    await effects();
    expect(outcome.kind).toBe("decided");
    expect(resumes).toHaveLength(1);
    const stored = await prismaOf(db.database).review.findUniqueOrThrow({ where: { id: review.id } });
    expect(stored).toMatchObject({ state: "approved", decidedBy: "U2" });
    expect(updates.at(-1)!.note).toMatch(/timed out, but its status shows it took the decision/);
    // A second click finds it decided: the crew hears nothing more.
    const again = await lifecycle.reviews.decide({ reviewId: review.id, userId: "U3", approve: true, feedback: "" });
    expect(again.kind).toBe("already_decided");
    expect(resumes).toHaveLength(1);
  });

  it("closes, saying nothing was known to be taken, when the run was stopped while the answer was lost (a stopped crew is not paused)", async () => {
    const { execution, review } = await pendingReview(lifecycle);
    status = { rawState: "CANCELLED", phase: "failed" };
    duringResume = () => lifecycle.runs.transition(execution.id, "stopped", { stoppedBy: "U9", finishedAt: new Date() });
    try {
      const outcome = await lifecycle.reviews.decide({ reviewId: review.id, userId: "U2", approve: true, feedback: "" });
      expect(outcome).toMatchObject({ kind: "not_waiting", message: "The run was stopped before the crew was known to take the decision." });
    } finally {
      duringResume = undefined;
    }
    const stored = await prismaOf(db.database).review.findUniqueOrThrow({ where: { id: review.id } });
    expect(stored.state).toBe("closed");
    expect(stored.resumeMessage ?? "").not.toMatch(/took the decision/);
  });

  it("opens the review again when the run is still paused on the same output", async () => {
    const { review } = await pendingReview(lifecycle);
    status = { rawState: "PAUSED", phase: "paused", lastTask: { output: OUTPUT } };
    const outcome = await lifecycle.reviews.decide({ reviewId: review.id, userId: "U2", approve: false, feedback: "More sources" });
    expect(outcome.kind).toBe("resume_failed");
    if (outcome.kind === "resume_failed") expect(outcome.message).toMatch(/check the thread/i);
    expect((await prismaOf(db.database).review.findUniqueOrThrow({ where: { id: review.id } })).state).toBe("pending");
  });
});

describe("confirming a pause from the status after a task webhook", () => {
  let lifecycle: Lifecycle;
  let effects: () => Promise<void>;
  let statusCalls: number;
  let onStatus: (() => Promise<void>) | undefined;
  beforeEach(async () => {
    db = await createTestDatabase();
    statusCalls = 0;
    onStatus = undefined;
    updates = [];
    const counting: CrewApi = {
      ...crew,
      status: async () => {
        statusCalls++;
        await onStatus?.();
        return status;
      },
    };
    ({ lifecycle, effects } = lifecycleWith({ get: () => counting }));
  });
  afterEach(async () => db.drop());

  async function taskMessage(crewName = "research") {
    const created = await lifecycle.runs.create({ crewName, teamId: "T", channelId: "C", userId: "U1", inputs: {}, webhooks: true });
    await lifecycle.runs.setThread(created.id, "100.0");
    const execution = await lifecycle.runs.kickedOff(created.id, `k-${created.id}`);
    const review = await lifecycle.reviews.open(execution, { taskKey: "draft", name: "draft", output: `${OUTPUT} ${created.id}` });
    return { execution, review: review! };
  }

  it("turns the task message into the review when the status says the run waits on it", async () => {
    const { execution, review } = await taskMessage();
    await effects(); // the task message is in Slack
    status = { rawState: "PENDING_HUMAN_INPUT", phase: "paused", lastTask: { output: review.output, taskId: "t-9" } };
    await lifecycle.reviews.confirmWaiting(execution, review, [0]);
    expect(await prismaOf(db.database).review.findUniqueOrThrow({ where: { id: review.id } })).toMatchObject({ state: "pending", resumeTaskId: "t-9" });
    // The task message gets its decision controls in place.
    await effects();
    expect(updates.at(-1)!.review).toMatchObject({ id: review.id, state: "pending" });
    expect(statusCalls).toBe(1);
  });

  it("stops asking once the review got its controls another way (a status poll)", async () => {
    const { execution, review } = await taskMessage();
    status = { rawState: "RUNNING", phase: "running" };
    // While the first answer is on its way, the watcher's poll promotes the review.
    onStatus = async () => {
      onStatus = undefined;
      await lifecycle.reviews.awaitDecision(execution, { taskKey: "draft", name: "draft", output: review.output }, { source: "poll", observedAt: new Date() });
    };
    await lifecycle.reviews.confirmWaiting(execution, review, [0, 0, 0, 0]);
    expect(statusCalls).toBe(1);
    expect((await prismaOf(db.database).review.findUniqueOrThrow({ where: { id: review.id } })).state).toBe("pending");
  });

  it("asks only about a run's latest task: the next task's webhook means the crew did not wait on the one before", async () => {
    const { execution, review } = await taskMessage();
    const next = (await lifecycle.reviews.open(execution, { taskKey: "edit", name: "edit", output: `edited ${review.output}` }))!;
    status = { rawState: "PENDING_HUMAN_INPUT", phase: "paused", lastTask: { output: next.output } };
    const earlier = lifecycle.reviews.confirmWaiting(execution, review, [0, 0, 0, 0]);
    await lifecycle.reviews.confirmWaiting(execution, next, [0]);
    await earlier;
    expect(statusCalls).toBe(1);
    const states = await prismaOf(db.database).review.findMany({ where: { executionId: execution.id }, orderBy: { createdAt: "asc" } });
    expect(states.map((r) => [r.taskKey, r.state])).toEqual([
      ["draft", "posted"],
      ["edit", "pending"],
    ]);
  });

  it("asks nothing for a crew that sends human-input requests (it says itself when it waits)", async () => {
    const first = await taskMessage();
    await lifecycle.reviews.awaitDecision(first.execution, { taskKey: "draft", name: "draft", output: first.review.output }, { source: "input" });
    const { execution, review } = await taskMessage();
    status = { rawState: "RUNNING", phase: "running" };
    await lifecycle.reviews.confirmWaiting(execution, review, [0, 0, 0]);
    expect(statusCalls).toBe(0);
    expect((await prismaOf(db.database).review.findUniqueOrThrow({ where: { id: review.id } })).state).toBe("posted");
  });
});

describe("an approval while more are needed", () => {
  let lifecycle: Lifecycle;
  beforeEach(async () => {
    db = await createTestDatabase();
    resumes = [];
    updates = [];
    ({ lifecycle } = lifecycleWith({ get: () => crew }, 3));
  });
  afterEach(async () => db.drop());

  it("is stored with its audit record and the message update in one transaction, or not at all", async () => {
    const { review } = await pendingReview(lifecycle);
    const prisma = prismaOf(db.database);
    const shows = () => prisma.slackEffect.count({ where: { kind: "review.show", subjectId: review.id } });
    expect(await lifecycle.reviews.decide({ reviewId: review.id, userId: "U2", approve: true, feedback: "fine" })).toMatchObject({
      kind: "approval_recorded",
      approvals: 1,
      required: 3,
    });
    expect(await prisma.reviewApproval.count({ where: { reviewId: review.id } })).toBe(1);
    expect(await prisma.auditRecord.findMany({ where: { kind: "approval" } })).toEqual([expect.objectContaining({ actor: "U2", feedback: "fine" })]);
    expect(await shows()).toBe(1);

    // The audit write fails: the approval is not stored either, and nothing is shown.
    const record = vi.spyOn(lifecycle.audit, "record").mockRejectedValueOnce(new Error("audit write failed"));
    await expect(lifecycle.reviews.decide({ reviewId: review.id, userId: "U3", approve: true, feedback: "" })).rejects.toThrow(/audit write failed/);
    record.mockRestore();
    expect((await prisma.reviewApproval.findMany({ where: { reviewId: review.id } })).map((a) => a.userId)).toEqual(["U2"]);
    expect(await prisma.auditRecord.count({ where: { kind: "approval" } })).toBe(1);
    expect(await shows()).toBe(1);
    expect(resumes).toHaveLength(0);
  });
});

describe("a decision the crew took whose outcome could not be stored", () => {
  let lifecycle: Lifecycle;
  let effects: () => Promise<void>;
  beforeEach(async () => {
    db = await createTestDatabase();
    resumes = [];
    updates = [];
    const taking: CrewApi = {
      ...crew,
      resume: async (req) => {
        resumes.push(req);
        return { status: "resumed" };
      },
    };
    ({ lifecycle, effects } = lifecycleWith({ get: () => taking }));
  });
  afterEach(async () => db.drop());

  it("stays claimed, is not sent again, and is recorded as taken once its claim is recovered", async () => {
    const { review } = await pendingReview(lifecycle);
    const prisma = prismaOf(db.database);
    // The settle transaction fails after /resume answered (its audit write, as a dropped connection would).
    const record = vi.spyOn(lifecycle.audit, "record").mockRejectedValueOnce(new Error("connection lost"));
    const outcome = await lifecycle.reviews.decide({ reviewId: review.id, userId: "U2", approve: true, feedback: "" });
    record.mockRestore();
    expect(outcome.kind).toBe("unrecorded");
    expect(resumes).toHaveLength(1);
    expect(await prisma.review.findUniqueOrThrow({ where: { id: review.id } })).toMatchObject({ state: "deciding", decidedBy: "U2" });

    // Another click meanwhile hears it is under way: the crew is not asked twice.
    expect((await lifecycle.reviews.decide({ reviewId: review.id, userId: "U3", approve: false, feedback: "No" })).kind).toBe("already_decided");
    expect(resumes).toHaveLength(1);

    // Recovery finds the crew moved on: the decision is recorded as taken, still without a second /resume.
    status = { rawState: "RUNNING", phase: "running" };
    expect(await lifecycle.reviews.recoverAbandoned(0)).toBe(1);
    await effects();
    expect(await prisma.review.findUniqueOrThrow({ where: { id: review.id } })).toMatchObject({ state: "approved", decidedBy: "U2" });
    expect(resumes).toHaveLength(1);
  });
});

describe("reviews opening while their run changes", () => {
  let lifecycle: Lifecycle;
  beforeEach(async () => {
    db = await createTestDatabase();
    resumes = [];
    updates = [];
    ({ lifecycle } = lifecycleWith({ get: () => crew }));
  });
  afterEach(async () => db.drop());

  /** A run the crew has started, as a callback's record still shows it (live). */
  async function liveRun(i = 0) {
    const created = await lifecycle.runs.create({ crewName: "research", teamId: "T", channelId: "C", userId: "U1", inputs: {}, webhooks: true });
    await lifecycle.runs.setThread(created.id, `10${i}.0`);
    return lifecycle.runs.kickedOff(created.id, `k-${i}`);
  }

  it("a task output recorded just before its run was stopped opens no review, though its callback still saw the run live", async () => {
    const live = await liveRun();
    // The stop commits between the callback's record (it saw the run live) and its processing.
    await lifecycle.runs.transition(live.id, "stopped", { stoppedBy: "U2", finishedAt: new Date() });
    const prisma = prismaOf(db.database);

    expect(await lifecycle.reviews.open(live, { taskKey: "draft", name: "draft", output: OUTPUT })).toBeUndefined();
    expect(await lifecycle.reviews.awaitDecision(live, { taskKey: "draft", name: "draft", output: OUTPUT }, { source: "input" })).toBeUndefined();
    expect(await prisma.review.count({ where: { executionId: live.id } })).toBe(0);
    expect(await prisma.slackEffect.count({ where: { kind: "review.post" } })).toBe(0);
  });

  it("a task message of a run stopped meanwhile is not made a review by the crew's late request: it stays a finished task", async () => {
    const live = await liveRun();
    const posted = await lifecycle.reviews.open(live, { taskKey: "draft", name: "draft", output: OUTPUT });
    expect(posted?.state).toBe("posted");
    await lifecycle.runs.transition(live.id, "stopped", { stoppedBy: "U2", finishedAt: new Date() });
    const prisma = prismaOf(db.database);
    const effects = await prisma.slackEffect.count();

    // The crew's human-input request for that output, processed after the stop (its callback saw the run live).
    expect(await lifecycle.reviews.awaitDecision(live, { taskKey: "draft", name: "draft", output: OUTPUT }, { source: "input" })).toBeUndefined();
    expect((await prisma.review.findUniqueOrThrow({ where: { id: posted!.id } })).state).toBe("posted");
    expect((await prisma.execution.findUniqueOrThrow({ where: { id: live.id } })).state).toBe("stopped");
    expect(await prisma.slackEffect.count()).toBe(effects);
  });

  it("two reviews of one run opening at once both open (on PostgreSQL they run side by side, and neither deadlocks the other)", async () => {
    for (let i = 0; i < 5; i++) {
      const live = await liveRun(i);
      // Tasks awaited in parallel: two human-input requests for two tasks of the run.
      const opened = await Promise.all(
        ["draft", "facts"].map((name) => lifecycle.reviews.awaitDecision(live, { taskKey: name, name, output: `${OUTPUT} ${name}` }, { source: "input" })),
      );
      expect(opened.map((r) => r?.state)).toEqual(["pending", "pending"]);
    }
  });
});

describe("a run with two reviews waiting at once", () => {
  let lifecycle: Lifecycle;
  /** Tasks the crew no longer waits on: a resume naming one is refused with a 400. */
  let moved: string[] = [];
  const resuming: CrewApi = {
    ...crew,
    resume: async (req) => {
      resumes.push(req);
      if (moved.includes(req.taskId ?? ""))
        throw new CrewError({ kind: "bad_request", crewName: "research", operation: "resume", status: 400, serviceMessage: "Execution is not in pending human input state" });
      return { status: "resumed" };
    },
  };
  beforeEach(async () => {
    db = await createTestDatabase();
    resumes = [];
    updates = [];
    moved = [];
    ({ lifecycle } = lifecycleWith({ get: () => resuming }));
  });
  afterEach(async () => db.drop());

  /** A run whose crew waits on two tasks at once, with their reviews. */
  async function twoWaiting() {
    const created = await lifecycle.runs.create({ crewName: "research", teamId: "T", channelId: "C", userId: "U1", inputs: {}, webhooks: true });
    await lifecycle.runs.setThread(created.id, "100.0");
    const run = await lifecycle.runs.kickedOff(created.id, "k-1");
    // Tasks awaited in parallel: two human-input requests for two tasks of the run.
    const [draft, facts] = await Promise.all(
      ["draft", "facts"].map((name) => lifecycle.reviews.awaitDecision(run, { taskKey: name, name, output: `${OUTPUT} ${name}` }, { source: "input" })),
    );
    const state = async () => (await prismaOf(db.database).execution.findUniqueOrThrow({ where: { id: run.id } })).state;
    return { run, draft: draft!, facts: facts!, state };
  }

  it("still waits after the first is decided and runs again after the last; a decided review that waited through a reminder has the announcement shown again", async () => {
    const { run, draft, facts, state } = await twoWaiting();
    const prisma = prismaOf(db.database);
    const announcementRenders = () => prisma.slackEffect.count({ where: { kind: "run.state", subjectId: run.id } });
    expect(await state()).toBe("waiting");
    // A review opening costs the announcement nothing.
    expect(await announcementRenders()).toBe(0);

    expect(await lifecycle.reviews.decide({ reviewId: draft.id, userId: "U2", approve: true, feedback: "" })).toMatchObject({ kind: "decided" });
    expect(await state()).toBe("waiting");
    expect(await announcementRenders()).toBe(0);

    // The other waited through a reminder (its run's announcement then said a review waits).
    await prisma.review.update({ where: { id: facts.id }, data: { remindersSent: 1 } });
    expect(await lifecycle.reviews.decide({ reviewId: facts.id, userId: "U2", approve: false, feedback: "more sources" })).toMatchObject({ kind: "decided" });
    expect(await state()).toBe("running");
    expect(await announcementRenders()).toBe(1);
    expect(resumes.map((r) => r.taskId)).toEqual(["draft", "facts"]);
  });

  it("runs again when the last review waiting is closed because the crew no longer waits on it", async () => {
    const { draft, facts, state } = await twoWaiting();
    expect(await lifecycle.reviews.decide({ reviewId: draft.id, userId: "U2", approve: true, feedback: "" })).toMatchObject({ kind: "decided" });
    expect(await state()).toBe("waiting");
    moved = ["facts"];
    expect(await lifecycle.reviews.decide({ reviewId: facts.id, userId: "U2", approve: true, feedback: "" })).toMatchObject({ kind: "not_waiting" });
    expect(await state()).toBe("running");
  });
});

describe("a decision whose process died mid-/resume, on a run that ended meanwhile", () => {
  let lifecycle: Lifecycle;
  let effects: () => Promise<void>;
  let statusReadable: boolean;
  /** What happens while the crew's status is read. */
  let onStatus: (() => Promise<unknown>) | undefined;
  beforeEach(async () => {
    db = await createTestDatabase();
    resumes = [];
    updates = [];
    statusReadable = true;
    onStatus = undefined;
    const stoppable: CrewApi = {
      ...crew,
      status: async () => {
        await onStatus?.();
        if (!statusReadable) throw new CrewError({ kind: "unreachable", crewName: "research", operation: "status" });
        return status;
      },
      stop: async () => ({ outcome: "stopped" }),
    };
    ({ lifecycle, effects } = lifecycleWith({ get: () => stoppable }));
  });
  afterEach(async () => db.drop());

  /** A pending review whose decision was claimed by a process that died before the crew answered. */
  async function abandonedDecision() {
    const { execution, review } = await pendingReview(lifecycle);
    await effects();
    await prismaOf(db.database).review.update({
      where: { id: review.id },
      data: { state: "deciding", decidedBy: "U2", decision: "approve", feedback: "", decidedAt: new Date(Date.now() - 60_000) },
    });
    return { execution, review };
  }

  const stop = (executionId: string) => lifecycle.stops.stop({ executionId }, { userId: "U1" }, { members: { isMember: async () => true } });
  const interruptedNotices = () => prismaOf(db.database).slackEffect.count({ where: { kind: "run.message", key: { contains: "abandoned:" } } });

  it.each([
    ["its status readable (stopped, so not paused)", true],
    ["its status unreadable", false],
  ])("stopped from Slack, %s: the review closes as the stop closes those waiting; it is neither recorded as taken nor opened again", async (_, readable) => {
    const { execution, review } = await abandonedDecision();
    expect((await stop(execution.id)).kind).toBe("stopped");
    status = { rawState: "STOPPED", phase: "failed" };
    statusReadable = readable;

    expect(await lifecycle.reviews.recoverAbandoned(0)).toBe(1);
    await effects();
    const stored = await prismaOf(db.database).review.findUniqueOrThrow({ where: { id: review.id } });
    // No resumeMessage: its message says who stopped the run, as for the reviews the stop closed.
    expect(stored).toMatchObject({ state: "closed", resumeMessage: null });
    expect(await interruptedNotices()).toBe(0);
    expect(resumes).toHaveLength(0);
    const audit = await prismaOf(db.database).auditRecord.findFirstOrThrow({ where: { executionId: execution.id, kind: "decision" } });
    expect(audit.detail).toMatchObject({ outcome: "not_waiting", message: expect.stringMatching(/stopped before the crew was known to take the decision/) });
  });

  it("stopped while recovery reads the crew's status: the status's STOPPED is not taken for the decision", async () => {
    const { execution, review } = await abandonedDecision();
    onStatus = () => stop(execution.id);
    status = { rawState: "STOPPED", phase: "failed" };

    expect(await lifecycle.reviews.recoverAbandoned(0)).toBe(1);
    expect(await prismaOf(db.database).review.findUniqueOrThrow({ where: { id: review.id } })).toMatchObject({ state: "closed", resumeMessage: null });
    expect((await prismaOf(db.database).execution.findUniqueOrThrow({ where: { id: execution.id } })).state).toBe("stopped");
  });

  it("a run that failed, its status unreadable: the review closes, saying the run had ended, and nobody is asked to decide again", async () => {
    const { execution, review } = await abandonedDecision();
    await lifecycle.runs.finish(execution.id, { event: "failed", error: "boom" });
    statusReadable = false;

    expect(await lifecycle.reviews.recoverAbandoned(0)).toBe(1);
    await effects();
    expect(await prismaOf(db.database).review.findUniqueOrThrow({ where: { id: review.id } })).toMatchObject({ state: "closed", resumeMessage: "the run had ended" });
    expect(await interruptedNotices()).toBe(0);
    expect(updates.at(-1)!.note).toBe("The crew was not waiting for this decision: the run had ended");
  });
});
