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
      {
        name: "crew",
        baseUrl: "https://crew.example.com",
        token: "crew-secret-token",
        userToken: undefined,
        channels: undefined,
        reviewers: undefined,
        eventStream: false,
        approvals: 1,
        selfApproval: true,
      },
    ]);
    expect(loadConfig({ ...base, CREW_APPROVALS: "2", CREW_SELF_APPROVAL: "false" }).crews[0]).toMatchObject({ approvals: 2, selfApproval: false });
    expect(problems({ ...base, CREW_APPROVALS: "0" }).join("\n")).toMatch(/^CREW_APPROVALS.*distinct people must approve/m);
    expect(problems({ ...base, CREW_SELF_APPROVAL: "no" }).join("\n")).toMatch(/^CREW_SELF_APPROVAL.*started a run/m);
    expect(loadConfig(base).preparedStatements).toBeUndefined();
    expect(loadConfig({ ...base, DATABASE_PREPARED_STATEMENTS: "false" }).preparedStatements).toBe(false);
    expect(problems({ ...base, DATABASE_PREPARED_STATEMENTS: "off" }).join("\n")).toMatch(/^DATABASE_PREPARED_STATEMENTS.*pooler/m);
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
    // A URL Crewline shows (in /crew help, App Home) or logs may not carry a password; the problem does not repeat it.
    for (const name of ["PUBLIC_URL", "SLACK_API_URL"]) {
      const said = problems({ ...base, [name]: "https://user:hunter2-secret@bot.example.com" });
      expect(said.find((p) => p.startsWith(name))).toMatch(/user name or password/);
      expect(said.join("\n")).not.toContain("hunter2");
    }
    expect(found.some((p) => p.startsWith("DATABASE_URL"))).toBe(true);
    expect(found.join("\n")).not.toContain("xoxp-user-token");
  });

  it("refuses a PUBLIC_URL with a query string or fragment: webhook URLs are built by appending /hooks/… to it", () => {
    for (const url of ["https://bot.example.com/?env=prod", "https://bot.example.com/crewline#top", "https://bot.example.com/?"]) {
      expect(problems({ ...base, PUBLIC_URL: url }).join("\n")).toMatch(
        /^PUBLIC_URL \(the externally reachable base URL.*\) is invalid: must not have a query string \(\?…\) or fragment \(#…\).*\/hooks\//m,
      );
    }
    expect(loadConfig({ ...base, PUBLIC_URL: "https://bot.example.com/crewline/" }).publicUrl).toBe("https://bot.example.com/crewline");
  });

  it("reads LOG_LEVEL in any case (default info); any other value stops start-up naming LOG_LEVEL and the levels", () => {
    expect(loadConfig(base).logLevel).toBe("info");
    expect(loadConfig({ ...base, LOG_LEVEL: "WARN" }).logLevel).toBe("warn");
    expect(loadConfig({ ...base, LOG_LEVEL: " Debug " }).logLevel).toBe("debug");
    for (const level of ["verbose", "warning", "3"])
      expect(problems({ ...base, LOG_LEVEL: level })).toEqual([expect.stringMatching(/^LOG_LEVEL \(how much the bot logs.*\) is invalid: use debug, info, warn or error$/)]);
  });

  it("reads METRICS_TOKEN; a short or spaced one is refused by name, never echoed", () => {
    expect(loadConfig(base).metricsToken).toBeUndefined();
    expect(loadConfig({ ...base, METRICS_TOKEN: "m3trics-t0ken-long-enough" }).metricsToken).toBe("m3trics-t0ken-long-enough");
    const short = problems({ ...base, METRICS_TOKEN: "short-secret" }).join("\n");
    expect(short).toMatch(/^METRICS_TOKEN \(a bearer token that GET \/metrics on PORT requires.*at least 16 characters/m);
    expect(short).not.toContain("short-secret");
    expect(problems({ ...base, METRICS_TOKEN: "has a space in the middle" }).join("\n")).toMatch(/^METRICS_TOKEN .*without spaces/m);
  });

  it("reads OUTBOX_CONCURRENCY (unset: the outbox's default), and refuses one below 1 by name", () => {
    expect(loadConfig(base).polling?.outboxConcurrency).toBeUndefined();
    expect(loadConfig({ ...base, OUTBOX_CONCURRENCY: "32" }).polling?.outboxConcurrency).toBe(32);
    expect(problems({ ...base, OUTBOX_CONCURRENCY: "0" }).join("\n")).toMatch(/OUTBOX_CONCURRENCY.*Slack effects/);
  });

  it("reads METRICS_PORT, bound to loopback unless METRICS_HOST says otherwise", () => {
    expect(loadConfig(base).metricsPort).toBeUndefined();
    expect(loadConfig({ ...base, METRICS_PORT: "9464" })).toMatchObject({ metricsPort: 9464, metricsHost: "127.0.0.1" });
    expect(loadConfig({ ...base, METRICS_PORT: "9464", METRICS_HOST: "0.0.0.0" })).toMatchObject({ metricsPort: 9464, metricsHost: "0.0.0.0" });
    expect(problems({ ...base, METRICS_HOST: "0.0.0.0" }).join("\n")).toMatch(/^METRICS_HOST is set without METRICS_PORT/m);
    expect(problems({ ...base, METRICS_PORT: "3000", PORT: "3000" }).join("\n")).toMatch(/^METRICS_PORT .* must differ from PORT/m);
    expect(problems({ ...base, METRICS_PORT: "9464", METRICS_HOST: "metrics.example.com" }).join("\n")).toMatch(/^METRICS_HOST .* is invalid/m);
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
      `crews:\n  - name: research\n    baseUrl: https://r.example.com\n    tokenEnv: R_TOKEN\n    channels: [C0ONE, C0TWO]\n    reviewers: U0ALICE, S0EDITORS\n    approvals: 2\n    selfApproval: false\n  - name: writer\n    baseUrl: https://w.example.com\n    token: inline\n`,
    );
    const { CREW_BASE_URL: _a, CREW_TOKEN: _b, ...rest } = base;
    const config = loadConfig({ ...rest, CREWS_FILE: file, R_TOKEN: "from-env-signing-secret" });
    expect(config.crews.map((c) => [c.name, c.token, c.channels])).toEqual([
      ["research", "from-env-signing-secret", ["C0ONE", "C0TWO"]],
      ["writer", "inline", undefined],
    ]);
    expect(config.crews[0]!.reviewers).toEqual({ users: ["U0ALICE"], usergroups: ["S0EDITORS"] });
    expect(config.crews.map((c) => [c.approvals, c.selfApproval])).toEqual([
      [2, false],
      [undefined, undefined],
    ]);
    expect(problems({ ...rest, CREWS_FILE: file })).toEqual([expect.stringMatching(/crew "research" has no token/)]);
    expect(problems({ ...rest, CREWS_FILE: path.join(dir, "missing.yml") })[0]).toMatch(/CREWS_FILE .* cannot read/);
  });

  it("trims a crew token read through tokenEnv, as CREW_TOKEN is (a mounted secret ends in a newline)", () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "crews-trim-")), "crews.yml");
    fs.writeFileSync(file, "crews:\n  - name: research\n    baseUrl: https://r.example.com\n    tokenEnv: R_TOKEN\n    userTokenEnv: R_USER_TOKEN\n");
    const { CREW_BASE_URL: _a, CREW_TOKEN: _b, ...rest } = base;
    const crew = loadConfig({ ...rest, CREWS_FILE: file, R_TOKEN: "crew-org-token\n", R_USER_TOKEN: "  crew-user-token\r\n" }).crews[0]!;
    expect([crew.token, crew.userToken]).toEqual(["crew-org-token", "crew-user-token"]);
    expect(problems({ ...rest, CREWS_FILE: file, R_TOKEN: "\n" })).toEqual([expect.stringMatching(/crew "research" has no token/)]);
  });

  it("says a crews file does not parse without quoting it (it holds tokens)", () => {
    const { CREW_BASE_URL: _a, CREW_TOKEN: _b, ...rest } = base;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "crews-broken-"));
    const json = path.join(dir, "broken.json");
    fs.writeFileSync(json, `{"crews": [{"name": "research", "token": sk-live-SECRETTOKEN}]}`);
    const yaml = path.join(dir, "broken.yml");
    fs.writeFileSync(yaml, `crews:\n  - name: research\n    token: "sk-live-SECRETTOKEN\n  bad: [`);
    for (const file of [json, yaml]) {
      const said = problems({ ...rest, CREWS_FILE: file });
      expect(said[0]).toMatch(/CREWS_FILE .* cannot read broken\.(json|yml)/);
      expect(said.join("\n")).not.toContain("sk-live");
    }
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
    const flowEnv = { ...base, FLOW_WEBHOOK_SECRET: "flow-signing-secret-01", FLOW_CHANNEL: "C0FLOWS" };
    expect(loadConfig({ ...flowEnv, FLOW_DECIDE_WITHIN: "1h", FLOW_ON_TIMEOUT: "approve" }).flows![0]).toMatchObject({ decideWithinMs: 3_600_000, onTimeout: "approve" });
    expect(problems({ ...flowEnv, FLOW_DECIDE_WITHIN: "soon" }).join("\n")).toMatch(/^FLOW_DECIDE_WITHIN .*is invalid: use a duration/m);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "flows-deadlines-"));
    const file = path.join(dir, "crews.yml");
    fs.writeFileSync(file, "flows:\n  - name: content\n    secret: flow-signing-secret-01\n    channel: C0FLOWS\n    decideWithin: 30m\n    onTimeout: reject\n");
    const { CREW_BASE_URL: _a, CREW_TOKEN: _b, ...rest } = base;
    expect(loadConfig({ ...rest, CREWS_FILE: file }).flows![0]).toMatchObject({ decideWithinMs: 30 * 60_000, onTimeout: "reject" });
  });

  it("reads a flow's escalateTo from FLOW_ESCALATE_TO and from the file, with errors naming where", () => {
    const flowEnv = { ...base, FLOW_WEBHOOK_SECRET: "flow-signing-secret-01", FLOW_CHANNEL: "C0FLOWS" };
    expect(loadConfig({ ...flowEnv, FLOW_ESCALATE_TO: "U0BOSS, S0LEADS" }).flows![0]).toMatchObject({ escalateTo: { users: ["U0BOSS"], usergroups: ["S0LEADS"] } });
    expect(loadConfig(flowEnv).flows![0]!.escalateTo).toBeUndefined();
    expect(problems({ ...flowEnv, FLOW_ESCALATE_TO: "@boss" }).join("\n")).toMatch(/^FLOW_ESCALATE_TO .*user ids \(U…\) or user group ids \(S…\)/m);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "flows-escalation-"));
    const file = path.join(dir, "crews.yml");
    const { CREW_BASE_URL: _a, CREW_TOKEN: _b, ...rest } = base;
    fs.writeFileSync(file, "flows:\n  - name: content\n    secret: flow-signing-secret-01\n    channel: C0FLOWS\n    escalateTo: [U0BOSS]\n");
    expect(loadConfig({ ...rest, CREWS_FILE: file }).flows![0]).toMatchObject({ escalateTo: { users: ["U0BOSS"], usergroups: [] } });
    fs.writeFileSync(file, "flows:\n  - name: content\n    secret: flow-signing-secret-01\n    channel: C0FLOWS\n    escalateTo: [boss]\n");
    expect(problems({ ...rest, CREWS_FILE: file }).join("\n")).toMatch(/flow "content" escalateTo: must be user ids/);
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
    const config = loadConfig({ ...base, FLOW_WEBHOOK_SECRET: "flow-signing-secret-02", FLOW_CHANNEL: "C0FLOWS", FLOW_REVIEWERS: "U0BOB,S0TEAM" });
    expect(config.flows).toEqual([{ name: "flow", secret: "flow-signing-secret-02", channel: "C0FLOWS", reviewers: { users: ["U0BOB"], usergroups: ["S0TEAM"] } }]);
    expect(config.crews).toHaveLength(1);
    const two = loadConfig({ ...base, FLOW_WEBHOOK_SECRET: "flow-signing-secret-02", FLOW_CHANNEL: "C0FLOWS", FLOW_APPROVALS: "2" });
    expect(two.flows?.[0]?.approvals).toBe(2);
    expect(problems({ ...base, FLOW_WEBHOOK_SECRET: "flow-signing-secret-02", FLOW_CHANNEL: "C0FLOWS", FLOW_APPROVALS: "many" }).join("\n")).toMatch(
      /^FLOW_APPROVALS.*distinct people/m,
    );
  });

  it("accepts a flow-only set-up (no crew) from the environment and from a file", () => {
    const config = loadConfig({ ...slackOnly, FLOW_NAME: "content", FLOW_WEBHOOK_SECRET: "flow-signing-secret-01", FLOW_CHANNEL: "C0FLOWS" });
    expect(config.crews).toEqual([]);
    expect(config.flows?.map((f) => f.name)).toEqual(["content"]);

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-flows-"));
    const file = path.join(dir, "crews.yaml");
    fs.writeFileSync(
      file,
      "flows:\n  - name: content\n    secretEnv: CONTENT_SECRET\n    channel: C0FLOWS\n    reviewers: [U0BOB]\n  - name: legal\n    secret: inline-signing-secret\n    channel: C0LEGAL\n    approvals: 2\n",
    );
    const fromFile = loadConfig({ ...slackOnly, CREWS_FILE: file, CONTENT_SECRET: "from-env-signing-secret" });
    expect(fromFile.crews).toEqual([]);
    expect(fromFile.flows).toEqual([
      { name: "content", secret: "from-env-signing-secret", channel: "C0FLOWS", reviewers: { users: ["U0BOB"], usergroups: [] } },
      { name: "legal", secret: "inline-signing-secret", channel: "C0LEGAL", reviewers: undefined, approvals: 2 },
    ]);
  });

  it("reads WEBHOOK_EVENT_RETENTION as a duration of at least an hour, unset by default (7 days in the app)", () => {
    expect(loadConfig(base).webhookEventRetentionMs).toBeUndefined();
    expect(loadConfig({ ...base, WEBHOOK_EVENT_RETENTION: "36h" }).webhookEventRetentionMs).toBe(36 * 3_600_000);
    expect(loadConfig({ ...base, WEBHOOK_EVENT_RETENTION: "7d" }).webhookEventRetentionMs).toBe(7 * 86_400_000);
    expect(problems({ ...base, WEBHOOK_EVENT_RETENTION: "a week" }).join("\n")).toMatch(/^WEBHOOK_EVENT_RETENTION \(how long the crew callbacks .*\) is invalid: use a duration/m);
    expect(problems({ ...base, WEBHOOK_EVENT_RETENTION: "10m" }).join("\n")).toMatch(/^WEBHOOK_EVENT_RETENTION .* is invalid: use at least 1h/m);
  });

  it("refuses a flow signing secret shorter than 16 characters, naming the flow and the setting, never echoing it", () => {
    const env = problems({ ...base, FLOW_NAME: "content", FLOW_WEBHOOK_SECRET: "short-flow-key", FLOW_CHANNEL: "C0FLOWS" }).join("\n");
    expect(env).toMatch(/^FLOW_WEBHOOK_SECRET .* of flow "content" is too short: .*at least 16 characters/m);
    expect(env).not.toContain("short-flow-key");
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "crewline-")), "crews.yml");
    fs.writeFileSync(file, "flows:\n  - name: content\n    secret: tiny-key\n    channel: C0FLOWS\n  - name: legal\n    secretEnv: LEGAL_SECRET\n    channel: C0LEGAL\n");
    const found = problems({ ...slackOnly, CREWS_FILE: file, LEGAL_SECRET: "abc123x" }).join("\n");
    expect(found).toMatch(/CREWS_FILE .*flow "content" secret is too short: .*at least 16 characters/);
    expect(found).toMatch(/CREWS_FILE .*flow "legal" secretEnv \(LEGAL_SECRET\) is too short/);
    expect(found).not.toMatch(/tiny-key|abc123x/);
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

describe("loadConfig: Slack ids of reviewers, channels and workspaces", () => {
  // A name where an id belongs matches nobody: every review undecidable, or the crew usable nowhere.
  it("reads ids from CREW_REVIEWERS, FLOW_REVIEWERS, CREW_CHANNELS and CREW_TEAMS; refuses names, naming the variable and the names", () => {
    const crew = loadConfig({ ...base, CREW_REVIEWERS: "U0ALICE, W0BOB, S0EDITORS", CREW_CHANNELS: "C0GENERAL,G0PRIVATE", CREW_TEAMS: "T0ACME, E0GRID" }).crews[0]!;
    expect(crew).toMatchObject({ reviewers: { users: ["U0ALICE", "W0BOB"], usergroups: ["S0EDITORS"] }, channels: ["C0GENERAL", "G0PRIVATE"], teams: ["T0ACME", "E0GRID"] });
    const found = problems({
      ...base,
      CREW_REVIEWERS: "@alice,bob,U0CAROL",
      CREW_CHANNELS: "#general",
      CREW_TEAMS: "acme",
      FLOW_WEBHOOK_SECRET: "flow-signing-secret-01",
      FLOW_CHANNEL: "C0FLOWS",
      FLOW_REVIEWERS: "S0EDITORS, editors",
    });
    expect(found).toEqual([
      expect.stringMatching(
        /^FLOW_REVIEWERS \(comma-separated Slack user ids.*\) is invalid: use Slack user ids like U0123ABCD and user group ids like S0123ABCD, not names: "editors"$/,
      ),
      expect.stringMatching(/^CREW_CHANNELS \(comma-separated channel ids.*\) is invalid: use Slack channel ids like C0123ABCD, not names: "#general"$/),
      expect.stringMatching(
        /^CREW_TEAMS \(comma-separated workspace \(team\) ids.*\) is invalid: use Slack workspace \(team\) ids like T0123ABCD, or "\*" for every workspace, not names: "acme"$/,
      ),
      expect.stringMatching(/^CREW_REVIEWERS \(comma-separated Slack user ids.*\) is invalid: use Slack user ids like U0123ABCD .*, not names: "@alice", "bob"$/),
    ]);
  });

  it("refuses names in a crews file's reviewers, channels and teams, naming the crew or flow", () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "crews-ids-")), "crews.yml");
    fs.writeFileSync(
      file,
      'crews:\n  - name: research\n    baseUrl: https://r.example.com\n    token: t\n    reviewers: [alice, S0EDITORS]\n    channels: [general]\n    teams: [acme]\nflows:\n  - name: content\n    secret: flow-signing-secret-01\n    channel: C0FLOWS\n    reviewers: ["@bob"]\n',
    );
    const { CREW_BASE_URL: _a, CREW_TOKEN: _b, ...rest } = base;
    const found = problems({ ...rest, CREWS_FILE: file });
    expect(found).toEqual([
      expect.stringMatching(/^CREWS_FILE .*: flow "content" reviewers: use Slack user ids like U0123ABCD .*, not names: "@bob"$/),
      expect.stringMatching(/^CREWS_FILE .*: crew "research" channels: use Slack channel ids like C0123ABCD, not names: "general"$/),
      expect.stringMatching(/^CREWS_FILE .*: crew "research" reviewers: use Slack user ids like U0123ABCD .*, not names: "alice"$/),
      expect.stringMatching(/^CREWS_FILE .*: crew "research" teams: use Slack workspace \(team\) ids like T0123ABCD, or "\*" for every workspace, not names: "acme"$/),
    ]);
  });
});

describe("loadConfig: distribution (OAuth) mode", () => {
  const { SLACK_BOT_TOKEN: _bot, ...noBot } = base;
  const key = "q7Vw3bXz0pLk9sRt2YhN8uJc5FgD1aEi4oMx6nBv7Cs=";
  const oauth = { ...noBot, SLACK_CLIENT_ID: "1111.2222", SLACK_CLIENT_SECRET: "client-secret-value", SLACK_STATE_SECRET: "state-secret-0123456789", ENCRYPTION_KEY: key };

  it("reads the client id, secrets and keys instead of a bot token", () => {
    const config = loadConfig({
      ...oauth,
      ENCRYPTION_KEY_PREVIOUS: `9f3a7c01d4e2b6f85a0c3e7d1b9f4a62c8e5d0b7a3f6c2e9d1b4a8f0c7e3d5b2, ${Buffer.from("0123456789abcdefghijklmnopqrstuv").toString("base64")}`,
    });
    expect(config.slack.botToken).toBeUndefined();
    expect(config.slack.oauth).toEqual({ clientId: "1111.2222", clientSecret: "client-secret-value", stateSecret: "state-secret-0123456789" });
    expect(config.encryption?.key.equals(Buffer.from(key, "base64"))).toBe(true);
    expect(config.encryption?.previous).toHaveLength(2);
  });

  it("refuses to start without a key, or with a weak or malformed one, naming ENCRYPTION_KEY and what it is for", () => {
    const { ENCRYPTION_KEY: _k, ...noKey } = oauth;
    expect(problems(noKey)).toEqual([expect.stringMatching(/^ENCRYPTION_KEY is missing: 32 random bytes .* encrypt each workspace's Slack tokens in the database/)]);
    for (const weak of ["0".repeat(64), Buffer.alloc(32, 7).toString("base64"), "a-passphrase-nobody-can-guess", key.slice(0, 20)]) {
      const found = problems({ ...oauth, ENCRYPTION_KEY: weak }).join("\n");
      expect(found).toMatch(/^ENCRYPTION_KEY \(32 random bytes.*\) is invalid: it (looks like a weak key|must be 32 random bytes)/m);
      expect(found).not.toContain(weak);
    }
    expect(problems({ ...oauth, ENCRYPTION_KEY_PREVIOUS: `${key},short` }).join("\n")).toMatch(/^ENCRYPTION_KEY_PREVIOUS .* key 2 must be 32 random bytes/m);
    // A key is checked even in single-workspace mode, where nothing needs it.
    expect(problems({ ...base, ENCRYPTION_KEY: "1".repeat(64) }).join("\n")).toMatch(/^ENCRYPTION_KEY .*weak key/m);
  });

  it("refuses OAuth variables that are only partly set, or set beside SLACK_BOT_TOKEN or SLACK_APP_TOKEN", () => {
    const { SLACK_STATE_SECRET: _s, ...partial } = oauth;
    const found = problems(partial).join("\n");
    expect(found).toMatch(/^SLACK_STATE_SECRET is missing: .*signs the OAuth state.*needed because SLACK_CLIENT_ID and SLACK_CLIENT_SECRET are set/m);
    expect(found).not.toMatch(/SLACK_BOT_TOKEN is missing/);
    expect(found).not.toContain("client-secret-value");
    expect(problems({ ...oauth, SLACK_BOT_TOKEN: "xoxb-1-two" }).join("\n")).toMatch(/SLACK_BOT_TOKEN and SLACK_CLIENT_ID .* are both set: choose one/);
    expect(problems({ ...oauth, SLACK_APP_TOKEN: "xapp-1" }).join("\n")).toMatch(/SLACK_APP_TOKEN is set together with SLACK_CLIENT_ID/);
    expect(problems({ ...oauth, SLACK_STATE_SECRET: "short" }).join("\n")).toMatch(/^SLACK_STATE_SECRET .* at least 16/m);
  });

  it("needs each flow's workspace in OAuth mode, with its Grid org when given; reads crews' teams allow-lists", () => {
    expect(problems({ ...oauth, FLOW_WEBHOOK_SECRET: "flow-signing-secret-01", FLOW_CHANNEL: "C0FLOWS" }).join("\n")).toMatch(/flow "flow" has no workspace: .*FLOW_TEAM/);
    expect(loadConfig({ ...oauth, FLOW_WEBHOOK_SECRET: "flow-signing-secret-01", FLOW_CHANNEL: "C0FLOWS", FLOW_TEAM: "T0ONE" }).flows?.[0]?.team).toBe("T0ONE");
    expect(problems({ ...oauth, FLOW_WEBHOOK_SECRET: "flow-signing-secret-01", FLOW_CHANNEL: "C0FLOWS", FLOW_TEAM: "general" }).join("\n")).toMatch(/^FLOW_TEAM .* is invalid/m);
    expect(
      loadConfig({ ...oauth, FLOW_WEBHOOK_SECRET: "flow-signing-secret-01", FLOW_CHANNEL: "C0FLOWS", FLOW_TEAM: "T0ONE", FLOW_ENTERPRISE: "E0GRID" }).flows?.[0]?.enterprise,
    ).toBe("E0GRID");
    expect(problems({ ...oauth, FLOW_WEBHOOK_SECRET: "flow-signing-secret-01", FLOW_CHANNEL: "C0FLOWS", FLOW_TEAM: "T0ONE", FLOW_ENTERPRISE: "T0ONE" }).join("\n")).toMatch(
      /^FLOW_ENTERPRISE \(the Enterprise Grid org .*\) is invalid: must be an Enterprise Grid org id/m,
    );
    expect(problems({ ...base, FLOW_WEBHOOK_SECRET: "flow-signing-secret-01", FLOW_CHANNEL: "C0FLOWS", FLOW_ENTERPRISE: "E0GRID" }).join("\n")).toMatch(
      /flow "flow" names its Grid org .* but not its workspace/,
    );

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-teams-"));
    const file = path.join(dir, "crews.yaml");
    fs.writeFileSync(
      file,
      "crews:\n  - name: research\n    baseUrl: https://r.example.com\n    token: t\n    teams: [T0ONE, T0TWO]\nflows:\n  - name: content\n    secret: flow-signing-secret-01\n    channel: C0FLOWS\n    team: T0ONE\n    enterprise: E0GRID\n",
    );
    const { CREW_BASE_URL: _a, CREW_TOKEN: _b, ...rest } = oauth;
    const config = loadConfig({ ...rest, CREWS_FILE: file });
    expect(config.crews[0]!.teams).toEqual(["T0ONE", "T0TWO"]);
    expect(config.flows?.[0]).toMatchObject({ team: "T0ONE", enterprise: "E0GRID" });
  });

  it('in OAuth mode offers a crew without teams: to no workspace; teams: ["*"] to every workspace; one bot token: unchanged', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-open-"));
    const file = path.join(dir, "crews.yaml");
    const crew = (name: string, teams?: string) => `  - name: ${name}\n    baseUrl: https://${name}.example.com\n    token: t\n${teams ? `    teams: ${teams}\n` : ""}`;
    fs.writeFileSync(file, `crews:\n${crew("quiet")}${crew("open", '["*"]')}${crew("listed", "[T0ONE]")}`);
    const { CREW_BASE_URL: _a, CREW_TOKEN: _b, ...rest } = oauth;
    const teams = (env: Record<string, string>) => Object.fromEntries(loadConfig(env).crews.map((c) => [c.name, c.teams]));
    expect(teams({ ...rest, CREWS_FILE: file })).toEqual({ quiet: [], open: undefined, listed: ["T0ONE"] });
    // One bot token: a crew without teams: is its workspace's, as before; "*" means the same.
    const { CREW_BASE_URL: _c, CREW_TOKEN: _d, ...single } = base;
    expect(teams({ ...single, CREWS_FILE: file })).toEqual({ quiet: undefined, open: undefined, listed: ["T0ONE"] });
    // The one crew of the environment: CREW_TEAMS.
    expect(loadConfig(oauth).crews[0]!.teams).toEqual([]);
    expect(loadConfig({ ...oauth, CREW_TEAMS: "*" }).crews[0]!.teams).toBeUndefined();
    expect(loadConfig({ ...oauth, CREW_TEAMS: "T0ONE,T0TWO" }).crews[0]!.teams).toEqual(["T0ONE", "T0TWO"]);
    expect(problems({ ...oauth, CREW_TEAMS: "*,T0ONE" }).join("\n")).toMatch(/crew "crew" teams: "\*" \(every workspace\) cannot be listed together with workspace ids/);
  });
});
