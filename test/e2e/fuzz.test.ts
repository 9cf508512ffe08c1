// Seeded fuzzing of everything that reaches the bot from outside (issue #11): crew callbacks under
// /hooks/ (every kind, every method, bad escapes, wrong secrets), flow requests, and signed Slack
// requests with malformed shapes. Bounded in count and time; the seed is printed so a failure can be
// replayed (CREWLINE_FUZZ_SEED). Bad input must never get a 5xx, have a Slack effect, stop the
// process, or put a secret in the log.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/log/log.js";
import { CHANNEL, type Harness, SIGNING_SECRET, startHarness } from "../support/harness.js";
import { startRunViaSlack } from "../support/reviews.js";
import { signSlackBody } from "../support/slack-requests.js";

const SEED = Number(process.env.CREWLINE_FUZZ_SEED ?? 20261122);
const CASES = 2500;
const BUDGET_MS = 25_000;

/** mulberry32: small, seeded, good enough to pick cases. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

let h: Harness;
const lines: string[] = [];
let execution: { id: string; webhookSecret: string; kickoffId: string | null; humanInputToken: string | null };

beforeAll(async () => {
  h = await startHarness({
    crew: { tasks: [{ id: "t", name: "slow_task", agent: "A", delayMs: 120_000, steps: 0 }] },
    config: { flows: [{ name: "content", secret: "flow-signing-secret", channel: CHANNEL }] } as never,
    crewline: { log: createLogger("debug", (l) => lines.push(l)) },
  });
  execution = await startRunViaSlack(h);
}, 60_000);
afterAll(async () => h?.close());

describe("fuzzing every way in", () => {
  it(`answers ${CASES} hostile requests without a 5xx, a Slack effect, a crash or a leaked secret (seed ${SEED})`, async () => {
    const r = rng(SEED);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
    const int = (n: number) => Math.floor(r() * n);
    const weird = () => pick(["\u0000", "\ud800", "\udfff", "💥", "\u202e", "%", "%E0%A4%A", "../", "__proto__", "constructor", "A".repeat(int(300)), "", " ", "null", "\\u0000"]);
    const value = (depth = 0): unknown => {
      switch (int(depth > 3 ? 6 : 9)) {
        case 0:
          return null;
        case 1:
          return r() * 1e12 - 5e11;
        case 2:
          return r() < 0.5;
        case 3:
          return weird();
        case 4:
          return Number.NaN;
        case 5:
          return "";
        case 6:
          return Array.from({ length: int(4) }, () => value(depth + 1));
        case 7:
          return Object.fromEntries(
            Array.from({ length: int(4) }, () => [
              pick(["__proto__", "kickoff_id", "execution_id", "output", "name", "task_id", "events", "type", "user", "actions", "view"]),
              value(depth + 1),
            ]),
          );
        default:
          return { ["__proto__"]: { polluted: true }, output: value(depth + 1) };
      }
    };
    const nested = (d: number) => "[".repeat(d) + "]".repeat(d);
    const body = (): string => {
      switch (int(7)) {
        case 0:
          return Buffer.from(Array.from({ length: int(200) }, () => int(256))).toString("latin1");
        case 1:
          return `{"output":"x","extra":${nested(200 + int(6000))}}`;
        case 2:
          return JSON.stringify(value());
        case 3:
          return `{"output":"a\\u0000b\\ud800c","name":${JSON.stringify(weird())}}`;
        case 4:
          return `{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}}}`;
        case 5:
          return pick(["null", "[]", "1", '"x"', "{", "", '{"events":null}', '{"events":[null,1,"x"]}']);
        default:
          return JSON.stringify({ kickoff_id: value(), output: value(), name: value(), events: value() });
      }
    };
    const kind = () => pick(["step", "task", "crew", "input", "events", "TASK", "Crew", "x", "", "%2e%2e", "flows"]);
    const method = () => pick(["GET", "HEAD", "POST", "POST", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
    // Real run URLs with a wrong secret or no authorization (so nothing may take effect), and junk paths.
    const path = () =>
      pick([
        () => `/hooks/${execution.id}/${kind()}/${pick(["wrong", execution.webhookSecret + "x", "%E0%A4%A", ""])}`,
        () => `/hooks/${execution.id}/${pick(["input", "events"])}/${execution.webhookSecret}`, // no bearer token below
        () => `/hooks//${execution.id}/task/${pick(["a", "%zz"])}`,
        () => `/HOOKS/${execution.id}/task/x`,
        () => `/hooks/${pick(["not-a-uuid", "00000000-0000-4000-8000-000000000000", "%00", "flows"])}/${kind()}/${weird().replace(/[\ud800-\udfff]/g, "%ED%A0%80")}`,
        () => `/hooks/flows/${pick(["content", "nope", "%E0%A4%A", "content/extra"])}`,
        () => `/hooks/${pick(["%ED%A0%80", "%00", "%C0%AF", "%25", "%F0%9F%92%A5"])}/${weird().replace(/[\ud800-\udfff]/g, "")}`,
      ])();

    const slackCalls = () =>
      h.slack.calls.filter((c) => !["auth.test", "conversations.members", "conversations.info", "users.info", "usergroups.users.list"].includes(c.method)).length;
    // The kickoff's own trailing calls (modal, announcement) land first: start from a quiet Slack (the crew's task runs for minutes on purpose).
    await h.settled({ crewRuns: false });
    const before = slackCalls();
    const started = Date.now();
    const fiveXX: string[] = [];
    let sent = 0;
    for (; sent < CASES && Date.now() - started < BUDGET_MS; sent++) {
      if (r() < 0.7) {
        const m = method();
        const url = `${h.botUrl}${path()}`;
        let res: Response;
        try {
          res = await fetch(url, {
            method: m,
            body: m === "GET" || m === "HEAD" ? undefined : body(),
            headers: { "content-type": pick(["application/json", "text/plain", "application/x-www-form-urlencoded"]) },
          });
        } catch {
          continue; // a URL fetch itself refuses (e.g. bad characters) never reached the bot
        }
        await res.arrayBuffer().catch(() => undefined);
        if (res.status >= 500) fiveXX.push(`${m} ${url.slice(0, 120)} → ${res.status}`);
      } else {
        // Signed Slack requests: JSON bodies and interactivity forms whose payload is any shape.
        const raw =
          r() < 0.5
            ? pick([
                () => "null",
                () => JSON.stringify(value()),
                () => JSON.stringify({ type: pick(["event_callback", "url_verification", "block_actions", "x"]), event: value(), challenge: value(), token: value() }),
              ])()
            : new URLSearchParams({
                payload: pick([
                  () => "null",
                  () => JSON.stringify(value()),
                  () =>
                    JSON.stringify({
                      type: pick(["block_actions", "view_submission", "view_closed", "shortcut"]),
                      user: value(),
                      actions: value(),
                      view: value(),
                      container: value(),
                    }),
                  () => "{",
                ])(),
              }).toString();
        const contentType = raw.startsWith("payload=") ? "application/x-www-form-urlencoded" : "application/json";
        const res = await h.requests.raw(raw, { "Content-Type": contentType, ...signSlackBody(SIGNING_SECRET, raw) });
        if (res.status >= 500) fiveXX.push(`slack ${raw.slice(0, 120)} → ${res.status}`);
      }
    }
    await h.settled({ crewRuns: false });

    expect(sent).toBeGreaterThan(500);
    expect(fiveXX).toEqual([]);
    expect(slackCalls()).toBe(before);
    // Still serving, with its database.
    expect((await fetch(`${h.botUrl}/healthz`)).status).toBe(200);
    const log = lines.join("\n");
    for (const secret of [execution.webhookSecret, execution.humanInputToken ?? "never", SIGNING_SECRET, "flow-signing-secret"]) expect(log).not.toContain(secret);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  }, 60_000);
});
