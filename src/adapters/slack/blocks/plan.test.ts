import { describe, expect, it } from "vitest";
import type { RunPlan } from "../../../domain/plan.js";
import {
  earlyProgressMessage,
  PLAN_CARDS_MAX,
  PLAN_CHUNKS_PER_CALL,
  PLAN_LIMITS,
  type PlanShown,
  planCards,
  planChunks,
  planShownOf,
  planTitle,
  REST_CARD_ID,
  taskChunk,
} from "./plan.js";

const plan = (tasks: RunPlan["tasks"], ended = false): RunPlan => ({ tasks, ended, failed: false });

describe("live plan chunks", () => {
  it("titles the plan with the crew and its first inputs, and its outcome at the end", () => {
    expect(planTitle({ crewName: "research", inputs: { topic: "Tides", depth: "2" } })).toBe("research (Topic: Tides, Depth: 2)");
    expect(planTitle({ crewName: "research", inputs: {}, plan: { ended: true, failed: true } })).toBe("research — failed");
    expect(planTitle({ crewName: "research", inputs: {}, plan: { ended: true, failed: false, stopped: "stopped" } })).toBe("research — stopped");
    expect(planTitle({ crewName: "research", inputs: {}, plan: { ended: true, failed: false, stopped: "abandoned" } })).toBe("research — no longer followed");
  });

  it("keeps the outcome whole when the crew and its inputs fill the title", () => {
    const inputs = { topic: "Quarterly revenue analysis for the EMEA region", audience: "Board of directors and finance leads", deadline: "End of next week, before the offsite" };
    const live = planTitle({ crewName: "research", inputs });
    expect(live.length).toBeLessThanOrEqual(PLAN_LIMITS.title);
    for (const [plan, outcome] of [
      [{ ended: true, failed: false, stopped: "stopped" as const }, " — stopped"],
      [{ ended: true, failed: true }, " — failed"],
      [{ ended: true, failed: false }, " — finished"],
    ] as const) {
      expect(planTitle({ crewName: "research", inputs, plan })).toBe(`${live}${outcome}`);
    }
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

  it("sends at most PLAN_CHUNKS_PER_CALL chunks a call, and what had no room in the next calls, the cards in order", () => {
    const tasks = Array.from({ length: 120 }, (_, i) => ({ id: `task-${i + 1}`, title: `t${i + 1}`, status: "complete" as const }));
    const ids = (chunks: { type: string }[]) => chunks.map((c) => ("id" in c ? String(c.id) : "#title"));
    // A new stream (as after Slack ended the one before): the title and the first cards.
    const first = planChunks("t", plan(tasks));
    expect(first.chunks).toHaveLength(PLAN_CHUNKS_PER_CALL);
    expect(first.more).toBe(true);
    expect(ids(first.chunks)).toEqual(["#title", ...tasks.slice(0, PLAN_CHUNKS_PER_CALL - 1).map((t) => t.id)]);
    // A card that changed meanwhile goes with the next ones, in the plan's order.
    const changed = tasks.map((t) => (t.id === "task-3" ? { ...t, status: "error" as const } : t));
    const second = planChunks("t", plan(changed), first.shown);
    expect(second.more).toBe(true);
    expect(ids(second.chunks)).toEqual(["task-3", ...tasks.slice(PLAN_CHUNKS_PER_CALL - 1, 2 * PLAN_CHUNKS_PER_CALL - 2).map((t) => t.id)]);
    // Until every card was sent: each once, in order, the title first.
    let shown: PlanShown = {};
    const sent: string[] = [];
    for (let call = 0; call < 10; call++) {
      const next = planChunks("t", plan(tasks), shown);
      if (!next.chunks.length) break;
      expect(next.chunks.length).toBeLessThanOrEqual(PLAN_CHUNKS_PER_CALL);
      sent.push(...ids(next.chunks));
      shown = next.shown;
      expect(next.more).toBe(sent.length < tasks.length + 1);
    }
    expect(sent).toEqual(["#title", ...tasks.map((t) => t.id)]);
    // Any cap, however small, sends something.
    expect(planChunks("t", plan(tasks), {}, 0).chunks).toHaveLength(1);
  });

  it("shows a card per task up to PLAN_CARDS_MAX; every later task on the last card, whose id stays", () => {
    const task = (n: number, status: RunPlan["tasks"][number]["status"] = "complete") => ({ id: `task-${n}`, title: `t${n}`, status, details: `step of ${n}` });
    const tasks = (n: number, last: RunPlan["tasks"][number]["status"] = "in_progress") => Array.from({ length: n }, (_, i) => task(i + 1, i + 1 === n ? last : "complete"));
    expect(planCards(tasks(PLAN_CARDS_MAX - 1))).toEqual(tasks(PLAN_CARDS_MAX - 1));
    // One past the others: its card as it is, under the shared id.
    const one = planCards(tasks(PLAN_CARDS_MAX));
    expect(one).toHaveLength(PLAN_CARDS_MAX);
    expect(one.at(-1)).toEqual({ ...task(PLAN_CARDS_MAX, "in_progress"), id: REST_CARD_ID });
    // Thousands: still PLAN_CARDS_MAX cards; the last names the tasks it stands for and shows the latest one's step.
    const many = planCards(tasks(5000));
    expect(many).toHaveLength(PLAN_CARDS_MAX);
    expect(many.slice(0, -1).map((t) => t.id)).toEqual(tasks(PLAN_CARDS_MAX - 1).map((t) => t.id));
    expect(many.at(-1)).toEqual({ id: REST_CARD_ID, title: `Tasks ${PLAN_CARDS_MAX}–5000`, status: "in_progress", details: "t5000: step of 5000" });
    // A decision waited for among them shows first, then work under way, then a failure.
    const waiting = tasks(5000, "complete").map((t) => (t.id === "task-300" ? { ...t, status: "pending" as const } : t));
    expect(planCards(waiting).at(-1)!.status).toBe("pending");
    expect(planCards(tasks(5000, "error")).at(-1)!.status).toBe("error");
    expect(planCards(tasks(5000, "complete")).at(-1)!.status).toBe("complete");
    // A step of the run's latest task changes that one card only.
    const before = planChunks("t", plan(tasks(5000)));
    let shown = before.shown;
    for (let more = before.more; more; ) {
      const next = planChunks("t", plan(tasks(5000)), shown);
      shown = next.shown;
      more = next.more;
    }
    const after = planChunks("t", plan([...tasks(4999, "complete"), { ...task(5000, "in_progress"), details: "a newer step" }]), shown);
    expect(after.chunks).toEqual([{ type: "task_update", id: REST_CARD_ID, title: `Tasks ${PLAN_CARDS_MAX}–5000`, status: "in_progress", details: "t5000: a newer step" }]);
    expect(Object.keys(shown)).toHaveLength(PLAN_CARDS_MAX + 1);
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
