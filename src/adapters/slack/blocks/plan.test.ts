import { describe, expect, it } from "vitest";
import type { RunPlan } from "../../../domain/plan.js";
import { earlyProgressMessage, PLAN_LIMITS, planChunks, planShownOf, planTitle, taskChunk } from "./plan.js";

const plan = (tasks: RunPlan["tasks"], ended = false): RunPlan => ({ tasks, ended, failed: false });

describe("live plan chunks", () => {
  it("titles the plan with the crew and its first inputs, and its outcome at the end", () => {
    expect(planTitle({ crewName: "research", inputs: { topic: "Tides", depth: "2" } })).toBe("research (Topic: Tides, Depth: 2)");
    expect(planTitle({ crewName: "research", inputs: {}, plan: { ended: true, failed: true } })).toBe("research — failed");
    expect(planTitle({ crewName: "research", inputs: {}, plan: { ended: true, failed: false, stopped: "stopped" } })).toBe("research — stopped");
    expect(planTitle({ crewName: "research", inputs: {}, plan: { ended: true, failed: false, stopped: "abandoned" } })).toBe("research — no longer followed");
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

describe("the message that shows a run's steps while its plan waits to start", () => {
  const at = new Date("2026-11-23T14:03:05.900Z");
  it("shows the latest card's step with the time it came, and says the plan follows below (true before and after it starts)", () => {
    const m = earlyProgressMessage({
      title: "research (Topic: Tides)",
      plan: plan([{ id: "task-1", title: "Task 1", status: "in_progress", details: "<!channel> searching *tides*" }]),
      stepAt: at,
    });
    const words = JSON.stringify(m.blocks);
    expect(words).toContain("research (Topic: Tides)");
    expect(words).toContain("*Task 1* · ");
    // Text from the crew is escaped: no mention, no formatting of its own.
    expect(words).not.toContain("<!channel>");
    expect(words).toContain("&lt;!channel&gt;");
    expect(words).toContain("Latest step at 14:03:05 UTC");
    expect(words).toContain("follows below this message once Slack lets it start");
    expect(m.text).toContain("Task 1");
  });

  it("says so when the run was stopped before its plan started; a long step is cut", () => {
    const long = "x".repeat(5000);
    const m = earlyProgressMessage({ title: "research", plan: plan([{ id: "task-1", title: "Task 1", status: "in_progress", details: long }]), stepAt: at, stopped: true });
    const words = JSON.stringify(m.blocks);
    expect(words).toContain("The run was stopped before its live plan started.");
    expect(words).not.toContain("follows below");
    expect(words.length).toBeLessThan(PLAN_LIMITS.details + 1000);
  });
});
