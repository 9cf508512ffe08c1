import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./config.js";

const base = {
  SLACK_BOT_TOKEN: "xoxb-1-secret-bot",
  SLACK_SIGNING_SECRET: "sign-secret",
  CREW_BASE_URL: "https://crew.example.com",
  CREW_TOKEN: "crew-secret-token",
};

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe("loadConfig", () => {
  it("reads the single-crew variables with defaults", () => {
    const config = loadConfig(base);
    expect(config.port).toBe(3000);
    expect(config.databaseUrl).toBeUndefined();
    expect(config.dataDir).toBe(path.resolve("./data"));
    expect(config.crews).toEqual([
      { name: "crew", baseUrl: "https://crew.example.com", token: "crew-secret-token", userToken: undefined, channels: undefined, reviewers: undefined, eventStream: false },
    ]);
    expect(loadConfig({ ...base, CREW_EVENT_STREAM: "true" }).crews[0]!.eventStream).toBe(true);
    expect(problems({ ...base, CREW_EVENT_STREAM: "yes" }).join("\n")).toMatch(/^CREW_EVENT_STREAM.*event stream/m);
  });

  it("names every missing variable and what it is for, without echoing secrets", () => {
    const found = problems({ CREW_TOKEN: "crew-secret-token" });
    expect(found.join("\n")).toMatch(/SLACK_BOT_TOKEN is missing: the bot token/);
    expect(found.join("\n")).toMatch(/SLACK_SIGNING_SECRET is missing: verifies that requests/);
    expect(found.join("\n")).toMatch(/CREW_BASE_URL is missing/);
    expect(found.join("\n")).not.toContain("crew-secret-token");
  });

  it("rejects malformed values by name", () => {
    const found = problems({ ...base, SLACK_BOT_TOKEN: "xoxp-user-token", PORT: "eighty", PUBLIC_URL: "ftp://x", DATABASE_URL: "mysql://x" });
    expect(found.some((p) => p.startsWith("SLACK_BOT_TOKEN") && /xoxb-/.test(p))).toBe(true);
    expect(found.some((p) => p.startsWith("PORT"))).toBe(true);
    expect(found.some((p) => p.startsWith("PUBLIC_URL"))).toBe(true);
    expect(found.some((p) => p.startsWith("DATABASE_URL"))).toBe(true);
    expect(found.join("\n")).not.toContain("xoxp-user-token");
  });

  it("reads METRICS_TOKEN; a short or spaced one is refused by name, never echoed", () => {
    expect(loadConfig(base).metricsToken).toBeUndefined();
    expect(loadConfig({ ...base, METRICS_TOKEN: "m3trics-t0ken-long-enough" }).metricsToken).toBe("m3trics-t0ken-long-enough");
    const short = problems({ ...base, METRICS_TOKEN: "short-secret" }).join("\n");
    expect(short).toMatch(/^METRICS_TOKEN \(a bearer token that GET \/metrics requires.*at least 16 characters/m);
    expect(short).not.toContain("short-secret");
    expect(problems({ ...base, METRICS_TOKEN: "has a space in the middle" }).join("\n")).toMatch(/^METRICS_TOKEN .*without spaces/m);
  });

  it("needs no signing secret in Socket Mode", () => {
    const { SLACK_SIGNING_SECRET: _, ...rest } = base;
    const config = loadConfig({ ...rest, SLACK_APP_TOKEN: "xapp-1-abc" });
    expect(config.slack.appToken).toBe("xapp-1-abc");
  });

  it("reads several crews from a YAML file, with tokens from the environment", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "crews-"));
    const file = path.join(dir, "crews.yml");
    fs.writeFileSync(
      file,
      `crews:\n  - name: research\n    baseUrl: https://r.example.com\n    tokenEnv: R_TOKEN\n    channels: [C1, C2]\n    reviewers: U1, S9\n  - name: writer\n    baseUrl: https://w.example.com\n    token: inline\n`,
    );
    const { CREW_BASE_URL: _a, CREW_TOKEN: _b, ...rest } = base;
    const config = loadConfig({ ...rest, CREWS_FILE: file, R_TOKEN: "from-env" });
    expect(config.crews.map((c) => [c.name, c.token, c.channels])).toEqual([
      ["research", "from-env", ["C1", "C2"]],
      ["writer", "inline", undefined],
    ]);
    expect(config.crews[0]!.reviewers).toEqual({ users: ["U1"], usergroups: ["S9"] });
    expect(problems({ ...rest, CREWS_FILE: file })).toEqual([expect.stringMatching(/crew "research" has no token/)]);
    expect(problems({ ...rest, CREWS_FILE: path.join(dir, "missing.yml") })[0]).toMatch(/CREWS_FILE .* cannot read/);
  });
});

describe("loadConfig: review deadlines and escalation", () => {
  it("reads CREW_DECIDE_WITHIN, CREW_ON_TIMEOUT (default remind) and CREW_ESCALATE_TO", () => {
    const crew = loadConfig({ ...base, CREW_DECIDE_WITHIN: "30m", CREW_ON_TIMEOUT: "reject", CREW_ESCALATE_TO: "U0BOSS, S0LEADS" }).crews[0]!;
    expect(crew).toMatchObject({ decideWithinMs: 30 * 60_000, onTimeout: "reject", escalateTo: { users: ["U0BOSS"], usergroups: ["S0LEADS"] } });
    expect(loadConfig({ ...base, CREW_DECIDE_WITHIN: "90s" }).crews[0]).toMatchObject({ decideWithinMs: 90_000 });
    expect(loadConfig({ ...base, CREW_DECIDE_WITHIN: "24h" }).crews[0]!.onTimeout).toBeUndefined();
    expect(loadConfig(base).crews[0]!.decideWithinMs).toBeUndefined();
  });

  it("names the variable and says what it wants when a value is wrong", () => {
    expect(problems({ ...base, CREW_DECIDE_WITHIN: "half an hour" }).join("\n")).toMatch(
      /^CREW_DECIDE_WITHIN \(how long a review may wait.*is invalid: use a duration such as "90s", "30m"/m,
    );
    expect(problems({ ...base, CREW_DECIDE_WITHIN: "5s" }).join("\n")).toMatch(/^CREW_DECIDE_WITHIN .*between 10s and 30d/m);
    expect(problems({ ...base, CREW_DECIDE_WITHIN: "1h", CREW_ON_TIMEOUT: "explode" }).join("\n")).toMatch(/^CREW_ON_TIMEOUT .*use reject, approve or remind/m);
    expect(problems({ ...base, CREW_ON_TIMEOUT: "reject" }).join("\n")).toMatch(/^CREW_ON_TIMEOUT .*without decideWithin/m);
    expect(problems({ ...base, CREW_ESCALATE_TO: "@boss" }).join("\n")).toMatch(/^CREW_ESCALATE_TO .*user ids \(U…\) or user group ids \(S…\)/m);
  });

  it("reads a flow's deadline from FLOW_DECIDE_WITHIN / FLOW_ON_TIMEOUT and from the file", () => {
    const flowEnv = { ...base, FLOW_WEBHOOK_SECRET: "s", FLOW_CHANNEL: "C0FLOWS" };
    expect(loadConfig({ ...flowEnv, FLOW_DECIDE_WITHIN: "1h", FLOW_ON_TIMEOUT: "approve" }).flows![0]).toMatchObject({ decideWithinMs: 3_600_000, onTimeout: "approve" });
    expect(problems({ ...flowEnv, FLOW_DECIDE_WITHIN: "soon" }).join("\n")).toMatch(/^FLOW_DECIDE_WITHIN .*is invalid: use a duration/m);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "flows-deadlines-"));
    const file = path.join(dir, "crews.yml");
    fs.writeFileSync(file, "flows:\n  - name: content\n    secret: s\n    channel: C0FLOWS\n    decideWithin: 30m\n    onTimeout: reject\n");
    const { CREW_BASE_URL: _a, CREW_TOKEN: _b, ...rest } = base;
    expect(loadConfig({ ...rest, CREWS_FILE: file }).flows![0]).toMatchObject({ decideWithinMs: 30 * 60_000, onTimeout: "reject" });
  });

  it("reads decideWithin, onTimeout and escalateTo per crew from the crews file, with errors naming the crew", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "crews-deadlines-"));
    const file = path.join(dir, "crews.yml");
    fs.writeFileSync(
      file,
      "crews:\n  - name: research\n    baseUrl: https://r.example.com\n    token: t\n    decideWithin: 2h\n    onTimeout: approve\n    escalateTo: [U0BOSS]\n  - name: writer\n    baseUrl: https://w.example.com\n    token: t\n",
    );
    const { CREW_BASE_URL: _a, CREW_TOKEN: _b, ...rest } = base;
    const config = loadConfig({ ...rest, CREWS_FILE: file });
    expect(config.crews[0]).toMatchObject({ decideWithinMs: 2 * 3_600_000, onTimeout: "approve", escalateTo: { users: ["U0BOSS"], usergroups: [] } });
    expect(config.crews[1]!.decideWithinMs).toBeUndefined();
    fs.writeFileSync(file, "crews:\n  - name: research\n    baseUrl: https://r.example.com\n    token: t\n    decideWithin: soon\n    onTimeout: later\n");
    const found = problems({ ...rest, CREWS_FILE: file }).join("\n");
    expect(found).toMatch(/CREWS_FILE .*crew "research" decideWithin: use a duration/);
    expect(found).toMatch(/CREWS_FILE .*crew "research" onTimeout: use reject, approve or remind/);
  });
});

describe("loadConfig: flows", () => {
  const slackOnly = { SLACK_BOT_TOKEN: base.SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET: base.SLACK_SIGNING_SECRET };

  it("reads one flow from FLOW_* (name defaults to flow), beside a crew", () => {
    const config = loadConfig({ ...base, FLOW_WEBHOOK_SECRET: "flow-sign", FLOW_CHANNEL: "C0FLOWS", FLOW_REVIEWERS: "U0BOB,S0TEAM" });
    expect(config.flows).toEqual([{ name: "flow", secret: "flow-sign", channel: "C0FLOWS", reviewers: { users: ["U0BOB"], usergroups: ["S0TEAM"] } }]);
    expect(config.crews).toHaveLength(1);
  });

  it("accepts a flow-only set-up (no crew) from the environment and from a file", () => {
    const config = loadConfig({ ...slackOnly, FLOW_NAME: "content", FLOW_WEBHOOK_SECRET: "s", FLOW_CHANNEL: "C0FLOWS" });
    expect(config.crews).toEqual([]);
    expect(config.flows?.map((f) => f.name)).toEqual(["content"]);

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-flows-"));
    const file = path.join(dir, "crews.yaml");
    fs.writeFileSync(
      file,
      "flows:\n  - name: content\n    secretEnv: CONTENT_SECRET\n    channel: C0FLOWS\n    reviewers: [U0BOB]\n  - name: legal\n    secret: inline\n    channel: C0LEGAL\n",
    );
    const fromFile = loadConfig({ ...slackOnly, CREWS_FILE: file, CONTENT_SECRET: "from-env" });
    expect(fromFile.crews).toEqual([]);
    expect(fromFile.flows).toEqual([
      { name: "content", secret: "from-env", channel: "C0FLOWS", reviewers: { users: ["U0BOB"], usergroups: [] } },
      { name: "legal", secret: "inline", channel: "C0LEGAL", reviewers: undefined },
    ]);
  });

  it("names the variable when a flow is half configured or invalid, never echoing the secret", () => {
    const missing = problems({ ...base, FLOW_CHANNEL: "C0FLOWS" });
    expect(missing.join("\n")).toMatch(/FLOW_WEBHOOK_SECRET is missing/);
    const bad = problems({ ...base, FLOW_WEBHOOK_SECRET: "very-secret-value", FLOW_CHANNEL: "#general", FLOW_NAME: "has space" });
    expect(bad.join("\n")).toMatch(/FLOW_CHANNEL .* is invalid/);
    expect(bad.join("\n")).toMatch(/FLOW_NAME .* is invalid/);
    expect(bad.join("\n")).not.toContain("very-secret-value");
    // Without a flow, a crew is still required.
    expect(problems(slackOnly).join("\n")).toMatch(/CREW_BASE_URL is missing/);

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-flows-"));
    const file = path.join(dir, "crews.yaml");
    fs.writeFileSync(file, "flows:\n  - name: content\n    secretEnv: UNSET_SECRET\n    channel: C0FLOWS\n");
    expect(problems({ ...slackOnly, CREWS_FILE: file }).join("\n")).toMatch(/CREWS_FILE .*flow "content" has no secret/);
  });
});
