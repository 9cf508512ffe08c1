// Recovery in seconds after a crash, with the claim lease (CLAIM_STALE_MS) set to a minute so that
// only the recovery rules can explain a prompt review:
// - embedded database: the bot is killed with SIGKILL while its Slack post of a review is under way,
//   and restarted on the same data folder: it takes back what its earlier incarnation had claimed;
// - PostgreSQL: a replica killed the same way leaves its claims to the others once its heartbeat
//   is stale, while a live replica whose Slack call is slow keeps its own.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { RUN_ACTIONS_BLOCK, STOP_ACTION } from "../../src/adapters/slack/blocks/index.js";
import { type Crewline, createCrewline } from "../../src/app.js";
import { silentLogger } from "../../src/log/log.js";
import { type SimCrewService, type SimTask, startCrewService } from "../../src/sim/crew-service.js";
import { type FakeSlack, startFakeSlack } from "../support/fake-slack.js";
import { CHANNEL, CREW_TOKEN, eventually, freePort, type Harness, SIGNING_SECRET, startHarness, USER } from "../support/harness.js";
import { holdingProxy } from "../support/holding-proxy.js";
import {
  approve,
  cleanups,
  kickoffForm,
  kill,
  killReplicasAfterEach,
  pendingReviews,
  queryShared,
  type Replica,
  replicaServices,
  seededDataDir,
  startReplica,
  submitKickoff,
} from "../support/replicas.js";
import { pendingReview, startRunViaSlack } from "../support/reviews.js";
import { slackRequester } from "../support/slack-requests.js";
import { usePostgres } from "../support/test-database.js";

killReplicasAfterEach();

/** The draft comes 6 s after the kickoff: time enough for the test to hold its post once the announcement is seen. */
const TASKS: SimTask[] = [{ id: "task-draft", name: "draft", agent: "Writer", humanInput: true, delayMs: 6000, steps: 0 }];
/** A minute of lease; the default heartbeat (dead after 8 s of silence). */
const SLOW_LEASE = { CLAIM_STALE_MS: "60000", POLL_LEASE_MS: "60000" };
/**
 * Replicas on PostgreSQL: a minute of lease, and a replica taken for dead after 4 s of silence (it
 * announces itself every 1.3 s): the takeovers below can come from the heartbeat rule alone, 4 s
 * sooner than with the default 8 s, and still far from the lease.
 */
const SLOW_LEASE_QUICK_DEATH = { ...SLOW_LEASE, REPLICA_DEAD_AFTER_MS: "4000" };

/** Review messages in Slack showing the draft, with or without their controls. */
const draftPosts = (slack: FakeSlack) => slack.callsTo("chat.postMessage").filter((c) => !c.error && JSON.stringify(c.args.blocks ?? []).includes("draft"));

/** Starts a run on `replica` and holds the Slack post of its review (or task message) at the stand-in; resolves once that post is under way. */
async function runWithPostHeld(slack: FakeSlack, replica: Replica) {
  const form = await kickoffForm(slack, replica);
  // The announcement is posted while the kickoff is answered; the next post is the draft's.
  await submitKickoff(replica, form, "Deep sea vents");
  await eventually(() => slack.callsTo("chat.postMessage").length >= 1, { what: "the announcement", timeoutMs: 20_000 });
  slack.delayNext("chat.postMessage", 600_000);
  await eventually(() => slack.inFlight.some((c) => c.method === "chat.postMessage" && JSON.stringify(c.args.blocks ?? []).includes("draft")), {
    what: "the draft's post, under way",
    timeoutMs: 60_000,
  });
}

/** The Slack stand-in, the crew service and a data folder for the embedded database, cleaned up after the test. */
async function embeddedServices() {
  const slack = await startFakeSlack();
  const crew = await startCrewService({ token: CREW_TOKEN, tasks: TASKS });
  // The migrated template, so that each start takes seconds (the test is about the restart, not initdb).
  const dataDir = seededDataDir();
  cleanups.push(
    () => slack.close(),
    () => crew.close(),
    async () => fs.rmSync(dataDir, { recursive: true, force: true }),
  );
  return { slack, crew, dataDir };
}

/** The crew behind a stand-in that holds every request to a path `held` matches (test/support/holding-proxy.ts). */
async function holdingCrew(crew: SimCrewService, held: (path: string) => boolean) {
  const proxy = await holdingProxy(crew.url, held);
  const proxied = Object.create(crew, { url: { value: proxy.url } }) as SimCrewService;
  return { crew: proxied, held: proxy.held, release: proxy.release };
}

/** What reached the crew (not the held calls): POST requests to paths starting with `prefix`. */
const crewCalls = (crew: SimCrewService, prefix: string) => crew.requests.filter((r) => r.method === "POST" && r.path.startsWith(prefix));

// The embedded database is this pass's only when no PostgreSQL server is asked for (the PostgreSQL pass has its own case below).
describe.skipIf(usePostgres)("recovery after a crash", { timeout: 900_000 }, () => {
  it("embedded database: restarted after kill -9 with a review post under way, the review is decidable promptly (lease 60 s)", async () => {
    const { slack, crew, dataDir } = await embeddedServices();
    const first = await startReplica("first", { dataDir, slack, crew, webhooks: true, extra: SLOW_LEASE });
    await runWithPostHeld(slack, first);
    await kill(first);

    // A second process cannot open the folder while the first runs; after kill -9 it can.
    const second = await startReplica("second", { dataDir, slack, crew, webhooks: true, port: first.port, extra: SLOW_LEASE });
    const restartedAt = Date.now();
    await eventually(() => [...pendingReviews(slack)][0], { what: "the review, decidable after the restart", timeoutMs: 20_000 });
    expect(Date.now() - restartedAt).toBeLessThan(20_000);
    expect(draftPosts(slack)).toHaveLength(1);
    expect(second.output()).not.toMatch(/"level":"error"/);
  });

  it("embedded database: restarted after kill -9 with a decision's /resume under way, the review is decidable again within 5 s (claims 60 s)", async () => {
    const slack = await startFakeSlack();
    const crew = await startCrewService({ token: CREW_TOKEN, tasks: [{ id: "task-draft", name: "draft", agent: "Writer", humanInput: true, delayMs: 200, steps: 0 }] });
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-recovery-"));
    cleanups.push(
      () => slack.close(),
      () => crew.close(),
      async () => fs.rmSync(dataDir, { recursive: true, force: true }),
    );
    // In front of the crew: holds every POST /resume (the first process dies mid-call).
    const { crew: proxied, held, release } = await holdingCrew(crew, (p) => p === "/resume");
    const resumes = () => crewCalls(crew, "/resume").map((r) => r.at);
    const first = await startReplica("first", { dataDir, slack, crew: proxied, webhooks: true, extra: SLOW_LEASE });
    await submitKickoff(first, await kickoffForm(slack, first), "Deep sea vents");
    const [reviewId, where] = await eventually(() => [...pendingReviews(slack)][0], { what: "the review", timeoutMs: 30_000 });
    // The click claims the decision (deciding) and its /resume hangs at the crew: then the process dies.
    await approve(first, reviewId, where);
    await eventually(() => held() > 0, { what: "the /resume under way" });
    // (A fixed wait: the claim's row is written before the call; this only lets the process get well into it.)
    await new Promise((r) => setTimeout(r, 500));
    await kill(first);
    release();

    await startReplica("second", { dataDir, slack, crew: proxied, webhooks: true, port: first.port, extra: SLOW_LEASE });
    const restartedAt = Date.now();
    // The reviewer clicks again until the crew hears a decision: the earlier incarnation's claim is not in the way.
    const second = { requests: slackRequester({ baseUrl: first.url, signingSecret: SIGNING_SECRET, responseUrlBase: slack.responseUrlBase }) } as Replica;
    await eventually(
      async () => {
        if (resumes().length) return true;
        await approve(second, reviewId, where);
        return resumes().length > 0 || undefined;
      },
      { what: "a decision reaching the crew after the restart", timeoutMs: 30_000 },
    );
    expect(resumes()[0]! - restartedAt).toBeLessThan(5000);
  });

  it("embedded database: a second process on the same data folder is refused while the first runs", async () => {
    const { slack, crew, dataDir } = await embeddedServices();
    const first = await startReplica("first", { dataDir, slack, crew, webhooks: true });
    const refused = await startReplica("second", { dataDir, slack, crew, webhooks: true }).then(
      () => "",
      (err: Error) => err.message,
    );
    expect(refused).toMatch(/in use by another Crewline process \(pid \d+\)/);
    expect((await fetch(`${first.url}/healthz`)).status).toBe(200);
  });
});

describe.runIf(usePostgres)("recovery after a crash, PostgreSQL replicas", { timeout: 900_000 }, () => {
  /** The replicas in the order they started (their ids, as the Replica table has them). */
  const replicaIds = async (url: string) => (await queryShared<{ id: string }>(url, `SELECT id FROM "Replica" ORDER BY "startedAt"`)).map((r) => r.id);

  it("a replica killed with its review post under way: another takes the post over by the heartbeat rule (lease 60 s)", async () => {
    const { slack, crew, db } = await replicaServices(TASKS);
    const env = { databaseUrl: db.url, slack, crew, webhooks: true, extra: SLOW_LEASE_QUICK_DEATH };
    const replicas = [await startReplica("first", env), await startReplica("second", env)];
    // The second starts the run, so its outbox is nudged; the first's own pass may claim the post all the same.
    await runWithPostHeld(slack, replicas[1]!);
    // Whichever holds the post is killed, well before its Web API call would time out (20 s).
    const [claim] = await queryShared<{ holder: string | null }>(db.url, `SELECT "leaseOwner" AS holder FROM "SlackEffect" WHERE kind = 'review.post'`);
    const holderAt = (await replicaIds(db.url)).indexOf(claim!.holder ?? "");
    expect(holderAt).toBeGreaterThanOrEqual(0);
    const [doomed, survivor] = holderAt === 1 ? [replicas[1]!, replicas[0]!] : [replicas[0]!, replicas[1]!];
    expect(draftPosts(slack)).toHaveLength(0);
    await kill(doomed);
    const killedAt = Date.now();
    await eventually(() => [...pendingReviews(slack)][0], { what: "the review, posted by the survivor", timeoutMs: 20_000 });
    expect(Date.now() - killedAt).toBeLessThan(20_000);
    expect(draftPosts(slack)).toHaveLength(1);
    expect(survivor.output()).not.toMatch(/"level":"error"/);
  });

  // The claims of decisions, deadlines and stops name their holder: a dead replica's are taken over
  // once its heartbeat is stale (4 s here), not after CLAIM_STALE_MS (60 s here; 40 s at least for decisions).
  const QUICK: SimTask[] = [{ id: "task-draft", name: "draft", agent: "Writer", humanInput: true, delayMs: 200, steps: 0 }];
  const interrupted = (slack: FakeSlack) => slack.messages(CHANNEL).filter((m) => /was interrupted before it reached the crew/.test(m.text ?? ""));
  /** The run's first review (a rejection makes the crew redo the task: a second round follows it). */
  const reviewRow = async (url: string) =>
    (
      await queryShared<Record<string, unknown>>(
        url,
        `SELECT state, "claimedBy", "deadlineClaimedBy", "decidedByDeadline", "deadlineDoneAt" FROM "Review" ORDER BY "createdAt" LIMIT 1`,
      )
    )[0]!;
  /**
   * Lets anything that would wrongly reach the crew arrive before asserting that nothing more did. A fixed
   * wait: a second call would come from a replica's next "claims of gone replicas" pass (every 2 s), which
   * leaves no row to wait for.
   */
  const settle = () => new Promise((r) => setTimeout(r, 3000));

  it("three replicas, one killed with a decision's /resume under way: the review is open again within 15 s, and the crew hears one decision", async () => {
    const { slack, crew, db } = await replicaServices(QUICK);
    const held = await holdingCrew(crew, (p) => p === "/resume");
    const env = { databaseUrl: db.url, slack, crew: held.crew, webhooks: true, extra: SLOW_LEASE_QUICK_DEATH };
    const survivor = await startReplica("survivor", env);
    await startReplica("other", env);
    const doomed = await startReplica("doomed", env);
    await submitKickoff(doomed, await kickoffForm(slack, doomed), "Deep sea vents");
    const [reviewId, where] = await eventually(() => [...pendingReviews(slack)][0], { what: "the review", timeoutMs: 60_000 });
    await approve(doomed, reviewId, where);
    await eventually(() => held.held() > 0, { what: "the /resume under way", timeoutMs: 20_000 });
    expect((await reviewRow(db.url)).claimedBy).toBe((await replicaIds(db.url))[2]);
    await kill(doomed);
    const killedAt = Date.now();
    held.release();

    await eventually(() => interrupted(slack)[0], { what: "the thread saying the decision was interrupted", timeoutMs: 60_000 });
    const reopenedMs = Date.now() - killedAt;
    expect(await reviewRow(db.url)).toMatchObject({ state: "pending" });
    await approve(survivor, reviewId, where);
    await eventually(() => crewCalls(crew, "/resume")[0], { what: "the decision reaching the crew", timeoutMs: 20_000 });
    const resumedMs = crewCalls(crew, "/resume")[0]!.at - killedAt;
    console.log(`decision claim: kill -9 -> review open again ${reopenedMs} ms, -> /resume at the crew ${resumedMs} ms`);
    expect(reopenedMs).toBeLessThan(15_000);
    await settle();
    expect(crewCalls(crew, "/resume")).toHaveLength(1);
    expect(crewCalls(crew, "/resume")[0]!.body).toMatchObject({ is_approve: true });
    expect(interrupted(slack)).toHaveLength(1);
    expect(await reviewRow(db.url)).toMatchObject({ state: "approved" });
  });

  it("a replica killed with a deadline's rejection under way: the other takes the deadline over within 15 s, and the crew hears one rejection", async () => {
    const { slack, crew, db } = await replicaServices(QUICK);
    const held = await holdingCrew(crew, (p) => p === "/resume");
    const env = { databaseUrl: db.url, slack, crew: held.crew, webhooks: true, extra: { ...SLOW_LEASE_QUICK_DEATH, CREW_DECIDE_WITHIN: "10s", CREW_ON_TIMEOUT: "reject" } };
    const replicas = [await startReplica("first", env), await startReplica("second", env)];
    await submitKickoff(replicas[0]!, await kickoffForm(slack, replicas[0]!), "Deep sea vents");
    await eventually(() => [...pendingReviews(slack)][0], { what: "the review", timeoutMs: 60_000 });
    // Whichever replica's deadline pass comes first (every 10 s) claims the deadline, then the decision.
    await eventually(() => held.held() > 0, { what: "the deadline's /resume under way", timeoutMs: 60_000 });
    const claim = await reviewRow(db.url);
    expect(claim.claimedBy).toBe(claim.deadlineClaimedBy);
    const holder = replicas[(await replicaIds(db.url)).indexOf(claim.deadlineClaimedBy as string)]!;
    await kill(holder);
    const killedAt = Date.now();
    held.release();

    // The decision is recovered (the crew still waits: open again), then the deadline is taken over.
    await eventually(() => crewCalls(crew, "/resume")[0], { what: "the deadline's rejection reaching the crew", timeoutMs: 60_000 });
    const tookMs = crewCalls(crew, "/resume")[0]!.at - killedAt;
    console.log(`deadline claim: kill -9 -> the deadline's /resume at the crew ${tookMs} ms`);
    expect(tookMs).toBeLessThan(15_000);
    await settle();
    expect(crewCalls(crew, "/resume")).toHaveLength(1);
    expect(crewCalls(crew, "/resume")[0]!.body).toMatchObject({ is_approve: false, human_feedback: expect.stringContaining("rejected automatically") });
    expect(interrupted(slack)).toHaveLength(1);
    // The deadline is no Slack user: the thread names no one.
    expect(interrupted(slack)[0]!.text).toMatch(/^⚠️ The decision on \*draft\*/);
    expect(await reviewRow(db.url)).toMatchObject({ state: "rejected", decidedByDeadline: true, deadlineDoneAt: expect.any(Date) });
  });

  it("a replica killed with a stop under way: the next Stop click on another replica stops the run within 15 s, with one stop at the crew", async () => {
    const { slack, crew, db } = await replicaServices(QUICK);
    const held = await holdingCrew(crew, (p) => p.startsWith("/stop/"));
    const env = { databaseUrl: db.url, slack, crew: held.crew, webhooks: true, extra: SLOW_LEASE_QUICK_DEATH };
    const survivor = await startReplica("survivor", env);
    const doomed = await startReplica("doomed", env);
    await submitKickoff(doomed, await kickoffForm(slack, doomed), "Deep sea vents");
    await eventually(() => [...pendingReviews(slack)][0], { what: "the review", timeoutMs: 60_000 });
    const announcement = await eventually(() => slack.messages(CHANNEL).find((m) => !m.thread_ts && JSON.stringify(m.blocks ?? []).includes(STOP_ACTION)), {
      what: "the announcement's Stop button",
      timeoutMs: 20_000,
    });
    const button = (announcement.blocks as any[]).flatMap((b) => b.elements ?? []).find((e: any) => e.action_id === STOP_ACTION);
    const clickStop = (replica: Replica) =>
      replica.requests.blockAction({
        user_id: USER,
        channel_id: CHANNEL,
        message_ts: announcement.ts,
        action: { action_id: STOP_ACTION, block_id: RUN_ACTIONS_BLOCK, value: button.value },
      });
    // Not awaited: the click is answered at once, and its stop hangs at the crew until the replica dies.
    void clickStop(doomed).catch(() => {});
    await eventually(() => held.held() > 0, { what: "the stop under way", timeoutMs: 20_000 });
    await kill(doomed);
    const killedAt = Date.now();
    held.release();

    // The starter clicks Stop again on the survivor, once a second, until the crew hears it.
    await eventually(
      async () => {
        if (crewCalls(crew, "/stop/").length) return true;
        await clickStop(survivor);
        await new Promise((r) => setTimeout(r, 1000));
        return crewCalls(crew, "/stop/").length > 0 || undefined;
      },
      { what: "the stop reaching the crew", timeoutMs: 60_000 },
    );
    const tookMs = crewCalls(crew, "/stop/")[0]!.at - killedAt;
    console.log(`stop claim: kill -9 -> POST /stop at the crew ${tookMs} ms`);
    expect(tookMs).toBeLessThan(15_000);
    await eventually(async () => (await queryShared<{ state: string }>(db.url, `SELECT state FROM "Execution"`))[0]?.state === "stopped", { what: "the run stopped" });
    await settle();
    expect(crewCalls(crew, "/stop/")).toHaveLength(1);
  });
});

describe("a live replica keeps its claims", { timeout: 120_000 }, () => {
  let h: Harness;
  const extra: Crewline[] = [];
  afterEach(async () => {
    for (const bot of extra.splice(0)) await bot.stop().catch(() => {});
    await h?.close();
  });

  it("its Slack call takes longer than the dead-after time: no other replica posts the review again", async () => {
    const settings = { outbox: { leaseMs: 60_000, tickMs: 100 }, heartbeat: { deadAfterMs: 2000 } };
    h = await startHarness({ crew: { tasks: [{ ...TASKS[0]!, delayMs: 3000 }] }, crewline: settings });
    const port = await freePort();
    const other = createCrewline({ ...h.config, port }, { log: silentLogger, database: h.db.database, slackRetries: { retries: 0 }, ...settings });
    extra.push(other);
    await other.start();
    // The review's post takes 6 s at Slack: three times the dead-after time, well within the lease.
    await startRunViaSlack(h);
    await eventually(() => h.slack.callsTo("chat.postMessage").length >= 1, { what: "the announcement" });
    h.slack.delayNext("chat.postMessage", 6000);
    await eventually(() => h.slack.inFlight.some((c) => c.method === "chat.postMessage"), { what: "the slow post, under way", timeoutMs: 30_000 });
    await pendingReview(h, { containing: "draft", timeoutMs: 20_000 });
    await h.settled({ also: extra });
    expect(h.slack.messages(CHANNEL).filter((m) => m.thread_ts && JSON.stringify(m.blocks ?? []).includes("draft"))).toHaveLength(1);
    expect(h.slack.callsTo("conversations.replies")).toHaveLength(0);
  });
});
