import { describe, expect, it } from "vitest";
import { effectOf, MAX_EVENTS_PER_BATCH, parseEventBatch } from "./events.js";
import { isWaitingText, parseStatus, parseWebhook } from "./parse.js";

describe("parseEventBatch", () => {
  it("deduplicates by id, sorts by timestamp and skips unreadable events", () => {
    const events = parseEventBatch({
      events: [
        { id: "b", type: "task_completed", timestamp: "2026-11-22T10:00:02Z", data: { output: "x" } },
        { id: "a", type: "task_started", timestamp: "2026-11-22T10:00:01Z" },
        { id: "b", type: "task_completed", timestamp: "2026-11-22T10:00:02Z", data: { output: "x" } },
        { type: "no id" },
        42,
      ],
    });
    expect(events.map((e) => e.id)).toEqual(["a", "b"]);
  });

  it("reads epoch seconds and milliseconds, as numbers or numeric strings", () => {
    const at = (timestamp: unknown) => parseEventBatch({ events: [{ id: "1", type: "x", timestamp }] })[0]!.at;
    expect(at(1_700_000_000)).toBe(1_700_000_000_000);
    expect(at("1700000000")).toBe(1_700_000_000_000);
    expect(at(" 1700000000.5 ")).toBe(1_700_000_000_500);
    expect(at(1_700_000_000_123)).toBe(1_700_000_000_123);
    expect(at("1700000000123")).toBe(1_700_000_000_123);
    expect(at("2023-11-14T22:13:20Z")).toBe(1_700_000_000_000);
    for (const unreadable of ["soon", "", -5, "1e400", "9".repeat(100), `2023-11-14T22:13:20Z${" ".repeat(100)}`]) expect(at(unreadable), String(unreadable)).toBeUndefined();
    // Numeric and ISO times of one batch sort together.
    const mixed = parseEventBatch({
      events: [
        { id: "c", type: "x", timestamp: "1700000003" },
        { id: "a", type: "x", timestamp: 1_700_000_001 },
        { id: "b", type: "x", timestamp: "2023-11-14T22:13:22Z" },
      ],
    });
    expect(mixed.map((e) => e.id)).toEqual(["a", "b", "c"]);
  });

  it("keeps an event without a readable time after the one it followed in the batch, not first", () => {
    const events = parseEventBatch({
      events: [
        { id: "t3", type: "x", timestamp: "2026-11-22T10:00:03Z" },
        { id: "none", type: "x" },
        { id: "t1", type: "x", timestamp: "2026-11-22T10:00:01Z" },
        { id: "bad", type: "x", timestamp: "whenever" },
        { id: "t2", type: "x", timestamp: "2026-11-22T10:00:02Z" },
      ],
    });
    expect(events.map((e) => e.id)).toEqual(["t1", "bad", "t2", "t3", "none"]);
    // At the head of the batch it stays at the head.
    expect(
      parseEventBatch({
        events: [
          { id: "none", type: "x" },
          { id: "t", type: "x", timestamp: 5 },
        ],
      }).map((e) => e.id),
    ).toEqual(["none", "t"]);
  });

  it("refuses what is not a batch, and batches that are too large", () => {
    expect(() => parseEventBatch({ events: "x" })).toThrow();
    expect(() => parseEventBatch(null)).toThrow();
    expect(() => parseEventBatch({ events: Array.from({ length: MAX_EVENTS_PER_BATCH + 1 }, (_, i) => ({ id: i, type: "x" })) })).toThrow();
  });
});

describe("effectOf", () => {
  const ev = (type: string, data: Record<string, unknown> = {}) => ({ id: "1", type, at: 0, data });
  it("turns tool, LLM and task starts into progress lines", () => {
    expect(effectOf(ev("tool_usage_started", { tool_name: "search", tool_args: "tides", agent_role: "Researcher" }))).toMatchObject({
      kind: "progress",
      step: { summary: "🔧 search: tides · Researcher" },
    });
    expect(effectOf(ev("llm_call_started"))).toMatchObject({ kind: "progress" });
    // The task's name also titles its card in the live plan.
    expect(effectOf(ev("task_started", { task_name: "research" }))).toMatchObject({ kind: "progress", step: { summary: "▶️ Task research", task: "research" } });
    expect(effectOf(ev("tool_usage_started", { tool_name: "search" }))).not.toHaveProperty("step.task");
    // A tool's failure shows no stack frame.
    const traceback = 'Traceback (most recent call last):\n  File "/app/tools/search.py", line 8, in run\nTimeoutError: search took too long';
    expect(effectOf(ev("tool_usage_error", { tool_name: "search", error: traceback }))).toMatchObject({ step: { summary: "⚠️ search failed: TimeoutError: search took too long" } });
  });
  it("cuts a long task name without splitting a character (a lone surrogate is no JSON PostgreSQL stores)", () => {
    const name = `${"a".repeat(298)}😀 and more`;
    const effect = effectOf(ev("task_started", { task_name: name })) as { step: { summary: string; task: string } };
    for (const text of [effect.step.summary, effect.step.task]) {
      expect(text.length).toBeLessThanOrEqual(300);
      expect(text.endsWith("…")).toBe(true);
      expect(Buffer.from(text).toString()).toBe(text);
    }
  });
  it("turns task and crew ends into callback bodies the lifecycle already reads", () => {
    expect(effectOf(ev("task_completed", { task_name: "draft", agent_role: "Writer", output: "Text" }))).toEqual({
      kind: "callback",
      callback: "task",
      body: { name: "draft", agent: "Writer", output: "Text" },
    });
    expect(effectOf(ev("task_completed", { task: { name: "draft", output: { a: 1 } } }))).toMatchObject({ kind: "callback", body: { name: "draft", output: '{\n  "a": 1\n}' } });
    expect(effectOf(ev("crew_kickoff_completed", { output: "Final" }))).toEqual({ kind: "callback", callback: "crew", body: { result: "Final" } });
    expect(effectOf(ev("crew_kickoff_failed", { error: "boom" }))).toMatchObject({ kind: "callback", callback: "crew", body: { error: "boom" } });
    expect(effectOf(ev("task_completed", {}))).toEqual({ kind: "ignore" });
    // An output named by neither a name nor an id is still a task the task webhook's parser takes.
    const unnamed = effectOf(ev("task_completed", { output: "Text" }));
    expect(unnamed).toMatchObject({ kind: "callback", callback: "task", body: { name: "task", output: "Text" } });
    expect(parseWebhook("task", (unnamed as { body: unknown }).body)).toMatchObject({ output: "Text" });
    expect(effectOf(ev("brand_new_event"))).toEqual({ kind: "ignore" });
  });
});

describe("waiting for a person (every variant in the field notes)", () => {
  it.each(["PAUSED", "PENDING_HUMAN_INPUT", "WAITING", "Pending Human Input", "waiting for human input on task x", "human feedback required", "awaiting review"])(
    "%s waits",
    (s) => {
      expect(isWaitingText(s)).toBe(true);
      expect(parseStatus({ state: s }).phase).toBe("paused");
    },
  );
  it.each(["RUNNING", "PENDING", "STARTED", "Running task review_task (2/3)", "Execution queued"])("%s does not", (s) => {
    expect(parseStatus({ state: s }).phase).toBe("running");
  });
  it("reads the status text when the state does not say it, but trusts a state that says the run is going", () => {
    expect(parseStatus({ state: "ACTIVE", status: "Pending Human Input" }).phase).toBe("paused");
    expect(parseStatus({ status: "Pending Human Input" }).phase).toBe("paused");
    expect(parseStatus({ state: "RUNNING", status: "Running task review_required_task (2/3)" }).phase).toBe("running");
  });
});

describe("human-input requests", () => {
  it("accepts every name for the run, the task and the output", () => {
    expect(parseWebhook("input", { execution_id: "k", task_id: "t", name: "draft", agent: "Writer", output: "o" })).toEqual({
      kind: "input",
      runId: "k",
      taskId: "t",
      name: "draft",
      agent: "Writer",
      output: "o",
    });
    expect(parseWebhook("input", { executionId: "k", taskId: "t", task_output: "o" })).toMatchObject({ runId: "k", taskId: "t", output: "o" });
    expect(parseWebhook("input", { kickoff_id: "k", id: "t", taskOutput: "o" })).toMatchObject({ runId: "k", taskId: "t", output: "o" });
    expect(parseWebhook("input", { execution_id: "k", result: "o", task: { name: "draft" } })).toMatchObject({ output: "o", name: "draft" });
  });
  it("refuses a request with no usable output", () => {
    expect(() => parseWebhook("input", { execution_id: "k", task_id: "t" })).toThrow(/no task output/);
    expect(() => parseWebhook("input", { execution_id: "k", output: "   " })).toThrow();
  });
});
