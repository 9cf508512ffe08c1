// Stopping a run from Slack (issue #24): the Stop button on its announcement and `/crew stop`, for
// the run's starter and whoever may decide its reviews; a crew without POST /stop gets an honest
// answer and Stop following. Through signed requests to /slack/events, the Slack stand-in and the
// local crew service (which implements POST /stop).
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { CREW_POST_LONGEST_MS, CrewClient } from "../../src/adapters/crew/client.js";
import { APPROVE_ACTION, RUN_ACTIONS_BLOCK, STOP_ACTION, STOP_FOLLOWING_ACTION } from "../../src/adapters/slack/blocks/index.js";
import type { CrewConfig } from "../../src/config/config.js";
import { isFinished } from "../../src/domain/states.js";
import type { CrewApi } from "../../src/protocols/crew/types.js";
import type { SimTask } from "../../src/sim/crew-service.js";
import { CHANNEL, eventually, type Harness, type HarnessOptions, kickoffViaSlack, startHarness, USER } from "../support/harness.js";
import { scrape } from "../support/metrics.js";
import { prismaOf } from "../support/prisma.js";
import { kickoffForm, killReplicasAfterEach, queryShared, replicaServices, replicasSettled, startReplica, submitKickoff } from "../support/replicas.js";
import { clickReview, messageText, pendingReview, startRunViaSlack } from "../support/reviews.js";
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

const run = (id: string) => prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id } });
const stopCalls = () => h.crew.requests.filter((r) => r.method === "POST" && r.path.startsWith("/stop/"));
const ephemeralsFor = (user: string) => h.slack.ephemerals.filter((e) => e.user === user);
const said = (user: string, pattern: RegExp, what: string) => eventually(() => ephemeralsFor(user).find((e) => pattern.test(e.text ?? "")), { what });
/** Lets anything that would wrongly reach the crew or Slack arrive before asserting that nothing did: the bot has nothing left to do (settled() in test/support/harness.ts). */
const settle = () => h.settled();

async function start(opts: HarnessOptions = {}) {
  h = await startHarness({ ...opts, crew: { tasks: TASKS, ...opts.crew } });
  const execution = await startRunViaSlack(h);
  const review = await pendingReview(h);
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
  it("is on the announcement from its first post: a click before the crew answered the kickoff is told the run is still starting and reaches no crew; once started, it stops the run", async () => {
    // The crew answers the kickoff late enough for the click below to land before it, even on a busy machine.
    h = await startHarness({ crew: { tasks: TASKS, kickoffDelayMs: 3000 } });
    const submitted = kickoffViaSlack(h, { topic: "Deep sea vents" });
    const announcement = await eventually(() => h.slack.messages(CHANNEL).find((m) => !m.thread_ts && JSON.stringify(m.blocks ?? []).includes(STOP_ACTION)), {
      what: "the announcement's Stop button",
    });
    const starting = await prismaOf(h.bot.database).execution.findFirstOrThrow();
    expect(starting).toMatchObject({ state: "starting", kickoffId: null });
    // The one chat.postMessage of the announcement carried the button: no update was needed for it.
    expect(h.slack.callsTo("chat.update").filter((c) => c.args.ts === announcement.ts)).toHaveLength(0);
    const value = (announcement.blocks as any[]).flatMap((b) => b.elements ?? []).find((e: any) => e.action_id === STOP_ACTION).value as string;
    expect(value).toBe(starting.id);

    expect((await clickStop(value, { messageTs: announcement.ts })).status).toBe(200);
    await said(USER, /still starting \(the crew has not answered its kickoff yet\)/, "the answer while starting");
    expect(stopCalls()).toHaveLength(0);
    expect((await run(starting.id)).state).toBe("starting");

    await submitted;
    const started = await eventually(async () => (await run(starting.id)).kickoffId ?? undefined, { what: "the kickoff id" });
    // Once the crew answered, the announcement says it runs and shows its kickoff id (run.started, when Slack is idle: at once here).
    const shown = await eventually(() => [messageText(h, announcement.ts)].find((t) => t.includes(started)), { what: "the kickoff id on the announcement" });
    expect(shown).toContain("Running");
    await clickStop(value, { messageTs: announcement.ts });
    await eventually(async () => (await run(starting.id)).state === "stopped", { what: "the stopped run" });
    expect(stopCalls().map((c) => c.path)).toEqual([`/stop/${started}`]);
  });

  it("the starter's click: one POST /stop, the run ends stopped by them everywhere, its review closes, late webhooks get 410, nothing more is posted", async () => {
    // A task finished before the one waiting for a review: its task message was posted (no decision needed).
    const gather: SimTask = { id: "task-gather", name: "gather_task", agent: "Gatherer", delayMs: 30, steps: 2 };
    const { execution, review, announcement } = await start({ config: { metricsToken: METRICS_TOKEN }, crew: { tasks: [gather, ...TASKS] } });
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
    expect((await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state).toBe("closed");
    // The live plan ends as stopped, not failed; the review's card says it was stopped before a decision.
    const plan = await eventually(() => h.slack.messages(CHANNEL).find((m) => m.stream?.state === "stopped")?.stream, { what: "the stopped plan" });
    expect(plan.title).toMatch(/— stopped$/);
    expect(plan.tasks.map((t) => [t.title, t.status, t.details])).toEqual([
      // The task that had finished stays complete (a card never goes back from complete).
      ["gather_task", "complete", "Done"],
      ["research_task", "error", "Stopped from Slack before a decision"],
    ]);
    expect((await prismaOf(h.bot.database).review.findFirstOrThrow({ where: { executionId: execution.id, taskName: "gather_task" } })).state).toBe("posted");
    // The clicker hears it privately.
    await said(USER, /You stopped the run/, "the confirmation");
    // Audit: one stop row, by the starter.
    const audit = await prismaOf(h.bot.database).auditRecord.findMany({ where: { executionId: execution.id, kind: "stop" } });
    expect(audit).toMatchObject([{ actor: USER, decision: "stopped" }]);

    // A late crew webhook is refused like any ended run's; nothing more reaches Slack.
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

  it("a run stopped while a task runs, no review waiting: its live plan is stopped, once, showing the stop", async () => {
    // One long task: the run works (a step every 4 s streams) with nothing waiting for a decision.
    h = await startHarness({ crew: { tasks: [{ id: "task-long", name: "long_task", agent: "Worker", delayMs: 60_000, steps: 14 }] } });
    const execution = await startRunViaSlack(h);
    const streamed = () => h.slack.messages(CHANNEL).find((m) => m.stream)?.stream;
    await eventually(() => streamed()?.tasks.find((t) => t.status === "in_progress"), { what: "the running task's card" });
    // The plan's effect has gone quiet: nothing re-arms it but the stop.
    await h.settled({ crewRuns: false });
    expect(await prismaOf(h.bot.database).review.count({ where: { executionId: execution.id } })).toBe(0);

    await clickStop(execution.id, { messageTs: execution.threadTs! });
    await eventually(async () => (await run(execution.id)).state === "stopped", { what: "the stopped run" });
    await h.settled({ crewRuns: false });
    const plan = await eventually(() => [streamed()].find((s) => s?.state === "stopped"), { what: "the stopped plan" });
    expect(plan.title).toMatch(/— stopped$/);
    expect(plan.tasks.map((t) => [t.status, t.details])).toEqual([["error", "Stopped from Slack"]]);
    expect(h.slack.callsTo("chat.stopStream")).toHaveLength(1);
    expect((await run(execution.id)).streamStoppedAt).not.toBeNull();
  });

  it("a run stopped while a decision's /resume is failing: the review closes with the run, it does not open again", async () => {
    const { execution, review, announcement } = await start();
    // The crew's /resume answers 503 (retried after 1 s, three times): the decision is on its way meanwhile.
    h.crew.setOptions({ failWith: [{ endpoint: "resume", status: 503, headers: { "retry-after": "1" } }] });
    await clickReview(h, review, true, "");
    await eventually(async () => (await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state === "deciding", { what: "the claim" });
    await clickStop(execution.id, { messageTs: announcement.ts });
    await eventually(async () => (await run(execution.id)).state === "stopped", { what: "the stopped run" });
    await eventually(() => h.crew.requests.filter((r) => r.path === "/resume").length === 3, { what: "the failing /resume calls", timeoutMs: 10_000 });
    await settle();
    expect(await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).toMatchObject({ state: "closed" });
    expect(JSON.stringify(h.slack.messages(CHANNEL).find((m) => m.ts === review.msg.ts)?.blocks)).not.toContain(APPROVE_ACTION);
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
    await settle();
    expect(stopCalls()).toHaveLength(1);
    expect(await prismaOf(h.bot.database).auditRecord.count({ where: { executionId: execution.id, kind: "stop" } })).toBe(1);
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
  it("holds the run as long as its POST /stop could take (others hear who is stopping it), then anyone allowed may stop it", async () => {
    const { execution, announcement } = await start();
    // As left by a replica killed between its claim and the crew's answer.
    await prismaOf(h.bot.database).execution.update({ where: { id: execution.id }, data: { stoppedBy: BOB, stopClaimedAt: new Date() } });
    await clickStop(execution.id, { messageTs: announcement.ts });
    await said(USER, new RegExp(`<@${BOB}> is stopping this run`), "who is stopping it");
    expect(stopCalls()).toEqual([]);
    expect(messageText(h, announcement.ts)).not.toContain("Stopped by");

    // Two minutes on, its POST /stop may still be retrying or waiting for an answer: the claim holds.
    await prismaOf(h.bot.database).execution.update({ where: { id: execution.id }, data: { stopClaimedAt: new Date(Date.now() - 120_000) } });
    await clickStop(execution.id, { messageTs: announcement.ts });
    await eventually(() => ephemeralsFor(USER).filter((e) => new RegExp(`<@${BOB}> is stopping this run`).test(e.text ?? "")).length === 2, { what: "who is stopping it, again" });
    expect(stopCalls()).toEqual([]);

    await prismaOf(h.bot.database).execution.update({ where: { id: execution.id }, data: { stopClaimedAt: new Date(Date.now() - CREW_POST_LONGEST_MS - 1000) } });
    await clickStop(execution.id, { messageTs: announcement.ts });
    await said(USER, /You stopped the run/, "the stop");
    expect(stopCalls()).toHaveLength(1);
    expect(await run(execution.id)).toMatchObject({ state: "stopped", stoppedBy: USER, stopClaimedAt: null });
  });
});

describe("a stop the crew did not take", () => {
  it("a status poll that reads the crew's STOPPED before the stop is recorded leaves the run's end to the stop: stopped by its asker, not failed", async () => {
    // No webhooks: status polling is how the run is followed, and it polls often.
    let cancelledPolls = 0;
    const crewClient = (crew: CrewConfig): CrewApi => {
      const real = new CrewClient(crew);
      return {
        listInputs: () => real.listInputs(),
        kickoff: (r) => real.kickoff(r),
        resume: (r) => real.resume(r),
        status: async (id) => {
          const status = await real.status(id);
          if (status.cancelled) cancelledPolls++;
          return status;
        },
        // The crew has taken the stop; its answer reaches the asker only once polls have read STOPPED twice
        // (or the run has ended some other way meanwhile).
        stop: async (id) => {
          const result = await real.stop(id);
          await eventually(
            async () => cancelledPolls >= 2 || isFinished((await prismaOf(h.bot.database).execution.findFirstOrThrow({ where: { kickoffId: id } })).state) || undefined,
            {
              what: "polls reading the stop",
            },
          );
          return result;
        },
      };
    };
    const { execution, announcement } = await start({ webhooks: false, crewline: { crewClient, watcher: { tickMs: 20, minBackoffMs: 20, maxBackoffMs: 50 } } });
    await clickStop(execution.id, { messageTs: announcement.ts });
    await said(USER, /You stopped the run/, "the stop");
    expect(cancelledPolls).toBeGreaterThanOrEqual(2);
    expect(await run(execution.id)).toMatchObject({ state: "stopped", stoppedBy: USER, error: null });
    await eventually(() => h.slack.messages(CHANNEL).find((m) => m.thread_ts === execution.threadTs && /stopped this run/.test(m.text ?? "")), { what: "the notice" });
  });

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

  it("the crew does not answer the stop (504): the asker hears it may have been taken, not that the run goes on", async () => {
    const { execution, announcement, review } = await start({ crew: { failWith: [{ endpoint: "stop", status: 504, times: 1 }] } });
    await clickStop(execution.id, { messageTs: announcement.ts });
    const answer = await said(USER, /The crew did not confirm the stop of \*research\*: it may have taken it\./, "the unconfirmed stop");
    expect(answer.text).toContain("Its outcome shows here as soon as Crewline hears it (check the thread before trying again).");
    expect(answer.text).not.toMatch(/did not reach the crew|goes on/);
    // A 504 to a POST is not sent again; nothing is marked stopped until the crew says so.
    expect(stopCalls()).toHaveLength(1);
    expect(await run(execution.id)).toMatchObject({ state: "waiting", stoppedBy: null, stopClaimedAt: null });
    expect(messageText(h, review.msg.ts)).toContain(APPROVE_ACTION);
  });

  it("the crew refuses the stop (a 400 naming no finished state): the asker hears the refusal in its words, and the run goes on", async () => {
    const { execution, announcement } = await start({
      crew: { failWith: [{ endpoint: "stop", status: 400, times: 1, body: { error: "Bad Request", message: "kickoff_id is locked by a deployment" } }] },
    });
    await clickStop(execution.id, { messageTs: announcement.ts });
    const answer = await said(USER, /The crew refused to stop the run of \*research\*, so it goes on\./, "the refusal");
    expect(answer.text).toContain("kickoff_id is locked by a deployment");
    expect(answer.text).not.toMatch(/did not reach the crew|already ended/);
    expect(await run(execution.id)).toMatchObject({ state: "waiting", stoppedBy: null, stopClaimedAt: null });
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
  it("Stop following while someone's stop is on its way to the crew: that stop decides; nothing is abandoned", async () => {
    const { execution, announcement } = await start({ crew: { failWith: [{ endpoint: "stop", status: 405, times: 1 }] } });
    await clickStop(execution.id, { messageTs: announcement.ts });
    const honest = await said(USER, /cannot be stopped from Slack/, "the honest answer");
    // Meanwhile Bob's stop has been claimed and is being sent (the deployment took /stop after all).
    await prismaOf(h.bot.database).execution.update({ where: { id: execution.id }, data: { stoppedBy: BOB, stopClaimedAt: new Date() } });
    await clickStopFollowing(execution.id, honest.ts);
    await said(USER, new RegExp(`<@${BOB}> is stopping this run`), "who is stopping it");
    expect(await run(execution.id)).toMatchObject({ state: "waiting", stoppedBy: BOB });
    expect(await prismaOf(h.bot.database).auditRecord.count({ where: { executionId: execution.id, kind: "stop" } })).toBe(0);
  });

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
    expect(await prismaOf(h.bot.database).auditRecord.findMany({ where: { executionId: execution.id, kind: "stop" } })).toMatchObject([{ actor: USER, decision: "abandoned" }]);

    // Polling stops: no more status requests for it, even once it is due.
    await settle();
    const polls = () => h.crew.requests.filter((r) => r.path.includes(execution.kickoffId!) && !r.path.startsWith("/stop/")).length;
    const before = polls();
    await prismaOf(h.bot.database).execution.update({ where: { id: execution.id }, data: { nextPollAt: new Date(0) } });
    expect(await h.bot.watcher.tick()).toBe(0);
    expect(polls()).toBe(before);
    // A second Stop following: already done.
    await clickStopFollowing(execution.id, honest.ts);
    await said(USER, /already stopped following this run/, "already abandoned");
  });
});

describe.runIf(usePostgres)("a stop racing a review's promotion (PostgreSQL)", () => {
  it("Stop clicked while another replica promotes the run's review (its row, then the run's): the run stops once, the thread says so, the review closes", async () => {
    const { execution, announcement, review } = await start();
    const db = new pg.Client({ connectionString: h.db.url! });
    const other = new pg.Client({ connectionString: h.db.url! });
    await Promise.all([db.connect(), other.connect()]);
    try {
      // A review whose task message is posted and not yet decidable, promoted by another replica
      // (usecases/reviews.ts promote): in one transaction, the review's row, then the run's.
      await db.query(`UPDATE "Review" SET state = 'posted' WHERE id = $1`, [review.reviewId]);
      await other.query("BEGIN");
      await other.query(`UPDATE "Review" SET state = 'pending' WHERE id = $1 AND state = 'posted'`, [review.reviewId]);
      await clickStop(execution.id, { messageTs: announcement.ts });
      // The crew took the stop; ending the run here now waits for the review's row.
      await eventually(() => stopCalls().length === 1, { what: "the crew's POST /stop" });
      await eventually(
        async () => (await db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows[0].n > 0,
        { what: "the stop waiting for the review's row" },
      );
      await other.query(`UPDATE "Execution" SET state = 'waiting' WHERE id = $1 AND state IN ('starting', 'running', 'waiting')`, [execution.id]);
      await other.query("COMMIT");
    } finally {
      await Promise.all([db.end(), other.end()]);
    }
    await said(USER, /You stopped the run/, "the stop's answer");
    expect(await run(execution.id)).toMatchObject({ state: "stopped", stoppedBy: USER, stopClaimedAt: null });
    await eventually(() => h.slack.messages(CHANNEL).find((m) => m.thread_ts === execution.threadTs && /stopped this run/.test(m.text ?? "")), { what: "the notice" });
    expect((await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state).toBe("closed");
    await settle();
    expect(stopCalls()).toHaveLength(1);
    expect(await prismaOf(h.bot.database).auditRecord.count({ where: { executionId: execution.id, kind: "stop" } })).toBe(1);
  });
});

describe.runIf(usePostgres)("a stop the crew took whose recording fails (PostgreSQL)", () => {
  /**
   * Fails the first `times` stop transactions with PostgreSQL's deadlock error (a trigger on the stop's
   * audit row; a sequence counts them, as it survives the rollback), runs `during`, and leaves nothing
   * behind: the database is reused by the next test of this worker. How many stop transactions were tried.
   */
  async function failingStops(times: number, during: () => Promise<void>): Promise<number> {
    const db = new pg.Client({ connectionString: h.db.url! });
    await db.connect();
    try {
      await db.query(`CREATE SEQUENCE stop_tries`);
      await db.query(`CREATE FUNCTION fail_stops() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.kind = 'stop' AND nextval('stop_tries') <= ${times} THEN RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01'; END IF;
          RETURN NEW;
        END $$`);
      await db.query(`CREATE TRIGGER fail_stops BEFORE INSERT ON "AuditRecord" FOR EACH ROW EXECUTE FUNCTION fail_stops()`);
      await during();
      return Number((await db.query(`SELECT last_value FROM stop_tries`)).rows[0].last_value);
    } finally {
      await db.query(`DROP TRIGGER IF EXISTS fail_stops ON "AuditRecord"; DROP FUNCTION IF EXISTS fail_stops(); DROP SEQUENCE IF EXISTS stop_tries`);
      await db.end();
    }
  }

  it("the stop's transaction fails once (as a deadlock's victim would): it is tried again, the run ends stopped once, and the asker hears it", async () => {
    const { execution, announcement } = await start();
    const tries = await failingStops(1, async () => {
      await clickStop(execution.id, { messageTs: announcement.ts });
      await said(USER, /You stopped the run/, "the stop's answer");
    });
    expect(tries).toBe(2);
    expect(await run(execution.id)).toMatchObject({ state: "stopped", stoppedBy: USER, stopClaimedAt: null });
    await settle();
    expect(stopCalls()).toHaveLength(1);
    expect(await prismaOf(h.bot.database).auditRecord.count({ where: { executionId: execution.id, kind: "stop" } })).toBe(1);
    expect(h.slack.messages(CHANNEL).filter((m) => m.thread_ts === execution.threadTs && /stopped this run/.test(m.text ?? ""))).toHaveLength(1);
  });

  it("every try fails: the asker is told the crew took the stop and that it is not recorded, not that nothing was sent", async () => {
    const { execution, announcement } = await start();
    const tries = await failingStops(1000, async () => {
      await clickStop(execution.id, { messageTs: announcement.ts });
      await said(USER, /The crew took your stop .* but Crewline could not record it/, "the honest answer");
    });
    expect(tries).toBe(3);
    expect(stopCalls()).toHaveLength(1);
    expect(ephemeralsFor(USER).some((e) => /Nothing was sent to the crew/.test(e.text ?? ""))).toBe(false);
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
    // The button is there from the first post; the clicks come once the crew has answered the kickoff.
    await eventually(async () => (await queryShared<{ kickoffId: string | null }>(db.url, `SELECT "kickoffId" FROM "Execution"`))[0]?.kickoffId, { what: "the kickoff id" });
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
    // A second stop or notice would be on its way now.
    await replicasSettled(db.url, slack, crew);
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
