import { describe, expect, it } from "vitest";
import { CrewError } from "./errors.js";
import { MISSING_INPUTS_MAX, parseErrorBody, parseInputs, parseKickoff, parseResume, parseStatus, parseWebhook, TASK_NAME_MAX, WHOLE_NAME_MAX } from "./parse.js";

function invalidResponse(fn: () => unknown): CrewError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(CrewError);
    expect((e as CrewError).kind).toBe("invalid_response");
    return e as CrewError;
  }
  throw new Error("expected a CrewError");
}

describe("parseInputs", () => {
  it("reads an inputs list given as null as no inputs", () => {
    expect(parseInputs({ inputs: null })).toEqual([]);
    expect(parseInputs({ inputs: [] })).toEqual([]);
    // A map of inputs, one of them named "inputs", keeps them all.
    expect(parseInputs({ topic: null, inputs: null }).map((i) => i.name)).toEqual(["topic", "inputs"]);
  });

  it("reads the usual array of names", () => {
    expect(parseInputs({ inputs: ["topic", "current_year"] })).toEqual([
      { name: "topic", required: true },
      { name: "current_year", required: true },
    ]);
  });

  it("reads an array of objects, required defaulting to true", () => {
    const body = {
      inputs: [
        { name: "topic", type: "string", description: "What to research" },
        { name: "tone", required: false },
        { name: "year", required: "false", extra: 1 },
      ],
    };
    expect(parseInputs(body)).toEqual([
      { name: "topic", type: "string", description: "What to research", required: true },
      { name: "tone", required: false },
      { name: "year", required: false },
    ]);
  });

  it("reads an object map of descriptions or types", () => {
    const body = { inputs: { topic: "The subject to research", current_year: "integer", notes: "" } };
    expect(parseInputs(body)).toEqual([
      { name: "topic", description: "The subject to research", required: true },
      { name: "current_year", type: "integer", required: true },
      { name: "notes", required: true },
    ]);
  });

  it("reads the three shapes at top level too", () => {
    expect(parseInputs(["topic"])).toEqual([{ name: "topic", required: true }]);
    expect(parseInputs([{ name: "topic", required: false }])).toEqual([{ name: "topic", required: false }]);
    expect(parseInputs({ topic: "string", audience: "Who reads it" })).toEqual([
      { name: "topic", type: "string", required: true },
      { name: "audience", description: "Who reads it", required: true },
    ]);
  });

  it("treats a string-valued `inputs` key as a top-level map entry", () => {
    expect(parseInputs({ inputs: "Files to process" })).toEqual([{ name: "inputs", description: "Files to process", required: true }]);
  });

  it("accepts an empty list and drops duplicate names", () => {
    expect(parseInputs({ inputs: [] })).toEqual([]);
    expect(parseInputs({ inputs: ["a", "a", { name: "a" }] })).toEqual([{ name: "a", required: true }]);
  });

  it("rejects anything else", () => {
    invalidResponse(() => parseInputs(null));
    invalidResponse(() => parseInputs("topic"));
    invalidResponse(() => parseInputs({ inputs: [{ type: "string" }] }));
    invalidResponse(() => parseInputs({ inputs: { topic: 3 } }));
    const e = invalidResponse(() => parseInputs(42, "research"));
    expect(e.crewName).toBe("research");
    expect(e.operation).toBe("inputs");
  });
});

describe("parseStatus", () => {
  it.each([
    ["PENDING", "running"],
    ["STARTED", "running"],
    ["RUNNING", "running"],
    ["SUCCESS", "succeeded"],
    ["FAILED", "failed"],
    ["FAILURE", "failed"],
    ["REVOKED", "failed"],
    ["STOPPED", "failed"],
    ["CANCELLED", "failed"],
    ["CANCELED", "failed"],
    ["NOT FOUND", "failed"],
    ["PAUSED", "paused"],
    ["SOMETHING_NEW", "running"],
  ])("maps state %s to %s", (state, phase) => {
    expect(parseStatus({ state, status: "Crew is doing things" })).toMatchObject({ rawState: state, phase });
  });

  it.each([
    ["running", "running"],
    ["completed", "succeeded"],
    ["error", "failed"],
    ["paused", "paused"],
  ])("falls back to the older lower-case status %s", (status, phase) => {
    expect(parseStatus({ status })).toMatchObject({ rawState: status, phase });
  });

  it("prefers result_json, pretty-printed", () => {
    const s = parseStatus({ state: "SUCCESS", result: "text", result_json: { a: 1 } });
    expect(s.output).toBe('{\n  "a": 1\n}');
  });

  it("uses result when it is a non-empty string", () => {
    expect(parseStatus({ state: "SUCCESS", result: "Final report" }).output).toBe("Final report");
  });

  it("uses result.output from the older object form", () => {
    const s = parseStatus({ status: "completed", result: { output: "Older report", tasks: [] } });
    expect(s.output).toBe("Older report");
  });

  it("falls back to last_executed_task.output while running", () => {
    const s = parseStatus({
      state: "RUNNING",
      result: "",
      result_json: null,
      last_executed_task: { output: "Draft so far", agent: "Researcher", name: "research", task_id: "t-1" },
    });
    expect(s.output).toBe("Draft so far");
    expect(s.lastTask).toEqual({ output: "Draft so far", agent: "Researcher", name: "research", taskId: "t-1" });
  });

  it("reads the task id from `id` too", () => {
    expect(parseStatus({ state: "PAUSED", last_executed_task: { output: "x", id: 7 } }).lastTask?.taskId).toBe("7");
  });

  it("has no output when nothing is reported", () => {
    const s = parseStatus({ state: "PENDING", result: "" });
    expect(s.output).toBeUndefined();
    expect(s.lastTask).toBeUndefined();
  });

  it("reads error and progress, tolerating null progress", () => {
    const s = parseStatus({
      state: "FAILED",
      error: "Tool crashed",
      progress: { unit: "tasks", completed: 1, total: 3, current: "write", current_agent: "Writer", remaining: 2 },
    });
    expect(s.error).toBe("Tool crashed");
    expect(s.progress).toEqual({ completed: 1, total: 3, current: "write", currentAgent: "Writer" });
    expect(parseStatus({ state: "RUNNING", progress: null }).progress).toBeUndefined();
  });

  it.each(["STOPPED", "CANCELLED", "CANCELED", "cancelled", "Canceled", " stopped "])("reads the cancelled state %j as finished, saying plainly that it was stopped", (state) => {
    const s = parseStatus({ state });
    expect(s.phase).toBe("failed");
    expect(s.error).toBe(`The crew reports this run ${state.trim()}: it was stopped or cancelled.`);
    // The older lower-case `status` alone says it too.
    expect(parseStatus({ status: state }).phase).toBe("failed");
  });

  it("keeps the crew's own words about a cancelled run after saying it was stopped", () => {
    expect(parseStatus({ state: "CANCELLED", status: "Cancelled by jane@example.com" }).error).toBe(
      "The crew reports this run CANCELLED: it was stopped or cancelled. The crew says: Cancelled by jane@example.com",
    );
    expect(parseStatus({ state: "STOPPED", error: { message: "Stopped from the dashboard" } }).error).toMatch(
      /^The crew reports this run STOPPED: .* The crew says: Stopped from the dashboard$/,
    );
  });

  it("uses the human status text as error when a failed state has no error", () => {
    expect(parseStatus({ state: "FAILED", status: "Crew failed: quota exceeded" }).error).toBe("Crew failed: quota exceeded");
  });

  it("ignores extra fields and malformed optional parts", () => {
    const s = parseStatus({
      state: "RUNNING",
      usage_metrics: { tokens: 5 },
      events: [],
      last_step: {},
      progress: "half",
      last_executed_task: "oops",
    });
    expect(s).toEqual({ rawState: "RUNNING", phase: "running" });
  });

  it("rejects bodies without a state or that are not objects", () => {
    invalidResponse(() => parseStatus({ result: "x" }));
    invalidResponse(() => parseStatus({ state: "" }));
    invalidResponse(() => parseStatus("SUCCESS"));
    invalidResponse(() => parseStatus([{ state: "SUCCESS" }]));
  });
});

describe("parseWebhook step", () => {
  it("summarises a tool call", () => {
    const e = parseWebhook("step", {
      kickoff_id: "k1",
      thought: "I should search",
      tool: "search_tool",
      tool_input: '{"query": "crew ai"}',
      result: "3 hits",
      meta: { requestId: "r" },
    });
    expect(e).toEqual({
      kind: "step",
      runId: "k1",
      thought: "I should search",
      tool: "search_tool",
      toolInput: '{"query": "crew ai"}',
      result: "3 hits",
      summary: '🔧 search_tool: {"query": "crew ai"}',
    });
  });

  it("summarises a thought on one line, capped", () => {
    const e = parseWebhook("step", { execution_id: "k2", thought: `line one\n\nline two ${"x".repeat(400)}` });
    expect(e.runId).toBe("k2");
    expect(e.kind === "step" && e.summary.startsWith("💭 line one line two")).toBe(true);
    expect(e.kind === "step" && e.summary.length).toBeLessThanOrEqual(300);
    expect(e.kind === "step" && e.summary.endsWith("…")).toBe(true);
    // Cut where an emoji sits: never half of it (a lone surrogate is no JSON PostgreSQL stores).
    const emoji = parseWebhook("step", { execution_id: "k2", thought: `${"a".repeat(295)}😀 and more` });
    expect(emoji.kind === "step" && Buffer.from(emoji.summary).toString()).toBe(emoji.kind === "step" && emoji.summary);
  });

  it("reads the older {action, task_id} form, task_id being the run id", () => {
    expect(parseWebhook("step", { action: "Searching the web", task_id: "k3" })).toEqual({
      kind: "step",
      runId: "k3",
      summary: "⚙️ Searching the web",
    });
  });

  it("stringifies an object tool input", () => {
    const e = parseWebhook("step", { kickoff_id: "k", tool: "calc", tool_input: { a: 1 } });
    expect(e.kind === "step" && e.summary).toBe('🔧 calc: { "a": 1 }');
  });

  it("still gives a summary for an empty step", () => {
    expect(parseWebhook("step", {})).toEqual({ kind: "step", summary: "⚙️ Working…" });
  });
});

describe("parseWebhook task", () => {
  const base = { kickoff_id: "k1", name: "review_draft", description: "Review", agent: "Editor", output: "Draft text" };

  it("keeps the task id apart (the resume key when nothing better names one)", () => {
    expect(parseWebhook("task", { ...base, task_id: "t-1", expected_output: "x", summary: "s" })).toEqual({
      kind: "task",
      runId: "k1",
      taskKey: "t-1",
      taskId: "t-1",
      name: "review_draft",
      description: "Review",
      agent: "Editor",
      output: "Draft text",
    });
  });

  it.each([
    [{ taskId: "t-2" }, "t-2"],
    [{ id: "t-3" }, "t-3"],
    [{ id: 4 }, "4"],
    [{}, "review_draft"],
    [{ task_id: "", taskId: "t-5" }, "t-5"],
  ])("falls back through taskId, id and name (%o)", (ids, key) => {
    const e = parseWebhook("task", { ...base, ...ids });
    expect(e.kind === "task" && e.taskKey).toBe(key);
  });

  it("rejects a task with neither id nor name", () => {
    const e = invalidResponse(() => parseWebhook("task", { kickoff_id: "k1", output: "x" }, "research"));
    expect(e.operation).toBe("webhook");
    expect(e.crewName).toBe("research");
  });

  it("reads the run id from execution_id", () => {
    expect(parseWebhook("task", { execution_id: "k9", task_id: "t", output: "o" }).runId).toBe("k9");
  });

  it("never takes task_id as run id for a task", () => {
    expect(parseWebhook("task", { task_id: "t", output: "o" }).runId).toBeUndefined();
  });

  it("picks output, then output_json, then summary", () => {
    const out = (extra: object) => {
      const e = parseWebhook("task", { task_id: "t", ...extra });
      return e.kind === "task" ? e.output : undefined;
    };
    expect(out({ output: "text", output_json: { a: 1 }, summary: "s" })).toBe("text");
    expect(out({ output: "", output_json: { a: 1 }, summary: "s" })).toBe('{\n  "a": 1\n}');
    expect(out({ summary: "Short summary" })).toBe("Short summary");
    expect(out({ output: { b: [1] } })).toBe('{\n  "b": [\n    1\n  ]\n}');
    expect(out({})).toBe("");
  });

  it("keeps an output given as deeply nested JSON compact: indenting it would multiply it (a 200 KB body became 12.6 MB)", () => {
    let nested: unknown = Array.from({ length: 20_000 }, () => 0);
    for (let i = 0; i < 60; i++) nested = [nested];
    const body = { task_id: "t", output: nested };
    const e = parseWebhook("task", body) as { output: string };
    expect(e.output).toBe(JSON.stringify(nested));
    expect(e.output.length).toBeLessThan(JSON.stringify(body).length);
  });

  it("bounds a task's name alike from every source (webhook, human-input request, status): its start and a hash of the whole", () => {
    const long = `Research ${Array.from({ length: 2_000 }, (_, i) => i.toString(36)).join(" ")}`;
    const fromTask = (parseWebhook("task", { name: long, output: "o" }) as { name: string; taskKey: string }).name;
    expect(fromTask.length).toBeLessThanOrEqual(TASK_NAME_MAX);
    expect(fromTask.startsWith("Research 0 1 2")).toBe(true);
    expect((parseWebhook("task", { name: long, output: "o" }) as { taskKey: string }).taskKey).toBe(fromTask);
    expect((parseWebhook("input", { task_name: long, task_output: "o" }) as { name: string }).name).toBe(fromTask);
    expect(parseStatus({ state: "PENDING_HUMAN_INPUT", last_executed_task: { name: long, output: "o" } }).lastTask?.name).toBe(fromTask);
    // Another long name with the same start is another task.
    expect((parseWebhook("task", { name: `${long}!`, output: "o" }) as { name: string }).name).not.toBe(fromTask);
    // A short one stays as it is.
    expect((parseWebhook("task", { name: "research_task", output: "o" }) as { name: string }).name).toBe("research_task");
  });

  it("keeps a cut name whole for /resume only when no task id names the task, and only up to WHOLE_NAME_MAX", () => {
    const long = `Research ${"vents ".repeat(100)}`;
    expect((parseWebhook("task", { name: long, output: "o" }) as { wholeName?: string }).wholeName).toBe(long);
    expect((parseWebhook("input", { task_name: long, task_output: "o" }) as { wholeName?: string }).wholeName).toBe(long);
    expect(parseStatus({ state: "PENDING_HUMAN_INPUT", last_executed_task: { name: long, output: "o" } }).lastTask?.wholeName).toBe(long);
    // An id names it, a name short enough stays whole, a name past the bound has no whole to send.
    expect((parseWebhook("input", { task_id: "t1", name: long, output: "o" }) as { wholeName?: string }).wholeName).toBeUndefined();
    expect((parseWebhook("task", { name: "research_task", output: "o" }) as { wholeName?: string }).wholeName).toBeUndefined();
    expect((parseWebhook("task", { name: "x".repeat(WHOLE_NAME_MAX + 1), output: "o" }) as { wholeName?: string }).wholeName).toBeUndefined();
  });

  it("takes an id of more than 200 characters for no id (ids are stored, indexed and sent back whole)", () => {
    expect((parseWebhook("task", { task_id: "x".repeat(201), name: "n", output: "o" }) as { taskId?: string; taskKey: string }).taskKey).toBe("n");
    expect((parseWebhook("task", { task_id: "x".repeat(200), output: "o" }) as { taskId?: string }).taskId).toBe("x".repeat(200));
  });
});

describe("a run's error given as an object", () => {
  it.each([
    [{ message: "Model quota exceeded", traceback: "Traceback …" }, "Model quota exceeded"],
    [{ type: "ValueError", value: "topic is required", traceback: "Traceback …" }, "ValueError: topic is required"],
    [
      { traceback: "Traceback (most recent call last):\n  File \"/app/main.py\", line 3\nKeyError: 'topic'" },
      "Traceback (most recent call last):\n  File \"/app/main.py\", line 3\nKeyError: 'topic'",
    ],
  ])("is read by its words: %j", (error, words) => {
    expect((parseWebhook("crew", { kickoff_id: "k", error }) as { error?: string }).error).toBe(words);
  });
});

describe("parseWebhook crew", () => {
  it("reads a string result", () => {
    expect(parseWebhook("crew", { kickoff_id: "k1", result: "Final", token_usage: {} })).toEqual({
      kind: "crew",
      runId: "k1",
      output: "Final",
    });
  });

  it("reads an object result with output", () => {
    const e = parseWebhook("crew", { kickoff_id: "k1", result: { output: "Final", tasks: [] } });
    expect(e.kind === "crew" && e.output).toBe("Final");
  });

  it("pretty-prints an object result without output", () => {
    const e = parseWebhook("crew", { kickoff_id: "k1", result: { score: 3 } });
    expect(e.kind === "crew" && e.output).toBe('{\n  "score": 3\n}');
  });

  it("prefers result_json", () => {
    const e = parseWebhook("crew", { kickoff_id: "k1", result: "raw", result_json: { a: 1 } });
    expect(e.kind === "crew" && e.output).toBe('{\n  "a": 1\n}');
  });

  it("sets error from `error` or a failed state", () => {
    const withError = parseWebhook("crew", { kickoff_id: "k1", result: "", error: "LLM quota" });
    expect(withError).toEqual({ kind: "crew", runId: "k1", output: "", error: "LLM quota" });
    const failed = parseWebhook("crew", { kickoff_id: "k1", state: "FAILED" });
    expect(failed.kind === "crew" && failed.error).toBe("The crew reported FAILED.");
    const cancelled = parseWebhook("crew", { kickoff_id: "k1", state: "CANCELLED", result: "" });
    expect(cancelled.kind === "crew" && cancelled.error).toBe("The crew reported CANCELLED.");
    const ok = parseWebhook("crew", { kickoff_id: "k1", state: "SUCCESS", result: "r" });
    expect(ok.kind === "crew" && ok.error).toBeUndefined();
  });

  it("rejects non-object bodies of every kind", () => {
    for (const kind of ["step", "task", "crew"] as const) {
      for (const body of [null, "text", 3, [{ kickoff_id: "k" }], undefined]) {
        invalidResponse(() => parseWebhook(kind, body));
      }
    }
  });
});

describe("response and error bodies", () => {
  it("reads the kickoff id under its three names", () => {
    expect(parseKickoff({ kickoff_id: "a" })).toEqual({ kickoffId: "a" });
    expect(parseKickoff({ id: "b" })).toEqual({ kickoffId: "b" });
    expect(parseKickoff({ kickoffId: "c" })).toEqual({ kickoffId: "c" });
    expect(parseKickoff({ execution_id: "d", id: "other" })).toEqual({ kickoffId: "d" });
    expect(parseKickoff({ executionId: "e" })).toEqual({ kickoffId: "e" });
    invalidResponse(() => parseKickoff({ status: "ok" }));
  });

  it("reads resume answers leniently", () => {
    expect(parseResume({ status: "resumed", message: "Execution resumed successfully" })).toEqual({
      status: "resumed",
      message: "Execution resumed successfully",
    });
    expect(parseResume({ status: "Retrying" })).toEqual({ status: "retrying" });
    expect(parseResume({ status: "queued", message: "ok" })).toEqual({ message: "ok" });
    expect(parseResume(undefined)).toEqual({});
  });

  it("reads error bodies of both families", () => {
    expect(parseErrorBody({ error: "Validation Error", message: "Missing inputs", details: { missing_inputs: ["topic"] } })).toEqual({
      serviceMessage: "Validation Error: Missing inputs",
      missingInputs: ["topic"],
    });
    expect(parseErrorBody({ missing_inputs: ["a", "b"] })).toEqual({ missingInputs: ["a", "b"] });
    expect(parseErrorBody({ detail: "Execution is not in pending human input state" })).toEqual({
      serviceMessage: "Execution is not in pending human input state",
    });
    expect(
      parseErrorBody({
        detail: [
          { loc: ["body", "inputs", "topic"], msg: "field required", type: "missing" },
          { loc: ["body", "inputs"], msg: "bad", type: "x" },
        ],
      }),
    ).toEqual({ serviceMessage: "topic: field required; bad", missingInputs: ["topic"], invalidInputs: [{ name: "", message: "bad" }] });
    // A value refused is not a missing input: it is named with the crew's words (pydantic v1 and v2 spellings of "missing" alike).
    expect(
      parseErrorBody({
        detail: [
          { loc: ["body", "inputs", "year"], msg: "value is not a valid integer", type: "type_error.integer" },
          { loc: ["body", "inputs", "year"], msg: "second word on it" },
          { loc: ["body", "inputs", "topic"], msg: "field required", type: "value_error.missing" },
          { loc: ["body", "inputs", "audience"], msg: "Field required", type: "missing" },
          { loc: ["body", "inputs"], msg: "bad", type: "x" },
        ],
      }),
    ).toEqual({
      serviceMessage: "year: value is not a valid integer; year: second word on it; topic: field required; audience: Field required; bad",
      missingInputs: ["topic", "audience"],
      invalidInputs: [
        { name: "year", message: "value is not a valid integer" },
        { name: "", message: "bad" },
      ],
    });
    expect(parseErrorBody({ detail: Array.from({ length: 500 }, (_, i) => ({ loc: ["body", "inputs", `in${i}`], msg: "too long" })) }).invalidInputs).toHaveLength(
      MISSING_INPUTS_MAX,
    );
    expect(parseErrorBody("<html>Bad gateway</html>")).toEqual({});
    // Missing names are read as /inputs names are: trimmed, at most 200 characters, once each, bounded.
    expect(parseErrorBody({ missing_inputs: [" audience ", "audience", "x".repeat(201), 7, ""] })).toEqual({ missingInputs: ["audience"] });
    expect(parseErrorBody({ missing_inputs: Array.from({ length: 500 }, (_, i) => `in${i}`) }).missingInputs).toHaveLength(MISSING_INPUTS_MAX);
    expect(parseErrorBody("Not Found")).toEqual({ serviceMessage: "Not Found" });
  });

  it("reads a 422 item as missing only by pydantic's type, v1's exact 'field required' or no msg; a value refused in words that say 'required' is refused", () => {
    const topic = { loc: ["body", "inputs", "topic"], msg: "Value error, a topic is required to be in English", type: "value_error" };
    expect(parseErrorBody({ detail: [topic] })).toEqual({
      serviceMessage: "topic: Value error, a topic is required to be in English",
      invalidInputs: [{ name: "topic", message: "Value error, a topic is required to be in English" }],
    });
    expect(parseErrorBody({ detail: [{ loc: ["body", "inputs", "code"], msg: "the missing piece must be 3 letters", type: "string_pattern_mismatch" }] })).toMatchObject({
      invalidInputs: [{ name: "code", message: "the missing piece must be 3 letters" }],
    });
    expect(
      parseErrorBody({
        detail: [
          { loc: ["body", "inputs", "a"], msg: "anything", type: "missing" },
          { loc: ["body", "inputs", "b"], msg: "anything", type: "value_error.missing" },
          { loc: ["body", "inputs", "c"], msg: " FIELD REQUIRED " },
          { loc: ["body", "inputs", "d"] },
        ],
      }),
    ).toMatchObject({ missingInputs: ["a", "b", "c", "d"] });
  });

  it("reads a 422 item as about an input only when its loc names one after 'inputs'; any other item is refused in its words, named by no input", () => {
    const detail = [
      { loc: ["body", "meta"], msg: "Extra inputs are not permitted", type: "extra_forbidden" },
      { loc: ["body", "taskWebhookUrl"], msg: "Field required", type: "missing" },
      { loc: ["body", "webhooks", "authentication", "token"], msg: "String should have at least 1 character", type: "string_too_short" },
      { loc: ["body", "meta"], msg: "Extra inputs are not permitted", type: "extra_forbidden" },
      { loc: ["body", "inputs", "year"], msg: "Field required", type: "missing" },
    ];
    expect(parseErrorBody({ detail })).toEqual({
      serviceMessage:
        "meta: Extra inputs are not permitted; taskWebhookUrl: Field required; token: String should have at least 1 character; meta: Extra inputs are not permitted; year: Field required",
      missingInputs: ["year"],
      invalidInputs: [
        { name: "", message: "meta: Extra inputs are not permitted" },
        { name: "", message: "taskWebhookUrl: Field required" },
        { name: "", message: "token: String should have at least 1 character" },
      ],
    });
  });
});
