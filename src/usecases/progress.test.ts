// The progress coalescer's memory: a run whose steps stopped coming is forgotten (one ended on another
// replica is never finished here), and its steps were handed over first.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { silentLogger } from "../log/log.js";
import type { Outbox } from "./ports.js";
import { ProgressCoalescer } from "./progress.js";

describe("ProgressCoalescer", () => {
  const handed: unknown[] = [];
  const outbox = { request: async (effect: unknown) => void handed.push(effect) } as unknown as Outbox;
  const clock = { now: () => new Date() };
  beforeEach(() => {
    vi.useFakeTimers();
    handed.length = 0;
  });
  afterEach(() => vi.useRealTimers());

  it("forgets a run once its steps stopped coming for the idle time, after handing them over; a step meanwhile keeps it", async () => {
    const progress = new ProgressCoalescer({ outbox, log: silentLogger, clock, intervalMs: 1000, idleForgetMs: 60_000 });
    progress.step({ id: "run-1" }, { summary: "reading", task: "research" } as never);
    await vi.advanceTimersByTimeAsync(1000);
    expect(handed).toEqual([
      expect.objectContaining({ kind: "run.progress", subjectId: "run-1", payload: expect.objectContaining({ steps: 1, latest: "reading", task: "research" }) }),
    ]);
    await vi.advanceTimersByTimeAsync(50_000);
    progress.step({ id: "run-1" }, { summary: "writing" } as never);
    await vi.advanceTimersByTimeAsync(59_000);
    expect(progress.tracked).toBe(1);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(progress.tracked).toBe(0);
    expect(handed).toHaveLength(2);
  });
});
