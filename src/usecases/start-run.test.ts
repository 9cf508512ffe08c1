// startRun with fake ports: which outcome for which facts, and what is left behind.
import { describe, expect, it, vi } from "vitest";
import type { CrewConfig } from "../config/config.js";
import { createLogger } from "../log/log.js";
import { CrewError } from "../protocols/crew/errors.js";
import type { Execution } from "./ports.js";
import { type StartRunDeps, startRun } from "./start-run.js";

const config = { name: "research", baseUrl: "http://crew", token: "t", teams: ["T1"], channels: ["C1"] } as unknown as CrewConfig;

function fakes(opts: { kickoff?: () => Promise<{ kickoffId: string }>; post?: "fails"; existing?: boolean } = {}) {
  const rows = new Map<string, Execution>();
  const calls: string[] = [];
  const runs: StartRunDeps["runs"] = {
    findByRequestId: async (id) => (opts.existing ? ({ id: "old", requestId: id } as Execution) : ([...rows.values()].find((r) => r.requestId === id) ?? null)),
    create: async (input) => {
      calls.push("create");
      const row = { id: "e1", requestId: input.requestId ?? "rnd", channelId: input.channelId, state: "starting", teamId: input.teamId } as Execution;
      rows.set(row.id, row);
      return row;
    },
    setThread: async (_id, ts) => void calls.push(`setThread ${ts}`),
    kickedOff: async (id, kickoffId) => {
      calls.push(`kickedOff ${kickoffId}`);
      return { ...rows.get(id)!, kickoffId, state: "running" };
    },
    kickoffFailed: async (_id, why) => void calls.push(`kickoffFailed ${why}`),
  };
  const kickoff = vi.fn(opts.kickoff ?? (async () => ({ kickoffId: "k1" })));
  const onRunStarted = vi.fn();
  const deps: StartRunDeps = {
    crews: { config: (n) => (n === "research" ? config : undefined), get: (n) => (n === "research" ? { kickoff } : undefined) },
    runs,
    announcements: {
      post: async () => (opts.post === "fails" ? { error: "not_in_channel" } : { ts: "100.1" }),
      remove: async (_e, ts) => void calls.push(`remove ${ts}`),
    },
    webhooksEnabled: true,
    webhookUrls: () => urls,
    onRunStarted,
    log: createLogger("error"),
  };
  return { deps, calls, kickoff, onRunStarted };
}

const urls = { stepWebhookUrl: "http://bot/s", taskWebhookUrl: "http://bot/t", crewWebhookUrl: "http://bot/c" };
const req = { crewName: "research", teamId: "T1", channelId: "C1", userId: "U1", inputs: { topic: "tides" }, requestId: "nonce-1" };

describe("startRun", () => {
  it("stores the run, announces it, kicks the crew off with its webhooks and has it watched", async () => {
    const f = fakes();
    const outcome = await startRun(f.deps, req);
    expect(outcome).toMatchObject({ kind: "started", kickoffId: "k1", execution: { state: "running" } });
    expect(f.calls).toEqual(["create", "setThread 100.1", "kickedOff k1"]);
    expect(f.kickoff).toHaveBeenCalledWith({
      inputs: { topic: "tides" },
      meta: { source: "slack", requestId: "nonce-1", channel: "C1", user: "U1" },
      ...urls,
    });
    expect(f.onRunStarted).toHaveBeenCalledOnce();
  });

  it("refuses a crew unknown or limited to other workspaces or channels, storing nothing", async () => {
    for (const r of [
      { ...req, crewName: "nope" },
      { ...req, teamId: "T2" },
      { ...req, channelId: "C2" },
    ]) {
      const f = fakes();
      expect(await startRun(f.deps, r)).toEqual({ kind: "refused" });
      expect(f.calls).toEqual([]);
    }
  });

  it("starts nothing for a form submitted again", async () => {
    const f = fakes({ existing: true });
    expect(await startRun(f.deps, req)).toEqual({ kind: "replayed" });
    expect(f.calls).toEqual([]);
  });

  it("does not call the crew when the announcement cannot be posted", async () => {
    const f = fakes({ post: "fails" });
    expect(await startRun(f.deps, req)).toEqual({ kind: "not_posted", code: "not_in_channel" });
    expect(f.calls).toEqual(["create", "kickoffFailed could not post in the channel (not_in_channel)"]);
    expect(f.kickoff).not.toHaveBeenCalled();
  });

  it("a crew that refuses: the run failed to start, its announcement removed; missing inputs are named", async () => {
    const missing = fakes({
      kickoff: async () => {
        throw new CrewError({ kind: "missing_inputs", crewName: "research", operation: "kickoff", status: 422, missingInputs: ["audience"] });
      },
    });
    expect(await startRun(missing.deps, req)).toMatchObject({ kind: "inputs_refused", missing: ["audience"], invalid: [] });
    expect(missing.calls.slice(2)).toEqual(["remove 100.1", expect.stringMatching(/^kickoffFailed /)]);
    expect(missing.onRunStarted).not.toHaveBeenCalled();

    // A 400 ("invalid input format") is a refusal of the inputs too: the form comes back, with the crew's words.
    const invalid = fakes({
      kickoff: async () => {
        throw new CrewError({ kind: "bad_request", crewName: "research", operation: "kickoff", status: 400, serviceMessage: "invalid input format" });
      },
    });
    expect(await startRun(invalid.deps, req)).toMatchObject({ kind: "inputs_refused", missing: [], invalid: [], reason: expect.stringContaining("invalid input format") });
    // Another 4xx (a wrong method, a conflict) is no matter of the inputs: no form to correct.
    const conflict = fakes({
      kickoff: async () => {
        throw new CrewError({ kind: "bad_request", crewName: "research", operation: "kickoff", status: 409, serviceMessage: "a run is already going" });
      },
    });
    expect(await startRun(conflict.deps, req)).toMatchObject({ kind: "failed", reason: expect.stringContaining("a run is already going") });

    const down = fakes({
      kickoff: async () => {
        throw new CrewError({ kind: "server", crewName: "research", operation: "kickoff", status: 503 });
      },
    });
    const outcome = await startRun(down.deps, req);
    expect(outcome).toMatchObject({ kind: "failed", reason: expect.stringContaining("server error (503)") });
    expect(down.calls.slice(2)).toEqual(["remove 100.1", expect.stringMatching(/^kickoffFailed .*server error/)]);
  });

  it("a run whose thread cannot be stored: its announcement goes again and the crew is not called (the error reaches the form)", async () => {
    const f = fakes();
    f.deps.runs.setThread = async () => {
      throw new Error("connection lost");
    };
    await expect(startRun(f.deps, req)).rejects.toThrow("connection lost");
    expect(f.calls).toEqual(["create", "remove 100.1"]);
    expect(f.kickoff).not.toHaveBeenCalled();
  });

  it("a kickoff that may have gone through, or that the crew took but that could not be stored: the run and its announcement stay", async () => {
    const lost = fakes({
      kickoff: async () => {
        throw new CrewError({ kind: "timeout", crewName: "research", operation: "kickoff", maybeApplied: true });
      },
    });
    expect(await startRun(lost.deps, req)).toMatchObject({ kind: "unconfirmed", reason: expect.stringContaining("may have gone through") });
    expect(lost.calls).toEqual(["create", "setThread 100.1"]);

    const unstored = fakes();
    let tries = 0;
    unstored.deps.runs.kickedOff = async () => {
      tries++;
      throw new Error("connection lost");
    };
    expect(await startRun(unstored.deps, req)).toMatchObject({ kind: "unrecorded", kickoffId: "k1" });
    expect(unstored.calls).toEqual(["create", "setThread 100.1"]);
    expect(unstored.kickoff).toHaveBeenCalledOnce();
    expect(tries).toBe(3);

    // Stored on a second try: started, as if nothing had happened.
    const once = fakes();
    const kickedOff = once.deps.runs.kickedOff;
    let failures = 1;
    once.deps.runs.kickedOff = async (...args) => {
      if (failures-- > 0) throw new Error("deadlock detected");
      return kickedOff(...args);
    };
    expect(await startRun(once.deps, req)).toMatchObject({ kind: "started", kickoffId: "k1" });
    expect(once.kickoff).toHaveBeenCalledOnce();
  });
});
