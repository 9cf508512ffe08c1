// GET /metrics after real runs: signed Slack requests, the local crew service sending real webhooks,
// the Slack stand-in (which answers a 429 and an error when told to). Values, not just names.
import { afterEach, describe, expect, it } from "vitest";
import { type Logger, redact } from "../../src/log/log.js";
import { Metrics } from "../../src/metrics/metrics.js";
import { BOT_TOKEN, CHANNEL, CREW_TOKEN, eventually, freePort, type Harness, SIGNING_SECRET, startHarness, USER } from "../support/harness.js";
import { type Scrape, scrape } from "../support/metrics.js";
import { prismaOf } from "../support/prisma.js";
import { clickReview, pendingReview, resumeCalls, startRunViaSlack } from "../support/reviews.js";

let h: Harness;
afterEach(async () => h?.close());

const METRICS_TOKEN = "metrics-token-0123456789abcdef";
const BEARER = `Bearer ${METRICS_TOKEN}`;

/** Every label value of every sample. */
const labelValues = (s: Scrape) => s.samples.flatMap((sample) => Object.values(sample.labels));

/** Labels a scrape may carry, and nothing else: no id, token or user name can hide in another. */
const LABEL_NAMES = new Set(["kind", "answer", "method", "error", "crew", "operation", "outcome", "source", "decision", "le", "quantile"]);

describe("GET /metrics", () => {
  it("counts a reviewed run: callbacks, Slack calls and a 429, crew calls, runs, reviews waiting, decision and visibility times", async () => {
    h = await startHarness({ config: { metricsToken: METRICS_TOKEN } });
    // The run's announcement is rate limited once: the Web API client waits and posts it again.
    h.slack.rateLimitNext("chat.postMessage", 1, 0);
    const execution = await startRunViaSlack(h);

    const first = await pendingReview(h);
    // While a review waits, every replica reads the same figure from the database.
    const during = await scrape(h.botUrl, BEARER);
    expect(during.status).toBe(200);
    expect(during.value("crewline_reviews_waiting")).toBe(1);
    expect(during.value("crewline_runs_started_total", { crew: "research" })).toBe(1);
    expect(during.value("crewline_runs_finished_total", { crew: "research", outcome: "completed" })).toBeUndefined();

    await clickReview(h, first, false, "Cite primary sources");
    const second = await pendingReview(h, { containing: "round 2" });
    await clickReview(h, second, true, "");
    const third = await pendingReview(h, { containing: "writing_task" });
    await clickReview(h, third, true, "Ship it");
    await eventually(async () => (await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } })).completionTs, {
      what: "the completion notice",
    });
    // Slack has the last message a moment before the bot's own bookkeeping ends.
    await eventually(async () => (await scrape(h.botUrl, BEARER)).value("crewline_runs_finished_total", { crew: "research", outcome: "completed" }) === 1);
    const m = await eventually(
      async () => {
        const s = await scrape(h.botUrl, BEARER);
        // Quiet: every Slack effect done, and every call the stand-in answered counted (progress updates may trail).
        return s.value("crewline_slack_api_calls_total", { method: "chat.postMessage" }) === h.slack.callsTo("chat.postMessage").length &&
          s.value("crewline_slack_api_calls_total", { method: "chat.update" }) === h.slack.callsTo("chat.update").length &&
          s.value("crewline_slack_effects_pending") === 0
          ? s
          : undefined;
        // Progress refused a Slack token waits a few seconds for the next (docs/slack-budget.md): quiet takes that long.
      },
      { timeoutMs: 30_000, what: "every Slack effect done and counted" },
    );

    expect(m.contentType).toMatch(/^text\/plain; version=0\.0\.4/);

    // Callbacks: every task and human-input webhook the crew sent was answered 202 and counted as such.
    const delivered = (kind: string) => h.crew.webhookDeliveries.filter((d) => d.kind === kind && d.status === 202).length;
    expect(delivered("task")).toBe(3);
    expect(m.value("crewline_callbacks_received_total", { kind: "task", answer: "202" })).toBe(3);
    expect(m.value("crewline_callbacks_received_total", { kind: "input", answer: "202" })).toBe(delivered("input"));
    expect(delivered("input")).toBe(3);
    expect(m.value("crewline_callbacks_received_total", { kind: "crew", answer: "202" })).toBe(1);
    expect(m.value("crewline_callbacks_received_total", { kind: "step", answer: "202" })).toBe(delivered("step"));
    expect(await prismaOf(h.bot.database).webhookEvent.count({ where: { kind: "task" } })).toBe(3);

    // Slack: calls by method match what the stand-in received, the 429 included.
    expect(h.slack.rateLimited).toBe(1);
    expect(m.value("crewline_slack_api_rate_limited_total", { method: "chat.postMessage" })).toBe(1);
    expect(m.value("crewline_slack_api_calls_total", { method: "chat.postMessage" })).toBeGreaterThanOrEqual(6);
    expect(m.value("crewline_slack_api_calls_total", { method: "views.open" })).toBe(h.slack.callsTo("views.open").length);
    expect(m.value("crewline_slack_api_calls_total", { method: "chat.postEphemeral" })).toBeUndefined();
    expect(m.sum("crewline_slack_api_errors_total")).toBe(0);
    expect(m.value("crewline_slack_api_duration_seconds_count", { method: "chat.postMessage" })).toBe(h.slack.callsTo("chat.postMessage").length);

    // Crew API: one kickoff, three resumes, by crew and operation; no errors.
    expect(resumeCalls(h)).toHaveLength(3);
    expect(m.value("crewline_crew_api_calls_total", { crew: "research", operation: "kickoff" })).toBe(1);
    expect(m.value("crewline_crew_api_calls_total", { crew: "research", operation: "resume" })).toBe(3);
    expect(m.value("crewline_crew_api_calls_total", { crew: "research", operation: "inputs" })).toBe(1);
    expect(m.value("crewline_crew_api_duration_seconds_count", { crew: "research", operation: "resume" })).toBe(3);
    expect(m.sum("crewline_crew_api_errors_total")).toBe(0);

    // Runs and reviews.
    expect(m.value("crewline_runs_started_total", { crew: "research" })).toBe(1);
    expect(m.value("crewline_runs_finished_total", { crew: "research", outcome: "completed" })).toBe(1);
    expect(m.sum("crewline_runs_finished_total", { outcome: "failed" })).toBe(0);
    expect(m.value("crewline_reviews_waiting")).toBe(0);
    expect(m.value("crewline_decisions_in_flight")).toBe(0);
    expect(m.value("crewline_review_decision_seconds_count", { decision: "reject" })).toBe(1);
    expect(m.value("crewline_review_decision_seconds_count", { decision: "approve" })).toBe(2);
    expect(m.value("crewline_review_decision_seconds_sum", { decision: "approve" })).toBeLessThan(60);
    // Each review's decision controls became visible after its human-input request; each task message after its task webhook.
    expect(m.value("crewline_review_visible_seconds_count", { source: "input" })).toBe(3);
    // (A task message whose human-input request overtook it is shown with its controls at once: counted once, as input.)
    expect(m.value("crewline_review_visible_seconds_count", { source: "task" })).toBeGreaterThanOrEqual(1);
    expect(m.value("crewline_review_visible_seconds_count", { source: "task" })).toBeLessThanOrEqual(3);
    expect(m.value("crewline_review_visible_seconds_sum", { source: "input" })).toBeLessThan(30);
    expect(m.value("crewline_slack_effects_pending")).toBe(0);
    expect(m.value("crewline_slack_effects_oldest_age_seconds")).toBe(0);
    expect(m.value("crewline_poll_leases_held")).toBeGreaterThanOrEqual(0);
    expect(m.value("crewline_callbacks_unprocessed")).toBe(0);
    expect(m.value("crewline_shared_figures_up")).toBe(1);
    // Process figures come along.
    expect(m.value("process_resident_memory_bytes")).toBeGreaterThan(0);

    // No label carries an id, a token, a secret or a user.
    const reviews = await prismaOf(h.bot.database).review.findMany();
    const run = await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } });
    const secrets = [
      run.id,
      run.kickoffId!,
      run.webhookSecret,
      run.humanInputToken!,
      run.threadTs!,
      USER,
      CHANNEL,
      BOT_TOKEN,
      CREW_TOKEN,
      SIGNING_SECRET,
      ...reviews.flatMap((r) => [r.id, r.messageTs!]),
    ];
    for (const value of labelValues(m)) for (const secret of secrets) expect(value).not.toContain(secret);
    for (const sample of m.samples.filter((x) => x.name.startsWith("crewline_")))
      for (const name of Object.keys(sample.labels)) expect(LABEL_NAMES.has(name), `label ${name} of ${sample.name}`).toBe(true);
    expect(m.text).not.toContain(run.webhookSecret);
  }, 60_000);

  it("counts refused callbacks by kind and answer, Slack errors by code, crew errors by kind, and pending Slack effects", async () => {
    h = await startHarness({ config: { metricsToken: METRICS_TOKEN } });
    const execution = await startRunViaSlack(h);
    const review = await pendingReview(h);
    const post = (path: string, body: string) => fetch(`${h.botUrl}${path}`, { method: "POST", body, headers: { "content-type": "application/json" } }).then((r) => r.status);
    const task = JSON.stringify({ name: "forged", output: "x", kickoff_id: execution.kickoffId });
    expect(await post(`/hooks/${execution.id}/task/wrong-secret`, task)).toBe(401);
    expect(await post(`/hooks/${execution.id}/task/wrong-secret`, task)).toBe(401);
    expect(await post(`/hooks/${execution.id}/bogus-kind-${execution.webhookSecret}/x`, task)).toBe(404);
    expect(await post(`/hooks/${execution.id}/crew/${execution.webhookSecret}`, "{not json")).toBe(400);

    // The crew fails a resume once with a 500: counted as a server error of that crew's resume.
    h.crew.setOptions({ failWith: [{ endpoint: "resume", status: 500, times: 1, body: { error: "boom" } }] });
    await clickReview(h, review, true, "");
    await eventually(() => h.slack.callsTo("chat.postEphemeral")[0]);

    // Slack fails the next review's post for a while: the review is stored, its post a pending Slack effect (retried).
    h.slack.failNext("chat.postMessage", "internal_error", 5);
    await clickReview(h, review, true, "");
    await eventually(() => prismaOf(h.bot.database).review.findFirst({ where: { taskName: "writing_task", messageTs: null } }), { what: "an unposted review" });

    // The waiting figure is read from the database at the scrape; the review round may still be turning
    // pending (its wait confirmed) as the scrape is taken, so the scrape is compared with a count taken after it.
    let waiting = -1;
    const m = await eventually(async () => {
      const s = await scrape(h.botUrl, BEARER);
      waiting = await prismaOf(h.bot.database).review.count({ where: { state: "pending" } });
      const failedOnce = (s.value("crewline_slack_api_errors_total", { method: "chat.postMessage", error: "internal_error" }) ?? 0) >= 1;
      return failedOnce && (s.value("crewline_slack_effects_pending") ?? 0) >= 1 && s.value("crewline_reviews_waiting") === waiting ? s : undefined;
    });
    expect(m.value("crewline_callbacks_received_total", { kind: "task", answer: "401" })).toBe(2);
    expect(m.value("crewline_callbacks_received_total", { kind: "other", answer: "404" })).toBe(1);
    expect(m.value("crewline_callbacks_received_total", { kind: "crew", answer: "400" })).toBe(1);
    expect(m.value("crewline_crew_api_errors_total", { crew: "research", operation: "resume", error: "server" })).toBe(1);
    expect(m.value("crewline_crew_api_calls_total", { crew: "research", operation: "resume" })).toBe(2);
    const refused = h.slack.callsTo("chat.postMessage").filter((c) => c.error === "internal_error").length;
    expect(refused).toBeGreaterThanOrEqual(1);
    expect(m.value("crewline_slack_api_errors_total", { method: "chat.postMessage", error: "internal_error" })).toBeGreaterThanOrEqual(1);
    expect(m.value("crewline_slack_effects_pending")).toBeGreaterThanOrEqual(1);
    expect(m.value("crewline_slack_effects_oldest_age_seconds")).toBeGreaterThan(0);
    // The unposted round is also no review anyone can see yet: the one that waits is counted from the database.
    expect(waiting).toBeGreaterThanOrEqual(1);
    expect(m.value("crewline_reviews_waiting")).toBe(waiting);
    for (const value of labelValues(m)) expect(value).not.toContain(execution.webhookSecret);
  });

  it("requires METRICS_TOKEN as a bearer token when it is set, and never logs it", async () => {
    const lines: string[] = [];
    const record = (level: string) => (msg: string, fields?: Record<string, unknown>) => void lines.push(redact(JSON.stringify({ level, msg, ...fields })));
    const log: Logger = { debug: record("debug"), info: record("info"), warn: record("warn"), error: record("error") };
    h = await startHarness({ config: { metricsToken: METRICS_TOKEN }, crewline: { log } });

    const none = await scrape(h.botUrl);
    expect(none.status).toBe(401);
    expect(none.text).not.toContain("crewline_");
    expect((await fetch(`${h.botUrl}/metrics`)).headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect((await scrape(h.botUrl, "Bearer wrong-token-0123456789abcdef")).status).toBe(401);
    expect((await scrape(h.botUrl, `Bearer ${METRICS_TOKEN}x`)).status).toBe(401);
    expect((await scrape(h.botUrl, METRICS_TOKEN)).status).toBe(401);
    expect((await scrape(h.botUrl, `Basic ${METRICS_TOKEN}`)).status).toBe(401);
    const ok = await scrape(h.botUrl, `Bearer ${METRICS_TOKEN}`);
    expect(ok.status).toBe(200);
    expect(ok.value("crewline_shared_figures_up")).toBe(1);
    expect(ok.value("crewline_reviews_waiting")).toBe(0);
    expect(lines.join("\n")).not.toContain(METRICS_TOKEN);
    // The health check stays open.
    expect((await fetch(`${h.botUrl}/healthz`)).status).toBe(200);
  });

  it("is not served on the public port by default; METRICS_PORT serves it on loopback without a token", async () => {
    h = await startHarness();
    const closed = await scrape(h.botUrl);
    expect(closed.status).toBe(404);
    expect(closed.text).not.toContain("crewline_");
    expect(closed.text).toMatch(/METRICS_TOKEN .*METRICS_PORT/);
    await h.close();

    const metricsPort = await freePort();
    h = await startHarness({ config: { metricsPort, metricsHost: "127.0.0.1" } });
    expect((await scrape(h.botUrl)).status).toBe(404);
    const open = await scrape(`http://127.0.0.1:${metricsPort}`);
    expect(open.status).toBe(200);
    expect(open.value("crewline_reviews_waiting")).toBe(0);
    expect(open.value("crewline_slack_effects_pending")).toBe(0);
    // That port serves the figures and nothing else (it listens on METRICS_HOST, loopback by default: config.test.ts).
    expect((await fetch(`http://127.0.0.1:${metricsPort}/healthz`)).status).toBe(404);
  });

  it("reports the event loop's delay (prom-client's default figures), once per bot in a process running several", async () => {
    h = await startHarness({ config: { metricsToken: METRICS_TOKEN } });
    // Another bot's figures in the same process: default figures are registered per registry.
    const other = new Metrics({ crews: [] });
    // Work that holds the loop, before each scrape (a scrape resets the figure): the lag figures must show it.
    const m = await eventually(async () => {
      const until = Date.now() + 80;
      while (Date.now() < until);
      const s = await scrape(h.botUrl, BEARER);
      return (s.value("nodejs_eventloop_lag_max_seconds") ?? 0) >= 0.05 ? s : undefined;
    });
    expect(m.samples.filter((s) => s.name === "nodejs_eventloop_lag_seconds")).toHaveLength(1);
    expect(m.value("nodejs_eventloop_lag_seconds")).toBeGreaterThanOrEqual(0);
    expect(m.value("nodejs_eventloop_lag_p99_seconds")).toBeGreaterThan(0);
    expect(await other.scrape()).toMatch(/^nodejs_eventloop_lag_seconds \S+$/m);
  }, 60_000);
});
