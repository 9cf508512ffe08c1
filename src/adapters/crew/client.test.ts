import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { Agent, type Dispatcher } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { type CrewError, isCrewError } from "../../protocols/crew/errors.js";
import { CrewClient, type CrewClientOptions, joinUrl, parseRetryAfter } from "./client.js";

const ORG = "org-secret-token-123";
const USER = "user-secret-token-456";

interface Seen {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: unknown;
}

type Handler = (req: Seen, res: ServerResponse) => void | Promise<void>;

/** A stand-in crew service: records every request and answers through `handler`. */
type Register = (cleanup: () => Promise<void>) => void;
const cleanups: Array<() => Promise<void>> = [];
const atTestEnd: Register = (cleanup) => cleanups.push(cleanup);
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

async function startCrew(handler: Handler, register = atTestEnd) {
  const seen: Seen[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    const entry: Seen = { method: req.method ?? "", path: req.url ?? "", headers: req.headers, body: text ? JSON.parse(text) : undefined };
    seen.push(entry);
    await handler(entry, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  register(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${port}`, seen };
}

function send(res: ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}) {
  const text = body === undefined ? "" : typeof body === "string" ? body : JSON.stringify(body);
  res.writeHead(status, { "content-type": typeof body === "string" ? "text/plain" : "application/json", ...headers });
  res.end(text);
}

function client(baseUrl: string, extra: Partial<CrewClientOptions> = {}, register = atTestEnd) {
  const c = new CrewClient({
    name: "Research",
    baseUrl,
    token: ORG,
    connectTimeoutMs: 500,
    readTimeoutMs: 300,
    retry: { attempts: 3, baseDelayMs: 5 },
    ...extra,
  });
  register(() => c.close());
  return c;
}

async function failure(p: Promise<unknown>): Promise<CrewError> {
  try {
    await p;
  } catch (e) {
    if (isCrewError(e)) return e;
    throw e;
  }
  throw new Error("expected the call to fail");
}

function expectNoSecrets(e: CrewError) {
  for (const text of [e.userMessage(), e.message, e.serviceMessage ?? ""]) {
    expect(text).not.toContain(ORG);
    expect(text).not.toContain(USER);
    expect(text).not.toMatch(/https?:\/\//);
  }
}

/** Answers the four endpoints the way a healthy deployed crew does. */
const healthy: Handler = (req, res) => {
  if (req.path.endsWith("/inputs")) return send(res, 200, { inputs: ["topic"] });
  if (req.path.endsWith("/kickoff")) return send(res, 200, { kickoff_id: "k-1" });
  if (req.path.endsWith("/resume")) return send(res, 200, { status: "resumed", message: "Execution resumed successfully" });
  if (req.path.startsWith("/status/")) return send(res, 200, { state: "SUCCESS", result: "Done" });
  send(res, 404, { detail: "Not Found" });
};

describe("CrewClient requests", () => {
  it("uses the user token for reads and the organization token for writes", async () => {
    const crew = await startCrew(healthy);
    const c = client(crew.url, { userToken: USER });
    await c.listInputs();
    await c.status("k-1");
    await c.kickoff({ inputs: { topic: "AI" } });
    await c.resume({ executionId: "k-1", taskId: "t", humanFeedback: "ok", isApprove: true });

    const auth = Object.fromEntries(crew.seen.map((s) => [`${s.method} ${s.path}`, s.headers.authorization]));
    expect(auth).toEqual({
      "GET /inputs": `Bearer ${USER}`,
      "GET /status/k-1": `Bearer ${USER}`,
      "POST /kickoff": `Bearer ${ORG}`,
      "POST /resume": `Bearer ${ORG}`,
    });
    for (const s of crew.seen) {
      expect(s.headers.accept).toBe("application/json");
      expect(s.headers["content-type"]).toBe(s.method === "POST" ? "application/json" : undefined);
    }
  });

  it("uses the organization token everywhere without a user token", async () => {
    const crew = await startCrew(healthy);
    const c = client(crew.url);
    await c.listInputs();
    await c.status("k-1");
    expect(crew.seen.map((s) => s.headers.authorization)).toEqual([`Bearer ${ORG}`, `Bearer ${ORG}`]);
  });

  it("keeps a path prefix of the base URL, with or without trailing slash", async () => {
    const crew = await startCrew((req, res) => healthy({ ...req, path: req.path.replace("/crews/abc", "") }, res));
    await client(`${crew.url}/crews/abc/`).listInputs();
    await client(`${crew.url}/crews/abc`).kickoff({ inputs: {} });
    expect(crew.seen.map((s) => s.path)).toEqual(["/crews/abc/inputs", "/crews/abc/kickoff"]);
  });

  it("escapes ids in paths", () => {
    expect(joinUrl(new URL("https://x.example/crews/abc/"), ["a/b c", "status"])).toBe("https://x.example/crews/abc/a%2Fb%20c/status");
  });

  it("lists inputs", async () => {
    const crew = await startCrew((_req, res) => send(res, 200, { inputs: { topic: "What to research" } }));
    expect(await client(crew.url).listInputs()).toEqual([{ name: "topic", description: "What to research", required: true }]);
  });

  it("sends the kickoff body field by field, omitting unset fields", async () => {
    const crew = await startCrew(healthy);
    const c = client(crew.url);
    expect(
      await c.kickoff({
        inputs: { topic: "AI", current_year: "2025" },
        meta: { requestId: "r-1", source: "slack" },
        taskWebhookUrl: "https://bot.example/hooks/task/abc",
        stepWebhookUrl: "https://bot.example/hooks/step/abc",
        crewWebhookUrl: "https://bot.example/hooks/crew/abc",
      }),
    ).toEqual({ kickoffId: "k-1" });
    await c.kickoff({ inputs: { topic: "AI" }, crewWebhookUrl: undefined });

    expect(crew.seen[0]?.body).toEqual({
      inputs: { topic: "AI", current_year: "2025" },
      meta: { requestId: "r-1", source: "slack" },
      taskWebhookUrl: "https://bot.example/hooks/task/abc",
      stepWebhookUrl: "https://bot.example/hooks/step/abc",
      crewWebhookUrl: "https://bot.example/hooks/crew/abc",
    });
    expect(crew.seen[1]?.body).toStrictEqual({ inputs: { topic: "AI" } });
  });

  it.each([[{ id: "k-2" }], [{ kickoffId: "k-2" }]])("tolerates the kickoff id as %o", async (answer) => {
    const crew = await startCrew((_req, res) => send(res, 200, answer));
    expect(await client(crew.url).kickoff({ inputs: {} })).toEqual({ kickoffId: "k-2" });
  });

  it("sends the resume body in snake_case with the webhook URLs again", async () => {
    const crew = await startCrew(healthy);
    const result = await client(crew.url).resume({
      executionId: "k-1",
      taskId: "t-1",
      humanFeedback: "Shorter, please",
      isApprove: false,
      taskWebhookUrl: "https://bot.example/hooks/task/abc",
      stepWebhookUrl: "https://bot.example/hooks/step/abc",
      crewWebhookUrl: "https://bot.example/hooks/crew/abc",
    });
    expect(result).toEqual({ status: "resumed", message: "Execution resumed successfully" });
    expect(crew.seen[0]?.body).toStrictEqual({
      execution_id: "k-1",
      task_id: "t-1",
      human_feedback: "Shorter, please",
      is_approve: false,
      taskWebhookUrl: "https://bot.example/hooks/task/abc",
      stepWebhookUrl: "https://bot.example/hooks/step/abc",
      crewWebhookUrl: "https://bot.example/hooks/crew/abc",
    });
  });

  it.each([
    ["an empty body", undefined, {}],
    ["an unknown status", { status: "queued", message: "Queued" }, { message: "Queued" }],
    ["a non-JSON body", "OK", {}],
  ])("tolerates %s from resume", async (_label, answer, expected) => {
    const crew = await startCrew((_req, res) => send(res, 200, answer));
    expect(await client(crew.url).resume({ executionId: "k", taskId: "t", humanFeedback: "", isApprove: true })).toEqual(expected);
  });
});

describe("CrewClient status paths", () => {
  it("asks /status/{id} first, falls back to the spec's /{id}/status and remembers it, still falling back on a later 404", async () => {
    const crew = await startCrew((req, res) => {
      if (req.path === "/k-1/status") return send(res, 200, { state: "RUNNING" });
      if (req.path === "/status/k-2") return send(res, 200, { status: "completed", result: "Done" });
      send(res, 404, { detail: "Not Found" });
    });
    const c = client(crew.url);
    expect(await c.status("k-1")).toMatchObject({ phase: "running" });
    expect(await c.status("k-1")).toMatchObject({ phase: "running" });
    expect(crew.seen.map((s) => s.path)).toEqual(["/status/k-1", "/k-1/status", "/k-1/status"]);

    expect(await c.status("k-2")).toMatchObject({ phase: "succeeded", output: "Done" });
    expect(crew.seen.map((s) => s.path).slice(3)).toEqual(["/k-2/status", "/status/k-2"]);
  });

  it("retries /resume once in the camelCase form after a 422 naming those fields, never after a 400", async () => {
    const crew = await startCrew((req, res) => {
      const body = req.body as Record<string, unknown>;
      if ("execution_id" in body && body.execution_id === "k-camel")
        return send(res, 422, { error: "Validation error", message: "Field required: executionId, taskId, humanFeedback" });
      if ("executionId" in body) return send(res, 200, { status: "resumed" });
      send(res, 400, { error: "Invalid Request", message: "Execution is not in pending human input state" });
    });
    const c = client(crew.url);
    const hook = { url: "https://bot/hooks/x/input/s", authentication: { strategy: "bearer" as const, token: "tok" } };
    expect(await c.resume({ executionId: "k-camel", taskId: "t1", humanFeedback: "ok", isApprove: true, humanInputWebhook: hook })).toEqual({ status: "resumed" });
    const [first, second] = crew.seen.map((s) => s.body as Record<string, unknown>);
    expect(first).toMatchObject({ execution_id: "k-camel", task_id: "t1", human_feedback: "ok", is_approve: true, humanInputWebhook: hook });
    expect(second).toMatchObject({ executionId: "k-camel", taskId: "t1", humanFeedback: "ok", humanInputWebhookUrl: hook.url });
    const e = await failure(c.resume({ executionId: "k-other", taskId: "t1", humanFeedback: "ok", isApprove: true }));
    expect(e.kind).toBe("bad_request");
    expect(crew.seen).toHaveLength(3);
  });

  it("reports not_found when both forms 404", async () => {
    const crew = await startCrew((_req, res) => send(res, 404, { error: "Not Found", message: "Execution not found" }));
    const e = await failure(client(crew.url).status("gone"));
    expect(e.kind).toBe("not_found");
    expect(e.status).toBe(404);
    expect(crew.seen.map((s) => s.path)).toEqual(["/status/gone", "/gone/status"]);
    expect(e.userMessage()).toBe("The crew “Research” has no record of that run (404); it may have expired or never started.");
  });

  it("does not try the other form on errors other than 404", async () => {
    const crew = await startCrew((_req, res) => send(res, 401, { detail: "Invalid token" }));
    expect((await failure(client(crew.url).status("k"))).kind).toBe("unauthorized");
    expect(crew.seen).toHaveLength(1);
  });
});

describe("CrewClient errors", () => {
  it("maps 400 to bad_request and quotes the service", async () => {
    const crew = await startCrew((_req, res) => send(res, 400, { detail: "Execution is not in pending human input state" }));
    const e = await failure(client(crew.url).resume({ executionId: "k", taskId: "t", humanFeedback: "", isApprove: true }));
    expect(e).toMatchObject({ kind: "bad_request", status: 400, operation: "resume", crewName: "Research" });
    expect(e.userMessage()).toBe("The crew “Research” refused the request while sending your review (400): “Execution is not in pending human input state”");
    expect(crew.seen).toHaveLength(1);
  });

  it("hides URLs the service echoes back, webhook URLs being secrets", async () => {
    const crew = await startCrew((_req, res) => send(res, 400, { error: "Bad Request", message: "taskWebhookUrl https://bot.example/hooks/task/s3cr3t is unreachable" }));
    const e = await failure(client(crew.url).kickoff({ inputs: {}, taskWebhookUrl: "https://bot.example/hooks/task/s3cr3t" }));
    expect(e.serviceMessage).toBe("Bad Request: taskWebhookUrl [url] is unreachable");
    expect(e.userMessage()).not.toContain("s3cr3t");
    expectNoSecrets(e);
  });

  it("quotes the start of a message of megabytes, a URL hidden in it whatever precedes its scheme", async () => {
    // "a-a-a-…" made the URL pattern quadratic (its scheme unbounded, from every word start): 4 MB would have held the event loop for an hour.
    const message = `xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxhttps://bot.example/hooks/task/s3cr3t is unreachable ${"a-".repeat(1_500_000)}`;
    const crew = await startCrew((_req, res) => send(res, 400, { message }));
    const e = await failure(client(crew.url).kickoff({ inputs: {} }));
    expect(e.serviceMessage!.length).toBeLessThanOrEqual(300);
    expect(e.serviceMessage).toMatch(/^x+\[url\] is unreachable a-a-a-/);
    expectNoSecrets(e);
  });

  it("never quotes back a webhook's secret or the human-input token it was sent, however the service spells them", async () => {
    const secret = "s3cr3t-webhook-path-segment-0123456789";
    const token = "hi-token-abcdefghijklmnopqrstuvwxyz";
    const hook = (kind: string) => `https://bot.example/hooks/0b6c2a9e-4f0e-4c55-9d8e-1c1a2b3c4d5e/${kind}/${secret}`;
    const echoes = [
      `no route to /hooks/0b6c2a9e-4f0e-4c55-9d8e-1c1a2b3c4d5e/task/${secret}`,
      `bad url ${encodeURIComponent(hook("step"))}`,
      `bad url ${hook("step").replace(/\//g, "\\/")}`,
      `{ "authentication": { "strategy": "bearer", "token": "${token}" } }`,
    ];
    for (const message of echoes) {
      const crew = await startCrew((_req, res) => send(res, 400, { message }));
      const e = await failure(
        client(crew.url).kickoff({
          inputs: {},
          taskWebhookUrl: hook("task"),
          stepWebhookUrl: hook("step"),
          humanInputWebhook: { url: hook("input"), authentication: { strategy: "bearer", token } },
        }),
      );
      expect(`${e.serviceMessage} ${e.userMessage()}`, message).not.toMatch(new RegExp(`${secret}|${token}`));
      expect(e.serviceMessage).toContain("[redacted]");
    }
  });

  it("quotes a service's traceback by its last line only (no stack frame reaches Slack)", async () => {
    const traceback = 'Traceback (most recent call last):\n  File "/app/crew/main.py", line 42, in kickoff\n    run()\nValueError: topic is required';
    const crew = await startCrew((_req, res) => send(res, 400, { detail: traceback }));
    const e = await failure(client(crew.url).kickoff({ inputs: {} }));
    expect(e.serviceMessage).toBe("ValueError: topic is required");
    expect(e.userMessage()).not.toMatch(/main\.py|Traceback/);
  });

  it("quotes a long traceback by its last line too (the reason comes after the part an error text is read to)", async () => {
    const frames = Array.from({ length: 200 }, (_, i) => `  File "/app/crew/step_${i}.py", line ${i}, in run\n    step_${i}()`).join("\n");
    const traceback = `Traceback (most recent call last):\n${frames}\nValueError: the real reason`;
    expect(traceback.length).toBeGreaterThan(10_000);
    const crew = await startCrew((_req, res) => send(res, 400, { detail: traceback }));
    const e = await failure(client(crew.url).kickoff({ inputs: {} }));
    expect(e.serviceMessage).toBe("ValueError: the real reason");
  });

  it.each([401, 403])("maps %i to unauthorized without leaking the token", async (status) => {
    const crew = await startCrew((req, res) => send(res, status, { error: "Unauthorized", message: `bad token ${String(req.headers.authorization)}` }));
    const e = await failure(client(crew.url, { userToken: USER }).listInputs());
    expect(e).toMatchObject({ kind: "unauthorized", status, operation: "inputs" });
    expect(e.userMessage()).toBe(`The crew “Research” rejected Crewline's token (${status}). Ask whoever set up Crewline to check CREW_TOKEN / the crews file.`);
    expect(e.serviceMessage).toBe("Unauthorized: bad token Bearer [redacted]");
    expectNoSecrets(e);
  });

  it("maps 404 on inputs to not_found", async () => {
    const crew = await startCrew((_req, res) => send(res, 404, "Not Found"));
    const e = await failure(client(crew.url).listInputs());
    expect(e).toMatchObject({ kind: "not_found", serviceMessage: "Not Found" });
    expect(e.userMessage()).toContain("CREW_BASE_URL");
  });

  it.each([
    ["details.missing_inputs", { error: "Validation Error", message: "Missing", details: { missing_inputs: ["topic", "year"] } }],
    ["top-level missing_inputs", { missing_inputs: ["topic", "year"] }],
    [
      "a FastAPI detail list",
      {
        detail: [
          { loc: ["body", "inputs", "topic"], msg: "field required" },
          { loc: ["body", "inputs", "year"], msg: "field required" },
        ],
      },
    ],
  ])("maps 422 with %s to missing_inputs", async (_label, body) => {
    const crew = await startCrew((_req, res) => send(res, 422, body));
    const e = await failure(client(crew.url).kickoff({ inputs: {} }));
    expect(e).toMatchObject({ kind: "missing_inputs", status: 422, missingInputs: ["topic", "year"] });
    expect(e.userMessage()).toBe("The crew “Research” needs inputs that were not given: topic, year. Fill them in and try again.");
  });

  it("maps 500 to server with Retry-After, not retrying a POST on 500", async () => {
    const crew = await startCrew((_req, res) => send(res, 500, { error: "boom" }, { "retry-after": "30" }));
    const e = await failure(client(crew.url).kickoff({ inputs: {} }));
    expect(e).toMatchObject({ kind: "server", status: 500, retryAfterSeconds: 30, serviceMessage: "boom" });
    expect(e.userMessage()).toBe("The crew “Research” had a server error (500) while starting a run: “boom”. Try again in 30 seconds.");
    expect(crew.seen).toHaveLength(1);
  });

  it.each([
    ["a non-JSON answer", "<html>hello</html>"],
    ["a JSON answer of the wrong shape", { result: "no state here" }],
  ])("maps %s to invalid_response", async (_label, answer) => {
    const crew = await startCrew((_req, res) => send(res, 200, answer));
    const e = await failure(client(crew.url).status("k"));
    expect(e).toMatchObject({ kind: "invalid_response", operation: "status", crewName: "Research" });
    expect(e.userMessage()).toContain("couldn't read");
  });

  it.each([
    ["in plain text", "Accepted"],
    ["as a login or proxy page", "<html><body>Sign in</body></html>"],
    ["empty", undefined],
  ])("reads a 2xx kickoff answer %s as not the crew's: nothing is taken to have started", async (_label, answer) => {
    const crew = await startCrew((_req, res) => send(res, 200, answer));
    const e = await failure(client(crew.url).kickoff({ inputs: {} }));
    expect(e).toMatchObject({ kind: "invalid_response", operation: "kickoff" });
    expect(e.maybeApplied).toBeFalsy();
  });

  it.each([
    ["without an id", { ok: true }],
    ["with an id longer than 200 characters", { kickoff_id: "k".repeat(201) }],
  ])("reads a 2xx kickoff answer in JSON %s as one it cannot read, but taken: the run may have started", async (_label, answer) => {
    const crew = await startCrew((_req, res) => send(res, 200, answer));
    const e = await failure(client(crew.url).kickoff({ inputs: {} }));
    expect(e).toMatchObject({ kind: "invalid_response", operation: "kickoff", status: 200, maybeApplied: true });
    expect(e.userMessage()).toBe(
      "The crew “Research” answered (200) while starting a run, but Crewline couldn't read the answer. It may have gone through anyway, so check the thread before trying again.",
    );
    expect(crew.seen).toHaveLength(1);
  });

  it("maps a refused connection to unreachable", async () => {
    const e = await failure(client(await closedPortUrl(), { retry: { attempts: 1, baseDelayMs: 1 } }).listInputs());
    expect(e).toMatchObject({ kind: "unreachable", operation: "inputs" });
    expect(e.userMessage()).toBe("Couldn't reach the crew “Research” while listing its inputs. Check that it is deployed and CREW_BASE_URL is right.");
    expectNoSecrets(e);
  });
});

describe("CrewClient answers too large to read", () => {
  const TEN_MIB = 10 * 1024 * 1024;

  it("refuses a 10 MiB answer (sent without a length) as one it cannot read, with a readable message", async () => {
    const crew = await startCrew((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ state: "SUCCESS", result: "x".repeat(TEN_MIB) }));
    });
    const e = await failure(client(crew.url).status("k-1"));
    expect(e.kind).toBe("invalid_response");
    expect(e.message).toMatch(/larger than 4194304 bytes/);
    expect(e.userMessage()).toMatch(/sent an answer Crewline couldn't read while checking a run/);
    expectNoSecrets(e);
  });

  it("stops reading an endless answer, and a 500 with a 10 MiB body is a server error without its text", async () => {
    let written = 0;
    const crew = await startCrew(async (req, res) => {
      if (req.path.endsWith("/kickoff")) {
        res.writeHead(200, { "content-type": "application/json" });
        res.write('{"kickoff_id":"');
        // Endless: writes until the client goes away.
        const chunk = "k".repeat(64 * 1024);
        while (!res.destroyed && written < 64 * 1024 * 1024) {
          written += chunk.length;
          if (!res.write(chunk)) await new Promise((r) => setTimeout(r, 1));
        }
        return;
      }
      send(res, 500, { detail: "d".repeat(TEN_MIB) }, { "content-length": String(TEN_MIB + 13) });
    });
    const c = client(crew.url, { readTimeoutMs: 5000, retry: { attempts: 1, baseDelayMs: 5 } });
    const e = await failure(c.kickoff({ inputs: { topic: "AI" } }));
    // Its 200 came first: the crew took the kickoff.
    expect(e).toMatchObject({ kind: "invalid_response", maybeApplied: true });
    expect(e.message).toMatch(/larger than 4194304 bytes/);
    expect(written).toBeLessThan(32 * 1024 * 1024);
    const server = await failure(c.listInputs());
    expect(server.kind).toBe("server");
    expect(server.serviceMessage).toBeUndefined();
    expect(server.userMessage()).toMatch(/had a server error \(500\)/);
  });
});

describe("CrewClient retries", () => {
  it("retries a GET on 503 with Retry-After: 0", async () => {
    let calls = 0;
    const crew = await startCrew((_req, res) => (++calls === 1 ? send(res, 503, "", { "retry-after": "0" }) : send(res, 200, { inputs: ["topic"] })));
    expect(await client(crew.url).listInputs()).toEqual([{ name: "topic", required: true }]);
    expect(crew.seen).toHaveLength(2);
  });

  it("gives up after the configured attempts", async () => {
    const crew = await startCrew((_req, res) => send(res, 502, "<html>Bad Gateway</html>", { "retry-after": "0" }));
    const e = await failure(client(crew.url).status("k"));
    expect(e).toMatchObject({ kind: "server", status: 502, serviceMessage: undefined });
    expect(crew.seen).toHaveLength(3);
  });

  it("retries a POST kickoff on 503", async () => {
    let calls = 0;
    const crew = await startCrew((_req, res) => (++calls === 1 ? send(res, 503, { error: "cold" }, { "retry-after": "0" }) : send(res, 200, { kickoff_id: "k-9" })));
    expect(await client(crew.url).kickoff({ inputs: { topic: "AI" } })).toEqual({ kickoffId: "k-9" });
    expect(crew.seen.map((s) => s.path)).toEqual(["/kickoff", "/kickoff"]);
  });

  it("never retries a POST on 504 (a gateway stopped waiting: the service may have taken it), but a GET", async () => {
    let calls = 0;
    const crew = await startCrew((_req, res) => (++calls === 1 ? send(res, 504, "Gateway Timeout", { "retry-after": "0" }) : send(res, 200, { inputs: ["topic"] })));
    const e = await failure(client(crew.url).resume({ executionId: "k", taskId: "t", humanFeedback: "", isApprove: true }));
    // It may have gone through: the review is not simply opened again, and the person is told to look first.
    expect(e).toMatchObject({ kind: "server", status: 504, maybeApplied: true });
    expect(e.userMessage()).toMatch(/may have gone through anyway, so check the thread before trying again/);
    expect(crew.seen.map((s) => s.path)).toEqual(["/resume"]);
    calls = 0;
    expect(await client(crew.url).listInputs()).toEqual([{ name: "topic", required: true }]);
    expect(crew.seen.map((s) => s.path)).toEqual(["/resume", "/inputs", "/inputs"]);
  });

  it("never retries a POST resume after the connection is reset", async () => {
    const crew = await startCrew((_req, res) => {
      res.socket?.destroy();
    });
    const e = await failure(client(crew.url).resume({ executionId: "k", taskId: "t", humanFeedback: "ok", isApprove: true }));
    expect(e).toMatchObject({ kind: "unreachable", operation: "resume", maybeApplied: true });
    // Fixed wait: a retry sent in the background (the bug this guards against) leaves nothing else to wait for.
    await sleep(50);
    expect(crew.seen).toHaveLength(1);
  });

  it("retries a POST when the connection was refused", async () => {
    const dispatcher = new CountingAgent();
    cleanups.push(() => dispatcher.close());
    const e = await failure(client(await closedPortUrl(), { dispatcher }).kickoff({ inputs: {} }));
    expect(e).toMatchObject({ kind: "unreachable", maybeApplied: false });
    expect(dispatcher.count).toBe(3);
  });

  it("leaves a dispatcher passed in open on close()", async () => {
    const crew = await startCrew(healthy);
    const dispatcher = new CountingAgent();
    cleanups.push(() => dispatcher.close());
    await client(crew.url, { dispatcher }).close();
    await client(crew.url, { dispatcher }).listInputs();
    expect(dispatcher.count).toBe(1);
  });
});

// undici checks header/body time-outs on a coarse timer (about 1 s resolution), so a
// "slow" answer must be well past readTimeoutMs + 1 s; these tests wait side by side.
const SLOWER_THAN_TIMEOUT_MS = 1_500;

describe.concurrent("CrewClient read time-outs", () => {
  it("retries a GET after a read time-out", async ({ onTestFinished }) => {
    let calls = 0;
    const crew = await startCrew(async (_req, res) => {
      if (++calls === 1) await sleep(SLOWER_THAN_TIMEOUT_MS);
      send(res, 200, { state: "RUNNING" });
    }, onTestFinished);
    expect(await client(crew.url, { readTimeoutMs: 100 }, onTestFinished).status("k")).toMatchObject({ phase: "running" });
    expect(crew.seen.map((s) => s.path)).toEqual(["/status/k", "/status/k"]);
  });

  it("reports a GET that keeps timing out as timeout", async ({ onTestFinished }) => {
    const crew = await startCrew(async (_req, res) => {
      await sleep(SLOWER_THAN_TIMEOUT_MS);
      send(res, 200, { inputs: [] });
    }, onTestFinished);
    const e = await failure(client(crew.url, { readTimeoutMs: 100, retry: { attempts: 1, baseDelayMs: 1 } }, onTestFinished).listInputs());
    expect(e).toMatchObject({ kind: "timeout", operation: "inputs" });
    expect(e.maybeApplied).toBeUndefined();
    expect(e.userMessage()).toBe("The crew “Research” didn't answer in time while listing its inputs. Try again in a minute.");
  });

  it("never retries a POST kickoff after a read time-out", async ({ onTestFinished }) => {
    const crew = await startCrew(async (_req, res) => {
      await sleep(SLOWER_THAN_TIMEOUT_MS);
      send(res, 200, { kickoff_id: "late" });
    }, onTestFinished);
    const e = await failure(client(crew.url, { readTimeoutMs: 100 }, onTestFinished).kickoff({ inputs: { topic: "AI" } }));
    expect(e).toMatchObject({ kind: "timeout", operation: "kickoff", maybeApplied: true });
    expect(e.userMessage()).toContain("may have gone through");
    // Fixed wait: a retry sent in the background (the bug this guards against) leaves nothing else to wait for.
    await sleep(50);
    expect(crew.seen).toHaveLength(1);
  });
});

describe("parseRetryAfter", () => {
  it("reads seconds and HTTP dates", () => {
    expect(parseRetryAfter("5")).toBe(5);
    expect(parseRetryAfter(["0"])).toBe(0);
    expect(parseRetryAfter(new Date(Date.now() + 3_000).toUTCString())).toBeGreaterThanOrEqual(2);
    expect(parseRetryAfter("soon")).toBeUndefined();
    expect(parseRetryAfter(undefined)).toBeUndefined();
  });
});

describe("CrewClient construction", () => {
  it("rejects bad base URLs and tokens without echoing them", () => {
    expect(() => new CrewClient({ name: "x", baseUrl: "not a url?token=abc", token: ORG })).toThrow(/^Crew "x": the base URL is not a valid URL$/);
    expect(() => new CrewClient({ name: "x", baseUrl: "ftp://x.example", token: ORG })).toThrow(/http/);
    expect(() => new CrewClient({ name: "x", baseUrl: "https://x.example", token: "two words" })).toThrow(/^Crew "x": the token/);
  });
});

class CountingAgent extends Agent {
  count = 0;
  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    this.count++;
    return super.dispatch(options, handler);
  }
}

/** A port nothing listens on: bind, note it, close. */
async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

describe("CrewClient stop", () => {
  it("POSTs /stop/{kickoff_id} with the org token; any 2xx is stopped", async () => {
    const crew = await startCrew((_req, res) => send(res, 202, ""));
    expect(await client(crew.url, { userToken: USER }).stop("k/1")).toEqual({ outcome: "stopped" });
    expect(crew.seen.map((r) => [r.method, r.path, r.headers.authorization])).toEqual([["POST", "/stop/k%2F1", `Bearer ${ORG}`]]);
  });

  it.each([404, 405])("reads %i as a deployment without /stop, asked once", async (status) => {
    const crew = await startCrew((_req, res) => send(res, status, { detail: "Not Found" }));
    expect(await client(crew.url).stop("k-1")).toEqual({ outcome: "not_supported", status });
    expect(crew.seen).toHaveLength(1);
  });

  it.each([
    { error: "Not Found", message: "Execution ID not found" },
    { error: "Execution not found", message: "No execution found with ID: k-1" },
  ])("reads a 404 naming the execution (%j) as a run the crew has no record of, not as a deployment without /stop", async (body) => {
    const crew = await startCrew((_req, res) => send(res, 404, body));
    expect(await client(crew.url).stop("k-1")).toMatchObject({ outcome: "ended" });
    expect(crew.seen).toHaveLength(1);
  });

  it.each([409, 400])("reads %i saying so as a run that had already ended", async (status) => {
    const crew = await startCrew((_req, res) => send(res, status, { message: "Execution already completed" }));
    expect(await client(crew.url).stop("k-1")).toEqual({ outcome: "ended", message: "Execution already completed" });
  });

  it.each(["Execution already completed", "Execution has been CANCELLED", "Execution is not running", "Run isn't running any more", "status: ALREADY_FINISHED"])(
    "reads a 400 naming a finished state (%j) as a run that had already ended",
    async (message) => {
      const crew = await startCrew((_req, res) => send(res, 400, { message }));
      expect(await client(crew.url).stop("k-1")).toEqual({ outcome: "ended", message });
    },
  );

  it.each([
    [400, "Execution cannot be stopped while awaiting human input"],
    [400, "Stop is not allowed until the current step has completed"],
  ])("reads a %i that names a state only to refuse (%j) as a refused stop, not an ended run", async (status, message) => {
    const crew = await startCrew((_req, res) => send(res, status, { message }));
    expect((await failure(client(crew.url).stop("k-1"))).kind).toBe("bad_request");
  });

  it("reads a 404 that names no execution (a route) as a deployment without /stop", async () => {
    const crew = await startCrew((_req, res) => send(res, 404, { message: "Kickoff not found in route table" }));
    expect(await client(crew.url).stop("k-1")).toEqual({ outcome: "not_supported", status: 404 });
  });

  it("reads any other 400 as a refused stop, in the crew's words, asked once", async () => {
    const crew = await startCrew((_req, res) => send(res, 400, { error: "Bad Request", message: "kickoff_id is not a valid UUID" }));
    const e = await failure(client(crew.url).stop("k-1"));
    expect(e).toMatchObject({ kind: "bad_request", operation: "stop", status: 400, serviceMessage: "Bad Request: kickoff_id is not a valid UUID" });
    expect(e.userMessage()).toContain("“Bad Request: kickoff_id is not a valid UUID”");
    expect(crew.seen).toHaveLength(1);
  });

  it("throws other failures as crew errors naming the stop", async () => {
    const crew = await startCrew((_req, res) => send(res, 401, { detail: "bad token" }));
    const e = await failure(client(crew.url).stop("k-1"));
    expect(e).toMatchObject({ kind: "unauthorized", operation: "stop" });
    expectNoSecrets(e);
  });
});
