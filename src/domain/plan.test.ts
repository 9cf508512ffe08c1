import { describe, expect, it } from "vitest";
import { appendSpacing, type PlanReview, planOf } from "./plan.js";

const at = (ms: number) => new Date(1_000_000 + ms);
const review = (taskKey: string, ms: number, patch: Partial<PlanReview> = {}): PlanReview => ({
  taskKey,
  taskName: taskKey,
  round: 1,
  state: "posted",
  output: `${taskKey} output`,
  createdAt: at(ms),
  ...patch,
});
const cards = (p: ReturnType<typeof planOf>) => p.tasks.map((t) => [t.id, t.title, t.status, t.details]);

describe("planOf", () => {
  it("shows a running task as soon as a step comes, titled by its task_started name when known", () => {
    expect(cards(planOf({ state: "running", reviews: [], step: { latest: "🔧 search", latestAt: 1_000_010 } }))).toEqual([["task-1", "Task 1", "in_progress", "🔧 search"]]);
    const named = planOf({ state: "running", reviews: [], step: { latest: "💭 Thinking", latestAt: 1_000_010, task: "gather", taskAt: 1_000_005 } });
    expect(cards(named)).toEqual([["task-1", "gather", "in_progress", "💭 Thinking"]]);
  });

  it("completes a task with its output once the next one runs; steps older than the output start no new card", () => {
    const reviews = [review("gather", 100)];
    // Just posted, it may still become a review: it completes once the next task runs (never back from complete).
    expect(cards(planOf({ state: "running", reviews, step: { latest: "old", latestAt: 1_000_050 } }))).toEqual([["task-1", "gather", "in_progress", "Output posted"]]);
    expect(cards(planOf({ state: "running", reviews: [review("gather", 100, { state: "approved" })] }))).toEqual([["task-1", "gather", "complete", "Done"]]);
    // A step after it: the next task runs (the old task_started name is not its title).
    const next = planOf({ state: "running", reviews, step: { latest: "new", latestAt: 1_000_200, task: "gather", taskAt: 1_000_010 } });
    expect(cards(next)).toEqual([
      ["task-1", "gather", "complete", "Done"],
      ["task-2", "Task 2", "in_progress", "new"],
    ]);
  });

  it("shows a review waiting as pending, a rejected task running again, and the latest round", () => {
    expect(cards(planOf({ state: "waiting", reviews: [review("draft", 0, { state: "pending" })] }))).toEqual([["task-1", "draft", "pending", "Waiting for a decision"]]);
    const redo = planOf({ state: "running", reviews: [review("draft", 0, { state: "rejected" })], step: { latest: "rewriting", latestAt: 1_000_100 } });
    expect(cards(redo)).toEqual([["task-1", "draft", "in_progress", "rewriting"]]);
    const round2 = planOf({ state: "running", reviews: [review("draft", 0, { state: "rejected" }), review("draft", 50, { round: 2, state: "approved" })] });
    expect(cards(round2)).toEqual([["task-1", "draft", "complete", "Done (round 2)"]]);
  });

  it("ends: a task under way completes with the run, or fails with it", () => {
    const step = { latest: "working", latestAt: 1_000_200 };
    const done = planOf({ state: "completed", reviews: [review("a", 0)], step });
    expect(done).toMatchObject({ ended: true, failed: false });
    expect(cards(done).map((c) => c[2])).toEqual(["complete", "complete"]);
    const failed = planOf({ state: "failed", error: "boom", reviews: [review("a", 0)], step });
    expect(failed).toMatchObject({ ended: true, failed: true });
    expect(cards(failed)).toEqual([
      ["task-1", "a", "complete", "Done"],
      ["task-2", "Task 2", "error", "boom"],
    ]);
  });

  it("ends a stopped run: its closed review says so, and the task under way says it was stopped", () => {
    const stopped = planOf({ state: "stopped", reviews: [review("a", 0, { state: "closed" })], step: { latest: "x", latestAt: 1_000_005 } });
    expect(stopped).toMatchObject({ ended: true, failed: false, stopped: "stopped" });
    expect(cards(stopped)).toEqual([
      ["task-1", "a", "error", "Stopped from Slack before a decision"],
      ["task-2", "Task 2", "error", "Stopped from Slack"],
    ]);
    // A task done before the stop stays done.
    expect(cards(planOf({ state: "stopped", reviews: [review("a", 0, { state: "posted" })] }))).toEqual([["task-1", "a", "complete", "Done"]]);
    expect(cards(planOf({ state: "abandoned", reviews: [], step: { latest: "x", latestAt: 1_000_005 } }))).toEqual([["task-1", "Task 1", "error", "No longer followed"]]);
  });

  it("a stopped run: only what was waiting for a decision shows the stop; finished tasks stay complete", () => {
    const reviews = [
      review("gather", 0),
      review("check", 10, { state: "approved" }),
      review("draft", 20, { state: "deciding" }),
      review("sources", 30, { state: "closed" }),
      review("summary", 40),
    ];
    expect(cards(planOf({ state: "stopped", reviews }))).toEqual([
      ["task-1", "gather", "complete", "Done"],
      ["task-2", "check", "complete", "Done"],
      // Its decision was on its way to the crew when the run stopped: not known to be taken.
      ["task-3", "draft", "error", "Stopped from Slack while its decision was being sent"],
      ["task-4", "sources", "error", "Stopped from Slack before a decision"],
      ["task-5", "summary", "complete", "Done"],
    ]);
    expect(cards(planOf({ state: "abandoned", reviews: [review("draft", 0, { state: "pending" })] }))).toEqual([
      ["task-1", "draft", "error", "No longer followed before a decision"],
    ]);
  });
});

describe("a live plan's append spacing", () => {
  it("is the plan's share of the append tier among the workspace's live plans, between 1 s and 8 s", () => {
    expect(appendSpacing(1, 600)).toBe(1000);
    expect(appendSpacing(0, 600)).toBe(1000);
    expect(appendSpacing(12, 600)).toBe(7200);
    expect(appendSpacing(40, 600)).toBe(8000);
  });
});
