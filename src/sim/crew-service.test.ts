import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { type SimCrewOptions, type SimCrewService, type SimTask, startCrewService } from "./crew-service.js";

// ---------------------------------------------------------------------------
// Helpers

const TOKEN = "org-token";
const USER_TOKEN = "user-token";

interface Received {
  path: string;
  body: Record<string, unknown>;
  authorization?: string;
}

interface Receiver {
  url: string;
  received: Received[];
  of(path: string): Record<string, unknown>[];
  close(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
      } catch {
        body = { unparsable: true };
      }
      received.push({ path: req.url ?? "/", body, authorization: req.headers.authorization });
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    of: (path) => received.filter((r) => r.path === path).map((r) => r.body),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

async function sim(opts: Partial<SimCrewOptions> = {}): Promise<SimCrewService> {
  // Most of this file checks the seed interface; the deployed mode has its own tests below.
  const s = await startCrewService({ token: TOKEN, userToken: USER_TOKEN, mode: "seed", ...opts });
  cleanups.push(() => s.close());
  return s;
}

async function receiver(): Promise<Receiver> {
  const r = await startReceiver();
  cleanups.push(() => r.close());
  return r;
}

async function call(s: SimCrewService, method: string, path: string, body?: unknown, token: string | null = TOKEN): Promise<{ status: number; json: any; text: string }> {
  const headers: Record<string, string> = {};
  if (token !== null) headers["authorization"] = `Bearer ${token}`;
  let payload: string | undefined;
  if (body !== undefined) {
    headers["content-type"] = "application/json";
    payload = typeof body === "string" ? body : JSON.stringify(body);
  }
  const res = await fetch(s.url + path, { method, headers, body: payload });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    /* text body */
  }
  return { status: res.status, json, text };
}

function hooks(r: Receiver, kinds: ("task" | "step" | "crew")[] = ["task", "step", "crew"]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of kinds) out[`${k}WebhookUrl`] = `${r.url}/${k}`;
  return out;
}

const FAST: SimTask[] = [
  { id: "t-research", name: "research_task", agent: "Researcher", humanInput: true, delayMs: 15, steps: 2 },
  { id: "t-write", name: "writing_task", agent: "Writer", humanInput: true, delayMs: 15, steps: 2 },
];

// ---------------------------------------------------------------------------

describe("crew simulator: discovery and auth", () => {
  it("answers GET /inputs in the three shapes and GET / with Healthy", async () => {
    const s = await sim({ inputs: ["topic", "audience"] });
    expect((await call(s, "GET", "/inputs")).json).toEqual({ inputs: ["topic", "audience"] });

    s.setOptions({ inputsShape: "objects" });
    const objects = await call(s, "GET", "/inputs");
    expect(objects.json.inputs).toHaveLength(2);
    expect(objects.json.inputs[0]).toMatchObject({ name: "topic", type: "string", required: true });

    s.setOptions({ inputsShape: "map" });
    const map = await call(s, "GET", "/inputs");
    expect(Object.keys(map.json.inputs)).toEqual(["topic", "audience"]);
    expect(typeof map.json.inputs.topic).toBe("string");

    const health = await call(s, "GET", "/", undefined, null);
    expect(health.status).toBe(200);
    expect(health.text).toBe("Healthy");
  });

  it("defaults to a single declared input", async () => {
    const s = await sim();
    expect((await call(s, "GET", "/inputs")).json).toEqual({ inputs: ["topic"] });
  });

  it("rejects missing / wrong tokens and limits the user token to inputs and status", async () => {
    const s = await sim();
    const unauthorized = { error: "Unauthorized", message: "Invalid bearer token" };

    const none = await call(s, "GET", "/inputs", undefined, null);
    expect(none.status).toBe(401);
    expect(none.json).toEqual(unauthorized);
    expect((await call(s, "GET", "/inputs", undefined, "nope")).status).toBe(401);

    expect((await call(s, "GET", "/inputs", undefined, USER_TOKEN)).status).toBe(200);
    const kick = await call(s, "POST", "/kickoff", { inputs: { topic: "x" } }, USER_TOKEN);
    expect(kick.status).toBe(401);
    expect(kick.json).toEqual(unauthorized);
    const resume = await call(s, "POST", "/resume", { execution_id: "a", task_id: "b", human_feedback: "", is_approve: true }, USER_TOKEN);
    expect(resume.status).toBe(401);

    const ok = await call(s, "POST", "/kickoff", { inputs: { topic: "x" } });
    expect(ok.status).toBe(200);
    const st = await call(s, "GET", `/${ok.json.kickoff_id}/status`, undefined, USER_TOKEN);
    expect(st.status).toBe(200);
    expect(s.requests.some((r) => r.path === "/kickoff" && r.headers["authorization"] === `Bearer ${USER_TOKEN}`)).toBe(true);
  });

  it("validates kickoff bodies: 422 for missing inputs, 400 for non-JSON", async () => {
    const s = await sim({ inputs: ["topic", "audience"] });
    const absent = await call(s, "POST", "/kickoff", { inputs: { topic: "AI" } });
    expect(absent.status).toBe(422);
    expect(absent.json).toEqual({
      error: "Validation error",
      message: "Missing required inputs",
      details: { missing_inputs: ["audience"] },
    });
    const empty = await call(s, "POST", "/kickoff", { inputs: { topic: "", audience: "devs" } });
    expect(empty.status).toBe(422);
    expect(empty.json.details.missing_inputs).toEqual(["topic"]);
    const noInputs = await call(s, "POST", "/kickoff", {});
    expect(noInputs.json.details.missing_inputs).toEqual(["topic", "audience"]);

    const bad = await call(s, "POST", "/kickoff", "{not json");
    expect(bad.status).toBe(400);
    expect((await call(s, "POST", "/kickoff", "[1,2]")).status).toBe(400);
    // still serving after bad bodies
    expect((await call(s, "GET", "/inputs")).status).toBe(200);
    expect(s.executions.size).toBe(0);
  });
});

describe("crew simulator: runs, review and webhooks", () => {
  it("runs research → pause → approve → write → pause → approve → completion", async () => {
    const s = await sim({ inputs: ["topic", "audience"], tasks: FAST });
    const r = await receiver();
    const meta = { requestId: "req-1", source: "test" };
    const kick = await call(s, "POST", "/kickoff", {
      inputs: { topic: "Vector databases", audience: "CTOs" },
      meta,
      ...hooks(r),
    });
    expect(kick.status).toBe(200);
    const id = kick.json.kickoff_id as string;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);

    await s.waitFor(() => r.of("/task").length === 1);
    const steps1 = r.of("/step");
    expect(steps1).toHaveLength(2);
    expect(steps1[0]).toMatchObject({ kickoff_id: id, meta });
    expect(steps1.some((st) => typeof st["tool"] === "string")).toBe(true);
    const task1 = r.of("/task")[0]!;
    expect(task1).toMatchObject({ task_id: "t-research", name: "research_task", agent: "Researcher", kickoff_id: id, meta });
    expect(typeof task1["description"]).toBe("string");
    expect(typeof task1["expected_output"]).toBe("string");
    expect(task1["output"]).toContain("Vector databases");
    expect(task1["output"]).toContain("CTOs");
    expect(String(task1["output"]).split("\n").length).toBeGreaterThan(3);

    const paused = await call(s, "GET", `/${id}/status`);
    expect(paused.json).toMatchObject({
      state: "PAUSED",
      result: "",
      last_executed_task: { task_id: "t-research", agent: "Researcher", name: "research_task", output: task1["output"] },
      progress: { unit: "tasks", completed: 1, total: 2, current_agent: "Researcher" },
    });
    expect(typeof paused.json.status).toBe("string");

    const res1 = await call(s, "POST", "/resume", {
      execution_id: id,
      task_id: "t-research",
      human_feedback: "Looks good",
      is_approve: true,
      ...hooks(r),
    });
    expect(res1.status).toBe(200);
    expect(res1.json).toEqual({ status: "resumed", message: "Execution resumed successfully" });

    await s.waitFor(() => r.of("/task").length === 2);
    const task2 = r.of("/task")[1]!;
    expect(task2).toMatchObject({ task_id: "t-write", agent: "Writer", kickoff_id: id });
    expect(s.executions.get(id)?.state).toBe("PAUSED");

    const res2 = await call(s, "POST", "/resume", {
      execution_id: id,
      task_id: "t-write",
      human_feedback: "",
      is_approve: true,
      ...hooks(r),
    });
    expect(res2.json.status).toBe("completed");

    await s.waitFor(() => r.of("/crew").length === 1);
    const crew = r.of("/crew")[0]!;
    expect(crew).toMatchObject({ kickoff_id: id, result: task2["output"], meta });
    expect((crew["token_usage"] as { total_tokens: number }).total_tokens).toBeGreaterThan(0);

    const done = await call(s, "GET", `/${id}/status`);
    expect(done.json).toMatchObject({
      state: "SUCCESS",
      result: task2["output"],
      progress: { completed: 2, total: 2 },
    });
    // order of deliveries is preserved and every one was recorded with its status
    expect(s.webhookDeliveries.map((d) => d.kind)).toEqual(["step", "step", "task", "step", "step", "task", "crew"]);
    expect(s.webhookDeliveries.every((d) => d.status === 200)).toBe(true);
    // each with the time it was sent, in sending order
    const sent = s.webhookDeliveries.map((d) => d.sentAt);
    expect(sent).toEqual([...sent].sort((a, b) => a - b));
    expect(sent[0]).toBeGreaterThan(Date.now() - 60_000);
  });

  it("deployed mode: task webhooks without task_id, a human-input request with the given bearer token, PENDING_HUMAN_INPUT while paused", async () => {
    const s = await sim({ mode: "deployed", tasks: [{ id: "t-auto", name: "auto_task", agent: "A", delayMs: 5, steps: 0 }, ...FAST] });
    const r = await receiver();
    const humanInputWebhook = { url: `${r.url}/input`, authentication: { strategy: "bearer", token: "hi-token" } };
    const { json } = await call(s, "POST", "/kickoff", { inputs: { topic: "Tides" }, ...hooks(r), humanInputWebhook });
    const id = json.kickoff_id as string;
    await s.waitFor(() => r.of("/input").length === 1);
    const tasks = r.of("/task");
    expect(tasks.map((t) => t["name"])).toEqual(["auto_task", "research_task"]);
    expect(tasks.every((t) => !("task_id" in t))).toBe(true);
    const input = r.received.find((x) => x.path === "/input")!;
    expect(input.authorization).toBe("Bearer hi-token");
    expect(input.body).toMatchObject({ execution_id: id, task_id: "t-research", name: "research_task", task_output: tasks[1]!["output"] });
    const status = await call(s, "GET", `/status/${id}`);
    expect(status.json).toMatchObject({ state: "PENDING_HUMAN_INPUT", status: "Pending Human Input", last_executed_task: { task_id: "t-research" } });
    // The resume must carry the human-input webhook again, or the next request goes nowhere.
    await call(s, "POST", "/resume", { execution_id: id, task_id: "t-research", human_feedback: "ok", is_approve: true, ...hooks(r) });
    await s.waitFor(() => r.of("/task").length === 3);
    // The run has ended and sent everything it was going to.
    await s.waitFor(() => !s.busy);
    expect(r.of("/input")).toHaveLength(1);
  });

  it("reject → retrying, round 2 task webhook for the same task_id mentions the feedback", async () => {
    const s = await sim({ tasks: FAST });
    const r = await receiver();
    const { json } = await call(s, "POST", "/kickoff", { inputs: { topic: "Edge AI" }, ...hooks(r, ["task"]) });
    const id = json.kickoff_id as string;
    await s.waitFor(() => r.of("/task").length === 1);

    const res = await call(s, "POST", "/resume", {
      execution_id: id,
      task_id: "t-research",
      human_feedback: "Add more numbers",
      is_approve: false,
      ...hooks(r, ["task"]),
    });
    expect(res.json).toEqual({ status: "retrying", message: "Task will be retried with your feedback" });
    await s.waitFor(() => r.of("/task").length === 2);
    const retry = r.of("/task")[1]!;
    expect(retry["task_id"]).toBe("t-research");
    expect(retry["output"]).toContain("round 2");
    expect(retry["output"]).toContain("Add more numbers");
    expect(retry["output"]).not.toBe(r.of("/task")[0]!["output"]);
    const st = await call(s, "GET", `/${id}/status`);
    expect(st.json.state).toBe("PAUSED");
    expect(st.json.last_executed_task.task_id).toBe("t-research");
  });

  it("passes inputs, round and feedback to output functions and completes without review", async () => {
    const seen: { round: number; feedback: string[] }[] = [];
    const s = await sim({
      tasks: [
        { id: "a", name: "a", agent: "A", delayMs: 5, steps: 0, output: (ctx) => `A for ${ctx.inputs["topic"]}` },
        {
          id: "b",
          name: "b",
          agent: "B",
          delayMs: 5,
          steps: 0,
          output: (ctx) => {
            seen.push({ round: ctx.round, feedback: ctx.feedback });
            return "final";
          },
        },
      ],
    });
    const r = await receiver();
    const { json } = await call(s, "POST", "/kickoff", { inputs: { topic: "T" }, ...hooks(r) });
    await s.waitFor(() => r.of("/crew").length === 1);
    expect(r.of("/task").map((t) => t["output"])).toEqual(["A for T", "final"]);
    expect(r.of("/step")).toHaveLength(0);
    expect(r.of("/crew")[0]).toMatchObject({ kickoff_id: json.kickoff_id, result: "final" });
    expect(seen).toEqual([{ round: 1, feedback: [] }]);
    expect(r.of("/crew")[0]).not.toHaveProperty("meta");
  });

  it("drops webhook URLs omitted on resume (no more step deliveries)", async () => {
    const s = await sim({ tasks: FAST });
    const r = await receiver();
    const { json } = await call(s, "POST", "/kickoff", { inputs: { topic: "x" }, ...hooks(r) });
    const id = json.kickoff_id as string;
    await s.waitFor(() => r.of("/task").length === 1);
    const stepsBefore = r.of("/step").length;
    expect(stepsBefore).toBe(2);

    await call(s, "POST", "/resume", {
      execution_id: id,
      task_id: "t-research",
      human_feedback: "ok",
      is_approve: true,
      taskWebhookUrl: `${r.url}/task`,
      crewWebhookUrl: `${r.url}/crew`,
    });
    await s.waitFor(() => r.of("/task").length === 2);
    expect(r.of("/step")).toHaveLength(stepsBefore);
    expect(s.executions.get(id)?.webhooks).toEqual({ task: `${r.url}/task`, crew: `${r.url}/crew` });

    // nothing at all on the last resume: the completion is not delivered
    const last = await call(s, "POST", "/resume", { execution_id: id, task_id: "t-write", human_feedback: "", is_approve: true });
    expect(last.json.status).toBe("completed");
    await s.waitFor(() => s.executions.get(id)?.state === "SUCCESS");
    await s.waitFor(() => !s.busy);
    expect(r.of("/crew")).toHaveLength(0);
  });

  it("answers 400 / 404 / 422 on bad resumes and unknown executions", async () => {
    const s = await sim({
      tasks: [{ id: "slow", name: "slow_task", agent: "Slow", humanInput: true, delayMs: 150, steps: 0 }],
    });
    const { json } = await call(s, "POST", "/kickoff", { inputs: { topic: "x" } });
    const id = json.kickoff_id as string;

    const notPaused = await call(s, "POST", "/resume", { execution_id: id, task_id: "slow", human_feedback: "", is_approve: true });
    expect(notPaused.status).toBe(400);
    expect(notPaused.json).toEqual({ error: "Bad request", message: "Execution is not in pending human input state" });

    const running = await call(s, "GET", `/${id}/status`);
    expect(["PENDING", "RUNNING"]).toContain(running.json.state);
    expect(running.json.result).toBe("");

    const unknown = await call(s, "POST", "/resume", {
      execution_id: "00000000-0000-4000-8000-000000000000",
      task_id: "slow",
      human_feedback: "",
      is_approve: true,
    });
    expect(unknown.status).toBe(404);

    const missing = await call(s, "POST", "/resume", { execution_id: id, task_id: "slow" });
    expect(missing.status).toBe(422);
    expect(missing.json.details.missing_fields).toEqual(["human_feedback", "is_approve"]);
    const camel = await call(s, "POST", "/resume", { executionId: id, taskId: "slow", humanFeedback: "", isApprove: true });
    expect(camel.status).toBe(422);

    const st = await call(s, "GET", "/00000000-0000-4000-8000-000000000000/status");
    expect(st.status).toBe(404);
    expect(st.json).toEqual({ error: "Not found" });

    await s.waitFor(() => s.executions.get(id)?.state === "PAUSED", 2000);
    const wrongTask = await call(s, "POST", "/resume", { execution_id: id, task_id: "other", human_feedback: "", is_approve: true });
    expect(wrongTask.status).toBe(400);
  });

  it("serves only the legacy or only the spec status path when asked", async () => {
    const s = await sim({ statusPath: "legacy", tasks: FAST });
    const { json } = await call(s, "POST", "/kickoff", { inputs: { topic: "x" } });
    const id = json.kickoff_id as string;
    expect((await call(s, "GET", `/status/${id}`)).status).toBe(200);
    const spec = await call(s, "GET", `/${id}/status`);
    expect(spec.status).toBe(404);
    expect(spec.json).toEqual({ error: "Not found" });

    s.setOptions({ statusPath: "spec" });
    expect((await call(s, "GET", `/${id}/status`)).status).toBe(200);
    expect((await call(s, "GET", `/status/${id}`)).status).toBe(404);

    s.setOptions({ statusPath: "both" });
    expect((await call(s, "GET", `/${id}/status`)).status).toBe(200);
    expect((await call(s, "GET", `/status/${id}`)).status).toBe(200);
  });

  it("plays scripted failures and failed runs", async () => {
    const s = await sim({
      failWith: [
        { endpoint: "kickoff", status: 503, times: 1, headers: { "retry-after": "1" } },
        { endpoint: "inputs", status: 500, body: { detail: "boom" } },
      ],
      failRun: { afterTask: 1, error: "LLM quota exceeded" },
      tasks: [
        { id: "a", name: "a", agent: "A", delayMs: 5, steps: 1 },
        { id: "b", name: "b", agent: "B", delayMs: 5, steps: 1 },
      ],
    });
    const r = await receiver();
    const inputs = await call(s, "GET", "/inputs");
    expect(inputs.status).toBe(500);
    expect(inputs.json).toEqual({ detail: "boom" });

    const first = await fetch(`${s.url}/kickoff`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ inputs: { topic: "x" } }),
    });
    expect(first.status).toBe(503);
    expect(first.headers.get("retry-after")).toBe("1");
    await first.text();

    const kick = await call(s, "POST", "/kickoff", { inputs: { topic: "x" }, meta: { requestId: "r" }, ...hooks(r) });
    expect(kick.status).toBe(200);
    await s.waitFor(() => r.of("/crew").length === 1);
    expect(r.of("/task")).toHaveLength(1);
    expect(r.of("/crew")[0]).toEqual({ kickoff_id: kick.json.kickoff_id, result: "", error: "LLM quota exceeded", meta: { requestId: "r" } });
    const st = await call(s, "GET", `/${kick.json.kickoff_id}/status`);
    expect(st.json).toMatchObject({ state: "FAILED", error: "LLM quota exceeded", result: "" });

    s.setOptions({ failWith: [] });
    expect((await call(s, "GET", "/inputs")).status).toBe(200);
  });

  it("records failing webhook receivers without crashing", async () => {
    const s = await sim({
      webhookTimeoutMs: 500,
      tasks: [{ id: "a", name: "a", agent: "A", delayMs: 5, steps: 1 }],
    });
    // a port that refuses connections: start a receiver and close it again
    const dead = await startReceiver();
    await dead.close();
    const { json } = await call(s, "POST", "/kickoff", { inputs: { topic: "x" }, ...hooks(dead) });
    await s.waitFor(() => s.webhookDeliveries.length === 3);
    expect(s.webhookDeliveries.map((d) => d.kind)).toEqual(["step", "task", "crew"]);
    expect(s.webhookDeliveries.every((d) => d.status === undefined && typeof d.error === "string")).toBe(true);
    expect(s.executions.get(json.kickoff_id)?.state).toBe("SUCCESS");
    expect((await call(s, "GET", `/${json.kickoff_id}/status`)).json.result).toContain("x");
  });

  it("closes cleanly while executions are mid-run and webhooks are pending", async () => {
    const s = await startCrewService({
      token: TOKEN,
      tasks: [{ id: "a", name: "a", agent: "A", delayMs: 10_000, steps: 3 }],
    });
    const { json } = await call(s, "POST", "/kickoff", { inputs: { topic: "x" } });
    expect(json.kickoff_id).toBeTruthy();
    const started = Date.now();
    await s.close();
    await s.close(); // idempotent
    expect(Date.now() - started).toBeLessThan(1000);
    await expect(fetch(`${s.url}/`)).rejects.toThrow();
  });
});

describe("crew simulator: POST /stop/{kickoff_id}", () => {
  it("stops a running execution: STOPPED, no more webhooks; a second stop is a 409", async () => {
    const s = await sim({ tasks: [{ id: "t-slow", name: "slow_task", agent: "Writer", delayMs: 400, steps: 4 }] });
    const r = await receiver();
    const id = (await call(s, "POST", "/kickoff", { inputs: { topic: "x" }, ...hooks(r) })).json.kickoff_id as string;
    await s.waitFor(() => r.of("/step").length >= 1);
    const stopped = await call(s, "POST", `/stop/${id}`);
    expect(stopped.status).toBe(200);
    expect(s.executions.get(id)?.state).toBe("STOPPED");
    expect((await call(s, "GET", `/${id}/status`)).json).toMatchObject({ state: "STOPPED" });
    const seen = r.received.length;
    // The run's loop notices the stop after its current step's pause, and ends without sending.
    await s.waitFor(() => !s.busy);
    expect(r.received.length).toBe(seen);
    expect(r.of("/task")).toHaveLength(0);
    expect(r.of("/crew")).toHaveLength(0);
    expect((await call(s, "POST", `/stop/${id}`)).status).toBe(409);
  });

  it("answers 404 for an unknown id, 401 without the org token, and a scripted 405 like a deployment without /stop", async () => {
    const s = await sim({ failWith: [{ endpoint: "stop", status: 405 }] });
    expect((await call(s, "POST", "/stop/nope")).status).toBe(405);
    s.setOptions({ failWith: [] });
    expect((await call(s, "POST", "/stop/nope")).status).toBe(404);
    expect((await call(s, "POST", "/stop/nope", undefined, USER_TOKEN)).status).toBe(401);
    expect((await call(s, "GET", "/stop/nope")).status).toBe(405);
  });
});
