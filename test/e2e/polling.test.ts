// Status polling end to end: runs finish in Slack without webhooks, webhooks and polls racing give
// each Slack effect once, a run the crew reports cancelled ends, and a kickoff the crew forgot is
// declared lost after the grace period.
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { CrewClient } from "../../src/adapters/crew/client.js";
import { APPROVE_ACTION, STOP_ACTION } from "../../src/adapters/slack/blocks/index.js";
import type { CrewApi } from "../../src/protocols/crew/types.js";
import { CHANNEL, CREW_TOKEN, eventually, type Harness, type HarnessOptions, kickoffViaSlack, startHarness, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { clickReview, messageText, type PendingReview, pendingReview, resumeCalls, startRunViaSlack } from "../support/reviews.js";

let h: Harness;
afterEach(async () => h?.close());

const FAST = { tickMs: 25, minBackoffMs: 50, maxBackoffMs: 200, leaseMs: 5000 };

function start(opts: HarnessOptions & { watcher?: Record<string, number> } = {}) {
  const { watcher, ...rest } = opts;
  return startHarness({ ...rest, crewline: { ...rest.crewline, watcher: { ...FAST, ...watcher } } });
}

// Every task output is posted once (as a review, or as a task message that becomes the review in place).
const reviewPosts = (h: Harness) =>
  h.slack
    .callsTo("chat.postMessage")
    .filter((c) => /^(📝 Review needed|✔️ Task finished)/.test(String(c.args.text ?? "")) || JSON.stringify(c.args.blocks ?? []).includes(APPROVE_ACTION));
const completionPosts = (h: Harness) => h.slack.callsTo("chat.postMessage").filter((c) => !c.args.thread_ts && /^(✅ Crew|❌ Crew|⚠️ Lost track)/.test(String(c.args.text ?? "")));
const statusPolls = (h: Harness) => h.crew.requests.filter((r) => r.path.endsWith("/status") || r.path.startsWith("/status/"));

/** Reviews already clicked: the next pending one is another. */
const clicked = new Set<string>();
const nextReview = (h: Harness) => pendingReview(h, { exclude: clicked, timeoutMs: 15_000 });
function click(h: Harness, review: PendingReview, approve: boolean, feedback = "") {
  clicked.add(review.reviewId);
  return clickReview(h, review, approve, feedback);
}

const ONE_TASK = [{ id: "t1", name: "only_task", agent: "Solo", delayMs: 50, steps: 0 }];

const kickedOff = (h: Harness) => startRunViaSlack(h, "Tidal power", 15_000);

/** A run that is due for a poll but ended: the watcher's next round must leave it alone (returns how many rounds polled). */
async function pollEndedRun(h: Harness, executionId: string): Promise<number> {
  await prismaOf(h.bot.database).execution.update({ where: { id: executionId }, data: { nextPollAt: new Date(0) } });
  return h.bot.watcher.tick();
}

describe("status polling", () => {
  it("without webhooks: reviews come from status, decisions resume once, the run finishes in Slack once", async () => {
    h = await start({ webhooks: false });
    const execution = await kickedOff(h);
    expect(execution.webhooks).toBe(false);

    const first = await nextReview(h);
    expect(first.msg.thread_ts).toBe(execution.threadTs);
    expect(JSON.stringify(first.msg.blocks)).toContain("research_task");
    expect(await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: first.reviewId } })).toMatchObject({
      taskKey: "research_task",
      resumeTaskId: "task-research",
      round: 1,
    });
    // More polls of the same pause must not post it again.
    const seen = statusPolls(h).length;
    await eventually(() => statusPolls(h).length >= seen + 2, { what: "two more polls of the pause" });
    await h.settled();
    expect(reviewPosts(h)).toHaveLength(1);
    await click(h, first, true);

    const second = await nextReview(h);
    expect(JSON.stringify(second.msg.blocks)).toContain("writing_task");
    await click(h, second, false, "Shorter, please");

    const third = await nextReview(h);
    expect(await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: third.reviewId } })).toMatchObject({
      taskKey: "writing_task",
      resumeTaskId: "task-write",
      round: 2,
    });
    await click(h, third, true);

    const done = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { id: execution.id, completionTs: { not: null } } }), {
      what: "the completion",
      timeoutMs: 15_000,
    });
    expect(done.state).toBe("completed");
    expect(done.output).toContain("Revision (round 2)");
    await h.settled();
    expect(reviewPosts(h)).toHaveLength(3);
    expect(completionPosts(h)).toHaveLength(1);
    expect(completionPosts(h)[0]!.args.text).toMatch(/^✅ Crew research finished/);
    expect(resumeCalls(h).map((r) => (r.body as any).is_approve)).toEqual([true, false, true]);
    expect(h.crew.webhookDeliveries).toHaveLength(0);
    expect(statusPolls(h).length).toBeGreaterThan(3);
    // Finished runs are not polled any more, even once due.
    const polls = statusPolls(h).length;
    expect(await pollEndedRun(h, execution.id)).toBe(0);
    expect(statusPolls(h).length).toBe(polls);
  });

  it("webhooks and polls racing for the same reviews and completion: each posted once", async () => {
    // endGraceMs 0: the poll may finish the run as soon as status says so, racing the crew's callback.
    h = await start({ watcher: { tickMs: 10, minBackoffMs: 10, maxBackoffMs: 30, endGraceMs: 0 } });
    const execution = await kickedOff(h);
    expect(execution.webhooks).toBe(true);
    await click(h, await nextReview(h), true);
    await click(h, await nextReview(h), true);
    await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { id: execution.id, completionTs: { not: null } } }), {
      what: "the completion",
      timeoutMs: 15_000,
    });
    await h.settled();
    expect(h.crew.webhookDeliveries.filter((d) => d.kind === "crew")).toHaveLength(1);
    expect(reviewPosts(h)).toHaveLength(2);
    expect(completionPosts(h)).toHaveLength(1);
    expect(resumeCalls(h)).toHaveLength(2);
    expect(await prismaOf(h.bot.database).review.count({ where: { executionId: execution.id } })).toBe(2);
  });

  it("a run without review pauses, finished by webhook and poll at once, is announced once", async () => {
    h = await start({
      watcher: { tickMs: 5, minBackoffMs: 5, maxBackoffMs: 10, endGraceMs: 0 },
      crew: { tasks: [{ id: "t1", name: "only_task", agent: "Solo", delayMs: 150, steps: 0 }] },
    });
    const execution = await kickedOff(h);
    await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { id: execution.id, completionTs: { not: null } } }), {
      what: "the completion",
      timeoutMs: 15_000,
    });
    await h.settled();
    expect(completionPosts(h)).toHaveLength(1);
  });

  it("a status that says the run ended before the crew's callback does: the callback is waited for, and taken", async () => {
    h = await start({ watcher: { endGraceMs: 10_000 }, crew: { tasks: ONE_TASK, endCallbackLagMs: 1500 } });
    const execution = await kickedOff(h);
    const crewCallback = await eventually(() => h.crew.webhookDeliveries.find((d) => d.kind === "crew"), { what: "the crew's end callback", timeoutMs: 15_000 });
    // Status said SUCCESS for 1.5 s before the callback came, and was asked meanwhile.
    const sim = h.crew.executions.get(execution.kickoffId!)!;
    expect(statusPolls(h).filter((r) => r.at >= sim.updatedAt && r.at < crewCallback.sentAt).length).toBeGreaterThan(0);
    expect(crewCallback.status).toBe(202);
    const done = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { id: execution.id, completionTs: { not: null } } }), { what: "the completion" });
    expect(done.finishedAt!.getTime()).toBeGreaterThanOrEqual(crewCallback.sentAt);
    await h.settled();
    expect(completionPosts(h)).toHaveLength(1);
  });

  it("a crew whose end callback never comes is finished from its status once the grace period is over; its late callbacks, a step too, get 410", async () => {
    h = await start({ watcher: { endGraceMs: 600 }, crew: { tasks: [{ ...ONE_TASK[0]!, steps: 1 }], endCallbackLagMs: 60_000 } });
    const execution = await kickedOff(h);
    // Its step was taken while it ran (the callback intake keeps the run's row from then on).
    const step = await eventually(() => h.crew.webhookDeliveries.find((d) => d.kind === "step"), { what: "the run's step" });
    expect(step.status).toBe(202);
    const done = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { id: execution.id, completionTs: { not: null } } }), {
      what: "the completion",
      timeoutMs: 15_000,
    });
    expect(done.state).toBe("completed");
    expect(done.finishedAt!.getTime() - done.endSeenAt!.getTime()).toBeGreaterThanOrEqual(600);
    expect(h.crew.webhookDeliveries.filter((d) => d.kind === "crew")).toHaveLength(0);
    await h.settled({ crewRuns: false });
    expect(completionPosts(h)).toHaveLength(1);
    // The crew goes on talking: the run has ended here, whoever ended it.
    const late = await fetch(step.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ kickoff_id: execution.kickoffId, thought: "one more" }),
    });
    expect(late.status).toBe(410);
  });

  it("a run finished from its status first applies the crew's callbacks recorded but not processed: its last task is in the thread", async () => {
    h = await start({ watcher: { endGraceMs: 600, sweepMs: 0 }, crew: { tasks: ONE_TASK } });
    // Given: the bot records the crew's callbacks and answers them, but their processing is cut short
    // (as when a replica dies right after answering): they wait in the database, unprocessed.
    const callbacks = h.bot.lifecycle.callbacks;
    const process = callbacks.process.bind(callbacks);
    const cut = new Set<string>();
    callbacks.process = async (id, body) => {
      if (cut.has(id)) return process(id, body);
      cut.add(id);
      throw new Error("the process died");
    };
    const execution = await kickedOff(h);
    const crewCallback = await eventually(() => h.crew.webhookDeliveries.find((d) => d.kind === "crew"), { what: "the crew's end callback", timeoutMs: 15_000 });
    expect(crewCallback.status).toBe(202);

    // When: status says the run succeeded, and the grace for its callbacks is over.
    const done = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { id: execution.id, completionTs: { not: null } } }), {
      what: "the completion",
      timeoutMs: 15_000,
    });

    // Then: the task's output was posted in the thread before the run ended, and every callback was applied.
    expect(done.state).toBe("completed");
    await h.settled({ crewRuns: false });
    expect(reviewPosts(h).map((c) => c.args.thread_ts)).toEqual([execution.threadTs]);
    expect(JSON.stringify(reviewPosts(h)[0]!.args)).toContain("only_task");
    expect(completionPosts(h)).toHaveLength(1);
    expect(await prismaOf(h.bot.database).webhookEvent.count({ where: { executionId: execution.id, kind: { in: ["task", "crew"] }, processedAt: null } })).toBe(0);
  });

  it("a decision made while a poll is under way keeps its ask for a poll at once: the next review comes without waiting out the backoff", async () => {
    // The bot's status calls, held back while `hold` is set (a crew slow to answer).
    let hold: Promise<void> | undefined;
    let held = 0;
    const crewClient = (crew: { name: string; baseUrl: string; token: string }): CrewApi => {
      const real = new CrewClient(crew);
      return {
        listInputs: () => real.listInputs(),
        kickoff: (r) => real.kickoff(r),
        status: async (id) => {
          if (hold) {
            held++;
            await hold;
          }
          return real.status(id);
        },
        stop: (id) => real.stop(id),
        resume: (r) => real.resume(r),
      };
    };
    // A long backoff while nothing changes: a poll let through late would show.
    h = await start({ webhooks: false, watcher: { maxBackoffMs: 20_000 }, crewline: { crewClient } });
    const execution = await kickedOff(h);
    const first = await nextReview(h);
    const row = () => prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } });
    await eventually(async () => (await row()).pollBackoffMs >= 3200 || undefined, { what: "the backoff grown while the review waits", timeoutMs: 15_000 });

    // Given: a poll of the run under way, its answer held back.
    let release!: () => void;
    hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    await eventually(() => held > 0 || undefined, { what: "a status call held", timeoutMs: 25_000 });
    // When: the review is decided meanwhile (it asks for a poll at once), and then the poll ends.
    await click(h, first, true);
    await eventually(async () => (await row()).pollBackoffMs === 0 || undefined, { what: "the decision's ask for a poll" });
    hold = undefined;
    release();

    // Then: the run is polled again at once, not after the backoff the held poll had counted.
    const second = await eventually(
      async () => {
        const r = await row();
        return r.leaseOwner === null && r.pollBackoffMs !== 0 ? r : undefined;
      },
      { what: "the held poll ended" },
    );
    expect(second.nextPollAt.getTime() - Date.now()).toBeLessThan(2000);
    const next = await nextReview(h);
    expect(JSON.stringify(next.msg.blocks)).toContain("writing_task");
  });

  it("a run cancelled outside Crewline (status says CANCELLED) ends: the channel says so, its pending review loses its buttons, and it is polled no more", async () => {
    h = await start({ webhooks: false });
    const execution = await kickedOff(h);
    const review = await nextReview(h);
    expect(messageText(h, review.msg.ts)).toContain(APPROVE_ACTION);
    // Someone cancels it in the platform's own UI: the crew stops it, and its status says so in its own
    // word (set first: a poll between the stop and the override would read the stand-in's STOPPED).
    h.crew.setOptions({ failWith: [{ endpoint: "status", status: 200, body: { state: "CANCELLED", result: "", last_executed_task: null } }] });
    const cancelled = await fetch(`${h.crew.url}/stop/${execution.kickoffId}`, { method: "POST", headers: { authorization: `Bearer ${CREW_TOKEN}` } });
    expect(cancelled.status).toBe(200);

    const ended = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { id: execution.id, completionTs: { not: null } } }), {
      what: "the ended run",
      timeoutMs: 15_000,
    });
    expect(ended.state).toBe("failed");
    expect(ended.finishedAt).not.toBeNull();
    expect(ended.error).toBe("The crew reports this run CANCELLED: it was stopped or cancelled.");
    await h.settled();
    expect(completionPosts(h)).toHaveLength(1);
    expect(JSON.stringify(completionPosts(h)[0]!.args.blocks)).toContain("The crew reports this run CANCELLED: it was stopped or cancelled");
    // The announcement says so too, and offers no Stop any more.
    const announcement = messageText(h, execution.threadTs!);
    expect(announcement).toContain("The crew reports this run CANCELLED: it was stopped or cancelled");
    expect(announcement).not.toContain(STOP_ACTION);
    expect(messageText(h, review.msg.ts)).not.toContain(APPROVE_ACTION);
    expect((await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state).toBe("closed");
    // The only POST /stop is the platform's, above (Crewline sent none), and the ended run is not polled any more.
    expect(h.crew.requests.filter((r) => r.path.startsWith("/stop/"))).toHaveLength(1);
    const polls = statusPolls(h).length;
    expect(await pollEndedRun(h, execution.id)).toBe(0);
    expect(statusPolls(h).length).toBe(polls);
  });

  it("a crew that never answers holds only its own runs: another crew's review still comes from status at once", async () => {
    // A crew deployment that takes connections and never answers (a cold or wedged host): each status call waits out its time-outs.
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const silentUrl = `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
    try {
      h = await start({ webhooks: false, crews: [{ name: "wedged", baseUrl: silentUrl }] });
      // Given: a run of the wedged crew, due for a poll.
      await prismaOf(h.bot.database).execution.create({
        data: {
          crewName: "wedged",
          kickoffId: "k-wedged",
          teamId: "T1",
          channelId: "C0OTHER",
          userId: "U1",
          inputs: {},
          state: "running",
          requestId: "r-wedged",
          webhookSecret: "s",
        },
      });
      await eventually(() => (sockets.size > 0 ? true : undefined), { what: "the wedged crew's status call under way" });

      // When: a run of the healthy crew pauses for a review while that call hangs.
      await kickoffViaSlack(h, { topic: "Tidal power" }, USER, CHANNEL, { crew: "research" });
      const execution = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { crewName: "research", kickoffId: { not: null } } }), {
        what: "the kickoff",
      });
      const review = await nextReview(h);

      // Then: its review came from status without waiting out the wedged crew's call (15 s a try).
      expect(review.msg.thread_ts).toBe(execution.threadTs);
      expect(sockets.size).toBeGreaterThan(0);
      const wedged = await prismaOf(h.bot.database).execution.findFirstOrThrow({ where: { crewName: "wedged" } });
      expect(wedged.leaseOwner).toBe(h.bot.watcher.replicaId);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it("a run whose status answers 404 while its crew keeps sending its callbacks is not declared lost: it ends as the crew says", async () => {
    h = await start({
      watcher: { lostGraceMs: 800 },
      crew: {
        failWith: [{ endpoint: "status", status: 404, body: { error: "Not found" } }],
        tasks: [
          { id: "t1", name: "first_task", agent: "A", delayMs: 1500, steps: 6 },
          { id: "t2", name: "second_task", agent: "A", delayMs: 1500, steps: 6 },
        ],
      },
    });
    const execution = await kickedOff(h);
    const ended = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { id: execution.id, state: { in: ["completed", "lost"] } } }), {
      what: "the run's end",
      timeoutMs: 15_000,
    });
    expect(ended.state).toBe("completed");
    expect(statusPolls(h).length).toBeGreaterThan(1);
    // Every callback was taken (none refused as an ended run's).
    expect(h.crew.webhookDeliveries.filter((d) => d.status === 410)).toEqual([]);
    await h.settled();
    expect(completionPosts(h).map((c) => String(c.args.text))).toEqual([expect.stringMatching(/^✅ Crew research/)]);
  });

  it("a kickoff the crew does not know (404 forever) is declared lost after the grace period and announced once", async () => {
    h = await start({ webhooks: false, watcher: { lostGraceMs: 800 }, crew: { failWith: [{ endpoint: "status", status: 404, body: { error: "Not found" } }] } });
    const execution = await kickedOff(h);
    // Within the grace period the run stays live (a 404 right after kickoff can be transient).
    await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { id: execution.id, notFoundSince: { not: null } } }), { what: "the first 404" });
    expect((await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: execution.id } })).state).not.toBe("lost");

    const lost = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { id: execution.id, state: "lost", completionTs: { not: null } } }), {
      what: "the lost run",
      timeoutMs: 15_000,
    });
    expect(lost.error).toMatch(/no record of this run/);
    expect(lost.finishedAt!.getTime() - lost.notFoundSince!.getTime()).toBeGreaterThanOrEqual(800);
    await h.settled();
    expect(completionPosts(h)).toHaveLength(1);
    expect(completionPosts(h)[0]!.args.text).toMatch(/^⚠️ Lost track of crew research/);
    expect(JSON.stringify(completionPosts(h)[0]!.args.blocks)).toContain("no record of this run");
  });
});
