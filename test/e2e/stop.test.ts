// Stopping a run from Slack (issue #24): the Stop button on its announcement and `/crew stop`, for
// the run's starter and whoever may decide its reviews; a crew without POST /stop gets an honest
// answer and Stop following. Through signed requests to /slack/events, the Slack stand-in and the
// local crew service (which implements POST /stop).
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { APPROVE_ACTION, RUN_ACTIONS_BLOCK, STOP_ACTION, STOP_FOLLOWING_ACTION } from "../../src/adapters/slack/blocks/index.js";
import type { SimTask } from "../../src/sim/crew-service.js";
import { CHANNEL, eventually, type Harness, type HarnessOptions, startHarness, USER } from "../support/harness.js";
import { scrape } from "../support/metrics.js";
import { kickoffForm, killReplicasAfterEach, replicaServices, startReplica, submitKickoff } from "../support/replicas.js";
import { messageText, pendingReview, startRunViaSlack } from "../support/reviews.js";
import { usePostgres } from "../support/test-database.js";

killReplicasAfterEach();

let h: Harness;
afterEach(async () => {
  await h?.close();
  h = undefined as unknown as Harness;
});

const BOB = "U0BOB";
const METRICS_TOKEN = "metrics-token-0123456789abcdef";
const CAROL = "U0CAROL";
/** Two tasks, both waiting for a review: a run stays live until someone decides (or stops it). */
const TASKS: SimTask[] = [
  { id: "task-research", name: "research_task", agent: "Researcher", humanInput: true, delayMs: 30, steps: 2 },
  { id: "task-write", name: "writing_task", agent: "Writer", humanInput: true, delayMs: 30, steps: 2 },
];

const run = (id: string) => h.bot.database.prisma.execution.findUniqueOrThrow({ where: { id } });
const stopCalls = () => h.crew.requests.filter((r) => r.method === "POST" && r.path.startsWith("/stop/"));
const ephemeralsFor = (user: string) => h.slack.ephemerals.filter((e) => e.user === user);
const said = (user: string, pattern: RegExp, what: string) => eventually(() => ephemeralsFor(user).find((e) => pattern.test(e.text ?? "")), { what });
/** Lets anything that would wrongly reach the crew or Slack arrive before asserting that nothing did. */
const settle = () => new Promise((r) => setTimeout(r, 300));

async function start(opts: HarnessOptions = {}) {
  h = await startHarness({ ...opts, crew: { tasks: TASKS, ...opts.crew } });
  const execution = await startRunViaSlack(h);
  const review = await pendingReview(h);
  // The announcement gains its Stop button once the kickoff id is stored.
  const announcement = await eventually(() => h.slack.messages(CHANNEL).find((m) => m.ts === execution.threadTs && JSON.stringify(m.blocks ?? []).includes(STOP_ACTION)), {
    what: "the announcement's Stop button",
  });
  return { execution, review, announcement };
}

/** A Stop click as Slack sends it: on the announcement (or another message), naming a run. */
function clickStop(value: string, where: { messageTs: string; channel?: string }, user = USER) {
  return h.requests.blockAction({
    user_id: user,
    channel_id: where.channel ?? CHANNEL,
    message_ts: where.messageTs,
    action: { action_id: STOP_ACTION, block_id: RUN_ACTIONS_BLOCK, value },
  });
}

function clickStopFollowing(value: string, messageTs: string, user = USER) {
  return h.requests.blockAction({ user_id: user, channel_id: CHANNEL, message_ts: messageTs, action: { action_id: STOP_FOLLOWING_ACTION, block_id: RUN_ACTIONS_BLOCK, value } });
}

/** The run's crew webhook URL (the task one, with its kind swapped), as the crew would call it late. */
function lateCrewWebhook(executionId: string) {
  const task = h.crew.webhookDeliveries.find((d) => d.url.includes(`/${executionId}/task/`) || d.url.includes(`/${executionId}/input/`));
  if (!task) throw new Error("no webhook URL seen");
  return task.url.replace(/\/(task|input)\//, "/crew/");
}

describe("Stop", () => {
  it("the starter's click: one POST /stop, the run ends stopped by them everywhere, its review closes, late webhooks get 410, nothing more is posted", async () => {
    const { execution, review, announcement } = await start({ config: { metricsToken: METRICS_TOKEN } });
    const answer = await clickStop(execution.id, { messageTs: announcement.ts });
    expect(answer.status).toBe(200);

    await eventually(() => stopCalls().length === 1, { what: "the crew's POST /stop" });
    expect(stopCalls()[0]!.path).toBe(`/stop/${execution.kickoffId}`);
    expect(stopCalls()[0]!.headers.authorization).toBe("Bearer crew-org-token");
    await eventually(async () => (await run(execution.id)).state === "stopped", { what: "the stopped run" });
    expect((await run(execution.id)).stoppedBy).toBe(USER);
    expect(h.crew.executions.get(execution.kickoffId!)?.state).toBe("STOPPED");
    await h.settled();

    // The announcement: stopped by the starter, no Stop button any more (Slack's pace may hold an update a moment).
    const shown = await eventually(() => [messageText(h, announcement.ts)].find((t) => t.includes("Stopped by")), { what: "the announcement" });
    expect(shown).toContain(`Stopped by <@${USER}>`);
    expect(shown).not.toContain(STOP_ACTION);
    // The thread says so; the review lost its buttons and says why.
    const notice = await eventually(() => h.slack.messages(CHANNEL).find((m) => m.thread_ts === execution.threadTs && /stopped this run/.test(m.text ?? "")), {
      what: "the notice",
    });
    expect(notice.text).toContain(`<@${USER}> stopped this run`);
    const closed = await eventually(() => [messageText(h, review.msg.ts)].find((t) => !t.includes(APPROVE_ACTION)), { what: "the closed review" });
    expect(closed).toContain(`The run was stopped by <@${USER}>`);
    expect((await h.bot.database.prisma.review.findUniqueOrThrow({ where: { id: review.reviewId } })).state).toBe("closed");
    // The clicker hears it privately.
    await said(USER, /You stopped the run/, "the confirmation");
    // Audit: one stop row, by the starter.
    const audit = await h.bot.database.prisma.auditRecord.findMany({ where: { executionId: execution.id, kind: "stop" } });
    expect(audit).toMatchObject([{ actor: USER, decision: "stopped" }]);

    // A late crew webhook is refused like any ended run's; nothing more reaches Slack.
    await h.settled();
    await settle();
    const posts = h.slack.callsTo("chat.postMessage").length;
    const updates = h.slack.callsTo("chat.update").length;
    const late = await fetch(lateCrewWebhook(execution.id), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ kickoff_id: execution.kickoffId, result: "late" }),
    });
    expect(late.status).toBe(410);
    await settle();
    await h.settled();
    expect(h.slack.callsTo("chat.postMessage").length).toBe(posts);
    expect(h.slack.callsTo("chat.update").length).toBe(updates);
    // No completion notice in the channel for a stopped run.
    expect(h.slack.messages(CHANNEL).filter((m) => !m.thread_ts && /finished|failed/.test(m.text ?? ""))).toEqual([]);

    // App Home lists the run as stopped.
    await h.requests.event({ type: "app_home_opened", user: USER, channel: "D0ALICE", tab: "home" });
    const home = await eventually(() => h.slack.callsTo("views.publish").find((c) => c.args.user_id === USER), { what: "the Home" });
    expect(JSON.stringify(home.args.view)).toContain("⏹️ stopped");

    // Metrics: one run finished as stopped, one crew stop call.
    const m = await scrape(h.botUrl, `Bearer ${METRICS_TOKEN}`);
    expect(m.value("crewline_runs_finished_total", { crew: "research", outcome: "stopped" })).toBe(1);
    expect(m.value("crewline_crew_api_calls_total", { crew: "research", operation: "stop" })).toBe(1);

    // A second click, later: already stopped, by whom; the crew hears nothing more.
    await clickStop(execution.id, { messageTs: announcement.ts });
    await said(USER, new RegExp(`<@${USER}> already stopped this run`), "already stopped");
    expect(stopCalls()).toHaveLength(1);
  });

  it("a double click (and a click racing /crew stop): exactly one POST /stop; the others hear who stopped it", async () => {
    const { execution, announcement } = await start();
    h.slack.setMembers(CHANNEL, [USER, BOB]);
    await Promise.all([
      clickStop(execution.id, { messageTs: announcement.ts }),
      clickStop(execution.id, { messageTs: announcement.ts }),
      clickStop(execution.id, { messageTs: announcement.ts }, BOB),
      h.requests.command({ text: `stop ${execution.kickoffId}`, user_id: BOB, channel_id: CHANNEL }),
    ]);
    await eventually(async () => (await run(execution.id)).state === "stopped", { what: "the stopped run" });
    await h.settled();
    await settle();
    expect(stopCalls()).toHaveLength(1);
    expect(await h.bot.database.prisma.auditRecord.count({ where: { executionId: execution.id, kind: "stop" } })).toBe(1);
    const notices = () => h.slack.callsTo("chat.postMessage").filter((c) => /stopped this run/.test(String(c.args.text ?? "")));
    await eventually(() => notices().length > 0, { what: "the thread notice" });
    // Four answers, privately: one stopped it, the others hear who is stopping or stopped it.
    const answers = () => [...h.slack.ephemerals.map((e) => e.text ?? ""), ...h.slack.callsTo("response_url").map((c) => String(c.args.text ?? ""))];
    await eventually(() => answers().length >= 4, { what: "four answers" });
    expect(answers().filter((t) => /You stopped the run/.test(t))).toHaveLength(1);
    expect(answers().filter((t) => /already stopped this run|is stopping this run/.test(t))).toHaveLength(3);
    await settle();
    expect(notices()).toHaveLength(1);
  });

  it("refuses a stranger privately (the crew's reviewer rules), and nothing reaches the crew", async () => {
    const { execution, review, announcement } = await start({ research: { reviewers: { users: [CAROL], usergroups: [] } } });
    // Bob clicks in the channel (so he may see the run) but may not decide its reviews.
    await clickStop(execution.id, { messageTs: announcement.ts }, BOB);
    await said(BOB, /Only the run's starter .* and whoever may decide its reviews may stop it/, "the refusal");
    await h.requests.command({ text: `stop ${execution.kickoffId}`, user_id: BOB, channel_id: CHANNEL });
    await eventually(() => h.slack.callsTo("response_url").some((c) => /may stop it/.test(String(c.args.text ?? ""))), { what: "the command's refusal" });
    await settle();
    expect(stopCalls()).toEqual([]);
    expect((await run(execution.id)).state).not.toBe("stopped");
    expect(messageText(h, review.msg.ts)).toContain(APPROVE_ACTION);
    // Carol, a reviewer, may.
    await clickStop(execution.id, { messageTs: announcement.ts }, CAROL);
    await eventually(async () => (await run(execution.id)).state === "stopped", { what: "stopped by the reviewer" });
    expect((await run(execution.id)).stoppedBy).toBe(CAROL);
  });

  it("holds against forged buttons: another run's id, another message, a garbage value", async () => {
    const { execution, announcement, review } = await start();
    const other = "00000000-0000-4000-8000-00000000abcd";
    await clickStop(other, { messageTs: announcement.ts });
    await clickStop(execution.id, { messageTs: review.msg.ts });
    await clickStop('\'; DROP TABLE "Execution"; --', { messageTs: announcement.ts });
    await clickStop(execution.id, { messageTs: announcement.ts, channel: "C0ELSEWHERE" });
    await eventually(() => ephemeralsFor(USER).length >= 4, { what: "four refusals" });
    const texts = ephemeralsFor(USER).map((e) => e.text ?? "");
    expect(texts.filter((t) => /does not belong to the run it names/.test(t))).toHaveLength(2);
    expect(texts.filter((t) => /can't find this run/.test(t))).toHaveLength(2);
    await settle();
    expect(stopCalls()).toEqual([]);
    expect((await run(execution.id)).state).toBe("waiting");
  });
});

describe("a stop whose sender died", () => {
  it("holds the run for a minute (others hear who is stopping it), then anyone allowed may stop it", async () => {
    const { execution, announcement } = await start();
    // As left by a replica killed between its claim and the crew's answer.
    await h.bot.database.prisma.execution.update({ where: { id: execution.id }, data: { stoppedBy: BOB, stopClaimedAt: new Date() } });
    await clickStop(execution.id, { messageTs: announcement.ts });
    await said(USER, new RegExp(`<@${BOB}> is stopping this run`), "who is stopping it");
    expect(stopCalls()).toEqual([]);
    expect(messageText(h, announcement.ts)).not.toContain("Stopped by");

    await h.bot.database.prisma.execution.update({ where: { id: execution.id }, data: { stopClaimedAt: new Date(Date.now() - 120_000) } });
    await clickStop(execution.id, { messageTs: announcement.ts });
    await said(USER, /You stopped the run/, "the stop");
    expect(stopCalls()).toHaveLength(1);
    expect(await run(execution.id)).toMatchObject({ state: "stopped", stoppedBy: USER, stopClaimedAt: null });
  });
});

describe("a stop the crew did not take", () => {
  it("a server error: the run goes on, the asker is told, and a later click stops it", async () => {
    const { execution, announcement, review } = await start({ crew: { failWith: [{ endpoint: "stop", status: 500, times: 1 }] } });
    await clickStop(execution.id, { messageTs: announcement.ts });
    await said(USER, /The stop did not reach the crew, so the run of \*research\* goes on/, "the failure");
    expect(await run(execution.id)).toMatchObject({ state: "waiting", stoppedBy: null, stopClaimedAt: null });
    expect(messageText(h, review.msg.ts)).toContain(APPROVE_ACTION);

    await clickStop(execution.id, { messageTs: announcement.ts });
    await said(USER, /You stopped the run/, "the stop");
    expect(stopCalls()).toHaveLength(2);
  });

  it("the crew says the run had already ended (409): nothing is marked stopped", async () => {
    const { execution, announcement } = await start({ crew: { failWith: [{ endpoint: "stop", status: 409 }] } });
    await clickStop(execution.id, { messageTs: announcement.ts });
    await said(USER, /The crew says this run of \*research\* had already ended/, "the answer");
    expect(await run(execution.id)).toMatchObject({ state: "waiting", stoppedBy: null });
  });
});

describe("/crew stop", () => {
  it("stops by kickoff id; any other text gets a clear usage answer; unknown and foreign ids get what an unknown id gets", async () => {
    const { execution } = await start();
    const answers = () => h.slack.callsTo("response_url").map((c) => String(c.args.text ?? ""));

    for (const text of ["stop", "stop   ", "stop a b", `stop ${execution.kickoffId} now`]) {
      const res = await h.requests.command({ text, user_id: USER, channel_id: CHANNEL });
      expect(res.status).toBe(200);
      expect(res.body).toContain("Usage: `/crew stop &lt;kickoff_id&gt;`");
    }
    await h.requests.command({ text: "stop <!channel>&x", user_id: USER, channel_id: CHANNEL });
    const unknown = await eventually(() => answers().find((t) => /I don't know a run/.test(t)), { what: "unknown id" });
    expect(unknown).toContain("&lt;!channel&gt;&amp;x");
    // Someone outside the run's channel, with a real id: the same answer as an unknown id.
    h.slack.setMembers(CHANNEL, [USER]);
    await h.requests.command({ text: `stop ${execution.kickoffId}`, user_id: BOB, channel_id: "C0ELSEWHERE" });
    await eventually(() => answers().filter((t) => /I don't know a run/.test(t)).length === 2, { what: "the foreign id's answer" });
    await settle();
    expect(stopCalls()).toEqual([]);

    await h.requests.command({ text: `STOP ${execution.kickoffId}`, user_id: USER, channel_id: "C0ELSEWHERE" });
    await eventually(() => answers().find((t) => /You stopped the run/.test(t)), { what: "the stop's answer" });
    expect(stopCalls()).toHaveLength(1);
    expect((await run(execution.id)).state).toBe("stopped");
  });
});

describe("a crew without POST /stop", () => {
  it.each([405, 404])("answers %i honestly; Stop following ends the run here as abandoned, and polling stops", async (status) => {
    const { execution, announcement, review } = await start({
      crew: { failWith: [{ endpoint: "stop", status }] },
      config: { polling: { tickMs: 50, minBackoffMs: 100, maxBackoffMs: 200 } },
    });
    await clickStop(execution.id, { messageTs: announcement.ts });
    const honest = await said(USER, /cannot be stopped from Slack/, "the honest answer");
    const button = (honest.blocks as any[]).flatMap((b) => b.elements ?? []).find((e: any) => e.action_id === STOP_FOLLOWING_ACTION);
    expect(button?.value).toBe(execution.id);
    expect(stopCalls()).toHaveLength(1);
    // Nothing changed: the run is live, its review still open, its announcement still offers Stop.
    expect((await run(execution.id)).state).toBe("waiting");
    expect((await run(execution.id)).stoppedBy).toBeNull();
    expect(messageText(h, review.msg.ts)).toContain(APPROVE_ACTION);

    // A stranger's forged Stop following is refused.
    h.slack.setMembers(CHANNEL, [USER]);
    await h.requests.blockAction({
      user_id: BOB,
      channel_id: "C0ELSEWHERE",
      message_ts: honest.ts,
      action: { action_id: STOP_FOLLOWING_ACTION, block_id: RUN_ACTIONS_BLOCK, value: execution.id },
    });
    await said(BOB, /can't find this run/, "the stranger's refusal");
    expect((await run(execution.id)).state).toBe("waiting");

    await clickStopFollowing(execution.id, honest.ts);
    await eventually(async () => (await run(execution.id)).state === "abandoned", { what: "the abandoned run" });
    await eventually(() => messageText(h, announcement.ts).includes(`No longer followed by <@${USER}>`), { what: "the announcement" });
    await eventually(() => !messageText(h, review.msg.ts).includes(APPROVE_ACTION), { what: "the closed review" });
    await eventually(() => h.slack.messages(CHANNEL).some((m) => /stopped following this run/.test(m.text ?? "")), { what: "the notice" });
    expect(stopCalls()).toHaveLength(1);
    expect(await h.bot.database.prisma.auditRecord.findMany({ where: { executionId: execution.id, kind: "stop" } })).toMatchObject([{ actor: USER, decision: "abandoned" }]);

    // Polling stops: no more status requests for it.
    await settle();
    const polls = () => h.crew.requests.filter((r) => r.path.includes(execution.kickoffId!) && !r.path.startsWith("/stop/")).length;
    const before = polls();
    await new Promise((r) => setTimeout(r, 800));
    expect(polls()).toBe(before);
    // A second Stop following: already done.
    await clickStopFollowing(execution.id, honest.ts);
    await said(USER, /already stopped following this run/, "already abandoned");
  });
});

describe.runIf(usePostgres)("several replicas on PostgreSQL", () => {
  it("Stop clicked on two replicas at once, twice each: one POST /stop, one stop notice, one audit row", async () => {
    const { slack, crew, db } = await replicaServices(TASKS);
    const [a, b] = await Promise.all([
      startReplica("a", { databaseUrl: db.url, slack, crew, webhooks: true }),
      startReplica("b", { databaseUrl: db.url, slack, crew, webhooks: true }),
    ]);
    await submitKickoff(b, await kickoffForm(slack, a), "Replicated stop");
    const announcement = await eventually(() => slack.messages(CHANNEL).find((m) => !m.thread_ts && JSON.stringify(m.blocks ?? []).includes(STOP_ACTION)), {
      what: "the announcement's Stop button",
      timeoutMs: 30_000,
    });
    const value = (announcement.blocks as any[]).flatMap((x) => x.elements ?? []).find((e: any) => e.action_id === STOP_ACTION).value as string;
    const answers = await Promise.all(
      [a, b, a, b].map((replica) =>
        replica.requests.blockAction({ user_id: USER, channel_id: CHANNEL, message_ts: announcement.ts, action: { action_id: STOP_ACTION, block_id: RUN_ACTIONS_BLOCK, value } }),
      ),
    );
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const notices = () => slack.callsTo("chat.postMessage").filter((c) => /stopped this run/.test(String(c.args.text ?? "")));
    await eventually(() => notices().length > 0, { what: "the stop notice", timeoutMs: 20_000 });
    await eventually(() => /Stopped by/.test(JSON.stringify(slack.messages(CHANNEL).find((m) => m.ts === announcement.ts)?.blocks ?? [])), {
      what: "the stopped announcement",
      timeoutMs: 20_000,
    });
    await eventually(() => slack.ephemerals.length >= 4, { what: "four private answers", timeoutMs: 20_000 });
    await new Promise((r) => setTimeout(r, 1000));
    expect(crew.requests.filter((r) => r.path.startsWith("/stop/"))).toHaveLength(1);
    expect(notices()).toHaveLength(1);
    expect(slack.ephemerals.filter((e) => /You stopped the run/.test(e.text ?? ""))).toHaveLength(1);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const rows = (
        await client.query(`SELECT e.state, e."stoppedBy", (SELECT count(*) FROM "AuditRecord" r WHERE r."executionId" = e.id AND r.kind = 'stop') AS audits FROM "Execution" e`)
      ).rows;
      expect(rows).toEqual([{ state: "stopped", stoppedBy: USER, audits: "1" }]);
    } finally {
      await client.end();
    }
  }, 120_000);
});
