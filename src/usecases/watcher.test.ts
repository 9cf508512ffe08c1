import { describe, expect, it } from "vitest";
import { sameOutputVerdict } from "./reviews.js";
import { actionForStatus, graceOver, nextBackoff, waitWithinGrace } from "./watcher.js";

const opts = { minBackoffMs: 2000, maxBackoffMs: 60_000 };

describe("nextBackoff", () => {
  it("doubles while nothing changes, up to the maximum", () => {
    const seq: number[] = [];
    let b = 0;
    for (let i = 0; i < 8; i++) seq.push((b = nextBackoff(b, false, opts)));
    expect(seq).toEqual([2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000]);
  });

  it("resets to the minimum when something changed, or from the reset marker 0", () => {
    expect(nextBackoff(60_000, true, opts)).toBe(2000);
    expect(nextBackoff(0, false, opts)).toBe(2000);
    expect(nextBackoff(500, false, opts)).toBe(2000);
    expect(nextBackoff(Number.NaN, false, opts)).toBe(2000);
  });

  it("keeps max >= min", () => {
    expect(nextBackoff(100, false, { minBackoffMs: 100, maxBackoffMs: 50 })).toBe(100);
  });
});

describe("lost-run grace", () => {
  const t0 = new Date("2026-01-01T00:00:00Z");
  const at = (ms: number) => new Date(t0.getTime() + ms);
  it("declares lost only once the 404s have lasted the grace period", () => {
    expect(graceOver(null, at(1e9), 1000)).toBe(false);
    expect(graceOver(t0, at(999), 1000)).toBe(false);
    expect(graceOver(t0, at(1000), 1000)).toBe(true);
  });
  it("does not wait past the end of the grace period", () => {
    expect(waitWithinGrace(60_000, null, at(0), 120_000)).toBe(60_000);
    expect(waitWithinGrace(60_000, t0, at(100_000), 120_000)).toBe(20_000);
    expect(waitWithinGrace(60_000, t0, at(200_000), 120_000)).toBe(0);
  });
});

describe("actionForStatus", () => {
  it("maps phases to lifecycle actions", () => {
    expect(actionForStatus({ rawState: "RUNNING", phase: "running" })).toEqual({ kind: "none" });
    expect(actionForStatus({ rawState: "PAUSED", phase: "paused" })).toEqual({ kind: "none" });
    expect(actionForStatus({ rawState: "PAUSED", phase: "paused", lastTask: { output: "o", name: "n", agent: "a", taskId: "t1" } })).toEqual({
      kind: "review",
      taskKey: "n",
      name: "n",
      agent: "a",
      output: "o",
      resumeTaskId: "t1",
    });
    expect(actionForStatus({ rawState: "PAUSED", phase: "paused", lastTask: { output: "o", name: "n" } })).toMatchObject({ taskKey: "n" });
    expect(actionForStatus({ rawState: "PAUSED", phase: "paused", lastTask: { output: "o" } })).toMatchObject({ taskKey: "task" });
    expect(actionForStatus({ rawState: "SUCCESS", phase: "succeeded", output: "done" })).toEqual({ kind: "succeeded", output: "done" });
    expect(actionForStatus({ rawState: "FAILED", phase: "failed", error: "boom" })).toEqual({ kind: "failed", error: "boom", output: undefined });
    expect(actionForStatus({ rawState: "FAILED", phase: "failed" })).toMatchObject({ kind: "failed", error: expect.stringMatching(/failed/) });
  });
});

describe("sameOutputVerdict", () => {
  const observedAt = new Date("2026-01-01T00:01:00Z");
  const before = new Date("2026-01-01T00:00:00Z");
  const after = new Date("2026-01-01T00:02:00Z");
  const review = (state: string, updatedAt = before, taskKey = "task-research", taskName = "research_task") => ({ taskKey, taskName, state, updatedAt });
  const poll = { source: "poll", observedAt } as const;
  const webhook = { source: "webhook" } as const;

  it("opens under the given key when the output is new", () => {
    expect(sameOutputVerdict(undefined, { taskKey: "k" }, webhook)).toEqual({ kind: "open", taskKey: "k" });
    expect(sameOutputVerdict(undefined, { taskKey: "k" }, poll)).toEqual({ kind: "open", taskKey: "k" });
  });

  it("leaves a webhook with the same key to the per-key round rule (rejected + same output = new round)", () => {
    expect(sameOutputVerdict(review("rejected"), { taskKey: "task-research" }, webhook)).toEqual({ kind: "open", taskKey: "task-research" });
    expect(sameOutputVerdict(review("pending"), { taskKey: "task-research" }, webhook)).toEqual({ kind: "open", taskKey: "task-research" });
  });

  it("does not duplicate a poll-opened review when the webhook names the task differently", () => {
    const polled = review("pending", before, "research_task", "research_task");
    expect(sameOutputVerdict(polled, { taskKey: "task-research", name: "research_task" }, webhook)).toEqual({ kind: "duplicate" });
    expect(sameOutputVerdict({ ...polled, state: "approved" }, { taskKey: "task-research", name: "research_task" }, webhook)).toEqual({ kind: "duplicate" });
    // A different task that happens to produce the same text, already decided: its own review.
    expect(sameOutputVerdict({ ...polled, state: "approved" }, { taskKey: "task-write", name: "writing_task" }, webhook)).toEqual({ kind: "open", taskKey: "task-write" });
  });

  it("treats a poll of an output under review or approved as a duplicate, whatever its key", () => {
    expect(sameOutputVerdict(review("pending"), { taskKey: "other" }, poll)).toEqual({ kind: "duplicate" });
    expect(sameOutputVerdict(review("deciding"), { taskKey: "task-research" }, poll)).toEqual({ kind: "duplicate" });
    expect(sameOutputVerdict(review("approved"), { taskKey: "research_task", name: "research_task" }, poll)).toEqual({ kind: "duplicate" });
    expect(sameOutputVerdict(review("approved"), { taskKey: "task" }, poll)).toEqual({ kind: "duplicate" });
    expect(sameOutputVerdict(review("approved"), { taskKey: "task-write", name: "writing_task" }, poll)).toEqual({ kind: "open", taskKey: "task-write" });
  });

  it("opens a new round after a rejection only for a status asked for after the rejection, under the rejected review's key", () => {
    expect(sameOutputVerdict(review("rejected", before), { taskKey: "research_task" }, poll)).toEqual({ kind: "open", taskKey: "task-research" });
    expect(sameOutputVerdict(review("rejected", after), { taskKey: "task-research" }, poll)).toEqual({ kind: "duplicate" });
  });
});
