import crypto from "node:crypto";
import { describe, expect, it, vi } from "vitest";
import { parseExposition } from "../../test/support/metrics.js";
import { bearerMatches } from "../adapters/http/metrics-route.js";
import { CrewError } from "../protocols/crew/errors.js";
import type { CrewApi } from "../protocols/crew/types.js";
import { Metrics } from "./metrics.js";

const API = "http://127.0.0.1:9/api/";
const figures = { reviewsWaiting: 2, decisionsInFlight: 0, flowRequestsWaiting: 1, pollLeasesHeld: 3, callbacksQueued: 4, callbacksGivenUp: 0 };

async function samples(m: Metrics) {
  return parseExposition(await m.scrape());
}
const sampleValue = (list: { name: string; labels: Record<string, string>; value: number }[], name: string, labels: Record<string, string> = {}) =>
  list.find((s) => s.name === name && Object.keys(s.labels).length === Object.keys(labels).length && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;

describe("Metrics labels", () => {
  const m = new Metrics({ crews: ["Research", "writer"], slackApiUrl: API, processMetrics: false });

  it("knows Slack methods only under the API base, and only method-shaped names", () => {
    expect(m.slackMethodLabel(`${API}chat.postMessage`)).toBe("chat.postMessage");
    expect(m.slackMethodLabel(`${API}usergroups.users.list?x=1`)).toBe("usergroups.users.list");
    // A file upload URL carries an id; another host, a path, garbage: all "other".
    expect(m.slackMethodLabel("http://127.0.0.1:9/upload/F0ABCDEF123")).toBe("other");
    expect(m.slackMethodLabel("https://files.slack.com/upload/v1/CwABAAAAXG.abc")).toBe("other");
    expect(m.slackMethodLabel(`${API}chat.postMessage/U0ALICE`)).toBe("other");
    expect(m.slackMethodLabel(`${API}xoxb-123-456`)).toBe("other");
    expect(m.slackMethodLabel(`${API}${"a.".repeat(40)}b`)).toBe("other");
  });

  it("names configured crews only (any case), everything else 'other'", () => {
    expect(m.crewLabel("research")).toBe("Research");
    expect(m.crewLabel("WRITER")).toBe("writer");
    expect(m.crewLabel("U0ALICE")).toBe("other");
    expect(m.crewLabel(undefined)).toBe("other");
  });

  it("bounds callback kinds and answers", async () => {
    const c = new Metrics({ crews: [], processMetrics: false });
    c.telemetry.emit({ type: "callback.answered", kind: "task", status: 202 });
    c.telemetry.emit({ type: "callback.answered", kind: "../../d2f6c1e0-secret", status: 404 });
    c.telemetry.emit({ type: "callback.answered", kind: "input", status: 418 });
    const s = await samples(c);
    expect(sampleValue(s, "crewline_callbacks_received_total", { kind: "task", answer: "202" })).toBe(1);
    expect(sampleValue(s, "crewline_callbacks_received_total", { kind: "other", answer: "404" })).toBe(1);
    expect(sampleValue(s, "crewline_callbacks_received_total", { kind: "input", answer: "4xx" })).toBe(1);
  });
});

describe("Metrics adapters", () => {
  it("counts crew calls, errors by kind, and a run started only when the crew accepted the kickoff", async () => {
    const m = new Metrics({ crews: ["research"], processMetrics: false });
    let fail = true;
    let closed = false;
    const api: CrewApi & { close(): Promise<void> } = {
      listInputs: async () => [],
      kickoff: async () => {
        if (fail) throw new CrewError({ kind: "unreachable", crewName: "research", operation: "kickoff" });
        return { kickoffId: "k-123" };
      },
      status: async () => {
        throw new Error("boom");
      },
      resume: async () => ({}),
      close: async () => {
        closed = true;
      },
    };
    const crew = m.instrumentCrew("research", api);
    await expect(crew.kickoff({ inputs: {} })).rejects.toThrow();
    fail = false;
    expect(await crew.kickoff({ inputs: {} })).toEqual({ kickoffId: "k-123" });
    await expect(crew.status("k-123")).rejects.toThrow("boom");
    await crew.close?.();
    expect(closed).toBe(true);
    const s = await samples(m);
    expect(sampleValue(s, "crewline_crew_api_calls_total", { crew: "research", operation: "kickoff" })).toBe(2);
    expect(sampleValue(s, "crewline_crew_api_errors_total", { crew: "research", operation: "kickoff", error: "unreachable" })).toBe(1);
    expect(sampleValue(s, "crewline_crew_api_errors_total", { crew: "research", operation: "status", error: "other" })).toBe(1);
    expect(sampleValue(s, "crewline_runs_started_total", { crew: "research" })).toBe(1);
    expect(sampleValue(s, "crewline_crew_api_duration_seconds_count", { crew: "research", operation: "kickoff" })).toBe(2);
    expect(s.some((x) => Object.values(x.labels).includes("k-123"))).toBe(false);
  });

  it("counts Slack requests, 429s, ok:false codes (unknown codes as 'other') and network failures", async () => {
    const m = new Metrics({ crews: [], slackApiUrl: API, processMetrics: false });
    const answers: (Response | Error)[] = [
      new Response(JSON.stringify({ ok: true }), { headers: { "content-type": "application/json" } }),
      new Response(JSON.stringify({ ok: false, error: "ratelimited" }), { status: 429, headers: { "content-type": "application/json", "retry-after": "1" } }),
      new Response(JSON.stringify({ ok: false, error: "channel_not_found" }), { headers: { "content-type": "application/json" } }),
      new Response(JSON.stringify({ ok: false, error: "U0ALICE_is_weird" }), { headers: { "content-type": "application/json" } }),
      new Response("bad gateway", { status: 502 }),
      new Error("ECONNRESET"),
    ];
    const fetch = m.slackFetch(async () => {
      const next = answers.shift()!;
      if (next instanceof Error) throw next;
      return next;
    });
    for (let i = 0; i < 6; i++) {
      const res = await fetch(`${API}chat.postMessage`, { method: "POST" }).catch(() => undefined);
      // The client still reads the body it was given.
      if (res && res.status === 200) expect(((await res.json()) as { ok: unknown }).ok).toBeTypeOf("boolean");
    }
    const method = "chat.postMessage";
    // An answer is counted once its body is read (the client's own reading included).
    const s = await vi.waitFor(async () => {
      const now = await samples(m);
      expect(sampleValue(now, "crewline_slack_api_calls_total", { method })).toBe(6);
      return now;
    });
    expect(sampleValue(s, "crewline_slack_api_rate_limited_total", { method })).toBe(1);
    expect(sampleValue(s, "crewline_slack_api_errors_total", { method, error: "channel_not_found" })).toBe(1);
    expect(sampleValue(s, "crewline_slack_api_errors_total", { method, error: "other" })).toBe(1);
    expect(sampleValue(s, "crewline_slack_api_errors_total", { method, error: "http" })).toBe(1);
    expect(sampleValue(s, "crewline_slack_api_errors_total", { method, error: "network" })).toBe(1);
  });
});

describe("shared figures", () => {
  it("are read once per scrape from the given reader; pending effects from a source that can be replaced", async () => {
    let reads = 0;
    const m = new Metrics({
      crews: [],
      processMetrics: false,
      shared: async () => {
        reads++;
        return figures;
      },
      pendingEffects: async () => ({ count: 5, oldestAgeSeconds: 12.5 }),
    });
    const s = await samples(m);
    expect(reads).toBe(1);
    expect(sampleValue(s, "crewline_reviews_waiting")).toBe(2);
    expect(sampleValue(s, "crewline_poll_leases_held")).toBe(3);
    expect(sampleValue(s, "crewline_callbacks_unprocessed")).toBe(4);
    expect(sampleValue(s, "crewline_flow_requests_waiting")).toBe(1);
    expect(sampleValue(s, "crewline_slack_effects_pending")).toBe(5);
    expect(sampleValue(s, "crewline_slack_effects_oldest_age_seconds")).toBe(12.5);
    expect(sampleValue(s, "crewline_shared_figures_up")).toBe(1);
    m.setPendingEffectsSource(async () => ({ count: 1, oldestAgeSeconds: 3 }));
    expect(sampleValue(await samples(m), "crewline_slack_effects_pending")).toBe(1);
  });

  it("are left out, not reported stale, when the database cannot be read", async () => {
    const m = new Metrics({
      crews: [],
      processMetrics: false,
      shared: async () => {
        throw new Error("database down");
      },
      pendingEffects: async () => ({ count: 0, oldestAgeSeconds: 0 }),
    });
    m.telemetry.emit({ type: "callback.answered", kind: "step", status: 202 });
    const s = await samples(m);
    expect(sampleValue(s, "crewline_shared_figures_up")).toBe(0);
    expect(sampleValue(s, "crewline_reviews_waiting")).toBeUndefined();
    expect(sampleValue(s, "crewline_callbacks_received_total", { kind: "step", answer: "202" })).toBe(1);
  });
});

describe("bearerMatches", () => {
  const expected = crypto.createHash("sha256").update("the-metrics-token-123").digest();
  it("accepts exactly the token after Bearer (any case of the scheme)", () => {
    expect(bearerMatches("Bearer the-metrics-token-123", expected)).toBe(true);
    expect(bearerMatches("bearer the-metrics-token-123", expected)).toBe(true);
    expect(bearerMatches(undefined, expected)).toBe(false);
    expect(bearerMatches("", expected)).toBe(false);
    expect(bearerMatches("the-metrics-token-123", expected)).toBe(false);
    expect(bearerMatches("Bearer the-metrics-token-1234", expected)).toBe(false);
    expect(bearerMatches("Bearer the-metrics-token-123 extra", expected)).toBe(false);
    expect(bearerMatches("Basic the-metrics-token-123", expected)).toBe(false);
  });
});
