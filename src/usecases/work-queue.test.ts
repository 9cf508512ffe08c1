import { describe, expect, it } from "vitest";
import { WorkQueue } from "./work-queue.js";

describe("WorkQueue", () => {
  it("runs at most `concurrency` jobs at once, all of them eventually, and reports failures", async () => {
    const errors: unknown[] = [];
    const queue = new WorkQueue(2, (err) => errors.push(err));
    let running = 0;
    let peak = 0;
    const done: number[] = [];
    for (let i = 0; i < 10; i++) {
      queue.push(async () => {
        running += 1;
        peak = Math.max(peak, running);
        // The job's own work, long enough for others to overlap it.
        await new Promise((r) => setTimeout(r, 5));
        running -= 1;
        if (i === 3) throw new Error("job 3 failed");
        done.push(i);
      });
    }
    await queue.idle();
    expect(peak).toBe(2);
    expect(done.sort((a, b) => a - b)).toEqual([0, 1, 2, 4, 5, 6, 7, 8, 9]);
    expect(errors).toHaveLength(1);
    expect(queue.size).toBe(0);
  });
});

describe("WorkQueue with keys", () => {
  it("runs one key's jobs one after another in the order pushed, other keys beside them", async () => {
    const queue = new WorkQueue(4, () => {});
    const log: string[] = [];
    const job = (name: string, ms: number) => async () => {
      log.push(`start ${name}`);
      await new Promise((r) => setTimeout(r, ms));
      log.push(`end ${name}`);
    };
    // The run's task is slow and its end quick: the end still waits for the task.
    queue.push(job("a:task", 20), "a");
    queue.push(job("a:end", 1), "a");
    queue.push(job("b:task", 1), "b");
    expect(queue.size).toBe(3);
    await queue.idle();
    expect(log.indexOf("start a:end")).toBeGreaterThan(log.indexOf("end a:task"));
    // Another run's job did not wait for run a.
    expect(log.indexOf("end b:task")).toBeLessThan(log.indexOf("end a:task"));
    expect(queue.size).toBe(0);
  });
});
