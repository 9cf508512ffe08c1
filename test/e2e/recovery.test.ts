// Recovery in seconds after a crash, with the claim lease (CLAIM_STALE_MS) set to a minute so that
// only the recovery rules can explain a prompt review:
// - embedded database: the bot is killed with SIGKILL while its Slack post of a review is under way,
//   and restarted on the same data folder: it takes back what its earlier incarnation had claimed;
// - PostgreSQL: a replica killed the same way leaves its claims to the others once its heartbeat
//   is stale, while a live replica whose Slack call is slow keeps its own.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { type Crewline, createCrewline } from "../../src/app.js";
import { silentLogger } from "../../src/log/log.js";
import { type SimTask, startCrewService } from "../../src/sim/crew-service.js";
import { type FakeSlack, startFakeSlack } from "../support/fake-slack.js";
import { CHANNEL, CREW_TOKEN, eventually, freePort, type Harness, startHarness } from "../support/harness.js";
import { cleanups, kickoffForm, kill, killReplicasAfterEach, pendingReviews, type Replica, replicaServices, startReplica, submitKickoff } from "../support/replicas.js";
import { pendingReview, startRunViaSlack } from "../support/reviews.js";
import { usePostgres } from "../support/test-database.js";

killReplicasAfterEach();

const TASKS: SimTask[] = [{ id: "task-draft", name: "draft", agent: "Writer", humanInput: true, delayMs: 15_000, steps: 0 }];
/** A minute of lease; the default heartbeat (dead after 8 s of silence). */
const SLOW_LEASE = { CLAIM_STALE_MS: "60000", POLL_LEASE_MS: "60000" };

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
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-recovery-"));
  cleanups.push(
    () => slack.close(),
    () => crew.close(),
    async () => fs.rmSync(dataDir, { recursive: true, force: true }),
  );
  return { slack, crew, dataDir };
}

async function query<T>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text)).rows as T[];
  } finally {
    await client.end();
  }
}

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
  it("a replica killed with its review post under way: another takes the post over by the heartbeat rule (lease 60 s)", async () => {
    const { slack, crew, db } = await replicaServices(TASKS);
    // The survivor is up first; the doomed replica starts the run, so its outbox is nudged and claims the post.
    const survivor = await startReplica("survivor", { databaseUrl: db.url, slack, crew, webhooks: true, extra: SLOW_LEASE });
    const doomed = await startReplica("doomed", { databaseUrl: db.url, slack, crew, webhooks: true, extra: SLOW_LEASE });
    await runWithPostHeld(slack, doomed);
    // Killed well before its Web API call would time out (20 s); the post is the doomed replica's (the newest).
    const [holder] = await query<{ holder: string | null; newest: string }>(
      db.url,
      `SELECT (SELECT "leaseOwner" FROM "SlackEffect" WHERE kind = 'review.post') AS holder, (SELECT id FROM "Replica" ORDER BY "startedAt" DESC LIMIT 1) AS newest`,
    );
    expect(holder!.holder).toBe(holder!.newest);
    expect(draftPosts(slack)).toHaveLength(0);
    await kill(doomed);
    const killedAt = Date.now();
    await eventually(() => [...pendingReviews(slack)][0], { what: "the review, posted by the survivor", timeoutMs: 20_000 });
    expect(Date.now() - killedAt).toBeLessThan(20_000);
    expect(draftPosts(slack)).toHaveLength(1);
    expect(survivor.output()).not.toMatch(/"level":"error"/);
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
    await new Promise((r) => setTimeout(r, 1500));
    expect(h.slack.messages(CHANNEL).filter((m) => m.thread_ts && JSON.stringify(m.blocks ?? []).includes("draft"))).toHaveLength(1);
    expect(h.slack.callsTo("conversations.replies")).toHaveLength(0);
  });
});
