import { describe, expect, it } from "vitest";
import type { RunPlan } from "../../../domain/plan.js";
import { PLAN_LIMITS, planChunks, planShownOf, planTitle, taskChunk } from "./plan.js";

const plan = (tasks: RunPlan["tasks"], ended = false): RunPlan => ({ tasks, ended, failed: false });

describe("live plan chunks", () => {
  it("titles the plan with the crew and its first inputs, and its outcome at the end", () => {
    expect(planTitle({ crewName: "research", inputs: { topic: "Tides", depth: "2" } })).toBe("research (Topic: Tides, Depth: 2)");
    expect(planTitle({ crewName: "research", inputs: {}, plan: { ended: true, failed: true } })).toBe("research — failed");
  });

  it("sends the title and every card first, then only what changed", () => {
    const first = planChunks("t", plan([{ id: "task-1", title: "a", status: "in_progress", details: "step 1" }]));
    expect(first.chunks).toEqual([
      { type: "plan_update", title: "t" },
      { type: "task_update", id: "task-1", title: "a", status: "in_progress", details: "step 1" },
    ]);
    const same = planChunks("t", plan([{ id: "task-1", title: "a", status: "in_progress", details: "step 1" }]), first.shown);
    expect(same.chunks).toEqual([]);
    const next = planChunks(
      "t",
      plan([
        { id: "task-1", title: "a", status: "complete", output: "done" },
        { id: "task-2", title: "Task 2", status: "in_progress", details: "x" },
      ]),
      planShownOf(JSON.parse(JSON.stringify(first.shown))),
    );
    expect(next.chunks.map((c) => [c.type, "id" in c ? c.id : "", "status" in c ? c.status : ""])).toEqual([
      ["task_update", "task-1", "complete"],
      ["task_update", "task-2", "in_progress"],
    ]);
  });

  it("cuts, then escapes, any text: mentions and markup show as text, a million characters cost what the limit does", () => {
    const hostile = `<!channel> <@U123> & *x* ${"y".repeat(1_000_000)}`;
    const chunk = taskChunk({ id: "task-1", title: hostile, status: "complete", details: hostile, output: hostile });
    expect(chunk.title.startsWith("&lt;!channel&gt; &lt;@U123&gt; &amp; *x*")).toBe(true);
    expect(chunk.title.length).toBeLessThanOrEqual(PLAN_LIMITS.taskTitle * 5);
    expect(chunk.details!.length).toBeLessThanOrEqual(PLAN_LIMITS.details * 5);
    expect(chunk.output!.length).toBeLessThanOrEqual(PLAN_LIMITS.output * 5);
    expect(JSON.stringify(chunk)).not.toMatch(/<!channel>|<@U/);
    const title = planTitle({ crewName: hostile, inputs: { [hostile]: hostile } });
    expect(title).not.toContain("<!channel>");
    expect(title.length).toBeLessThanOrEqual(PLAN_LIMITS.title * 5);
    expect(planShownOf(["x"])).toEqual({});
    expect(planShownOf({ a: 1, b: "ok" })).toEqual({ b: "ok" });
  });
});
