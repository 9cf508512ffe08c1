// Flow feedback requests with two bot processes (`src/main.ts`, flow-only configuration: no crew) on one
// PostgreSQL database: a request delivered to both posts once, clicks on both answer the flow once, and a
// request whose post failed on one replica is posted by the other's recovery sweep, once; an answer cut
// short by kill -9 is taken over by the other replica's heartbeat rule.
// Runs only with CREWLINE_TEST_DATABASE=postgres.
import { describe, expect, it } from "vitest";
import { FLOW_ACTIONS_BLOCK } from "../../src/adapters/slack/blocks/index.js";
import { startFlowService } from "../../src/sim/flow-service.js";
import { type FakeSlack, startFakeSlack } from "../support/fake-slack.js";
import { FLOW_CHANNEL, FLOW_SECRET } from "../support/flows.js";
import { eventually, USER } from "../support/harness.js";
import { holdingProxy } from "../support/holding-proxy.js";
import { cleanups, kill, killReplicasAfterEach, queryShared, replicasSettled, startReplica } from "../support/replicas.js";
import { createTestDatabaseUrl, usePostgres } from "../support/test-database.js";

killReplicasAfterEach();

/** A flow-only replica (no crew) on the shared database; `hook` is its flow's webhook URL. */
async function flowReplica(name: string, databaseUrl: string, slack: FakeSlack, extra: Record<string, string> = {}) {
  const replica = await startReplica(name, {
    databaseUrl,
    slack,
    webhooks: true,
    extra: { FLOW_NAME: "content", FLOW_WEBHOOK_SECRET: FLOW_SECRET, FLOW_CHANNEL, POLL_SWEEP_MS: "500", CLAIM_STALE_MS: "1500", ...extra },
  });
  return { ...replica, hook: `${replica.url}/hooks/flows/content` };
}

/** The Slack stand-in, the flow service and a PostgreSQL database, cleaned up after the test. */
async function flowServices() {
  const slack = await startFakeSlack();
  const flow = await startFlowService({ secret: FLOW_SECRET });
  const db = await createTestDatabaseUrl();
  cleanups.push(
    () => slack.close(),
    () => flow.close(),
    () => db.drop(),
  );
  return { slack, flow, db };
}

describe.runIf(usePostgres)("flow feedback requests on two replicas (PostgreSQL)", () => {
  it("posts a request delivered to both once, answers once across clicks on both, and recovers a failed post once", async () => {
    const { slack, flow, db } = await flowServices();
    const a = await flowReplica("a", db.url, slack);
    const b = await flowReplica("b", db.url, slack);

    // The start-up log names each flow's webhook URL, never its secret.
    expect(a.output()).not.toContain(FLOW_SECRET);

    const [r1, r2] = await Promise.all([flow.send({ id: "req-1" }, { url: a.hook }), flow.send({ id: "req-1" }, { url: b.hook })]);
    expect([r1.status, r2.status].sort()).toEqual([200, 202]);
    const msg = await eventually(() => slack.messages(FLOW_CHANNEL).find((m) => (m.blocks ?? []).some((bl: any) => bl.block_id === FLOW_ACTIONS_BLOCK)), { timeoutMs: 15_000 });
    const actions = msg.blocks!.find((bl: any) => bl.block_id === FLOW_ACTIONS_BLOCK);
    const approved = actions.elements.find((e: any) => e.text.text === "approved");
    // Slack has the message a moment before the bot stores its ts.
    await replicasSettled(db.url, slack);
    const click = (replica: typeof a) =>
      replica.requests.blockAction({
        user_id: USER,
        channel_id: FLOW_CHANNEL,
        message_ts: msg.ts,
        action: { action_id: approved.action_id, block_id: FLOW_ACTIONS_BLOCK, value: approved.value },
      });
    await Promise.all([click(a), click(b), click(a), click(b)]);
    await eventually(() => flow.answers.length === 1, { timeoutMs: 15_000 });
    await replicasSettled(db.url, slack);
    expect(flow.calls).toHaveLength(1);
    expect(slack.callsTo("chat.postMessage").filter((c) => c.args.channel === FLOW_CHANNEL)).toHaveLength(1);

    // The first post of req-2 fails on a; a sweep (a's or b's) retakes the stale claim and posts it once.
    slack.failNext("chat.postMessage", "fatal_error");
    expect((await flow.send({ id: "req-2", message: "second request" }, { url: a.hook })).status).toBe(202);
    await eventually(() => slack.messages(FLOW_CHANNEL).some((m) => JSON.stringify(m.blocks).includes("second request")), { timeoutMs: 15_000, what: "the recovered post" });
    await replicasSettled(db.url, slack);
    expect(slack.messages(FLOW_CHANNEL).filter((m) => JSON.stringify(m.blocks).includes("second request"))).toHaveLength(1);
  }, 120_000);

  it("a replica killed with its answer to the flow under way: the request is open again on the other within 15 s, and the flow hears one answer", async () => {
    const { slack, flow, db } = await flowServices();
    // The flow's callback URL goes through a stand-in that holds the first answer: its sender dies mid-call.
    const proxy = await holdingProxy(flow.url, (p) => p.startsWith("/human_feedback_requests/"));
    // A minute of lease: only the heartbeat rule (dead after 4 s of silence here) can explain a takeover within 15 s.
    const slow = { CLAIM_STALE_MS: "60000", POLL_LEASE_MS: "60000", REPLICA_DEAD_AFTER_MS: "4000" };
    const survivor = await flowReplica("survivor", db.url, slack, slow);
    const doomed = await flowReplica("doomed", db.url, slack, slow);
    expect((await flow.send({ id: "req-kill" }, { url: doomed.hook, callbackOrigin: proxy.url })).status).toBe(202);
    const msg = await eventually(() => slack.messages(FLOW_CHANNEL).find((m) => (m.blocks ?? []).some((bl: any) => bl.block_id === FLOW_ACTIONS_BLOCK)), { timeoutMs: 15_000 });
    await replicasSettled(db.url, slack);
    const click = (replica: { requests: typeof survivor.requests }) => {
      const actions = slack
        .messages(FLOW_CHANNEL)
        .find((m) => m.ts === msg.ts)!
        .blocks!.find((bl: any) => bl.block_id === FLOW_ACTIONS_BLOCK);
      const approved = actions.elements.find((e: any) => e.text.text === "approved");
      return replica.requests.blockAction({
        user_id: USER,
        channel_id: FLOW_CHANNEL,
        message_ts: msg.ts,
        action: { action_id: approved.action_id, block_id: FLOW_ACTIONS_BLOCK, value: approved.value },
      });
    };
    await click(doomed);
    await eventually(() => proxy.held() > 0, { what: "the answer under way", timeoutMs: 20_000 });
    await kill(doomed);
    const killedAt = Date.now();
    proxy.release();
    await eventually(
      () =>
        (slack.messages(FLOW_CHANNEL).find((m) => m.ts === msg.ts)?.blocks ?? []).some((bl: any) => bl.block_id === FLOW_ACTIONS_BLOCK) && survivor.output().includes("open again"),
      {
        what: "the request open again",
        timeoutMs: 30_000,
      },
    );
    const reopenedMs = Date.now() - killedAt;
    console.log(`flow decision claim: kill -9 -> request open again ${reopenedMs} ms`);
    expect(reopenedMs).toBeLessThan(15_000);
    await click(survivor);
    await eventually(() => flow.answers.length === 1, { what: "the answer reaching the flow", timeoutMs: 20_000 });
    await replicasSettled(db.url, slack);
    expect(flow.answers).toEqual([expect.objectContaining({ requestId: "req-kill" })]);
    // The held call never reached the flow: one call in all, the survivor's.
    expect(flow.calls).toHaveLength(1);
  }, 120_000);

  it("a replica killed with a deadline's answer under way: the other takes the deadline over within 15 s, and the flow hears one answer", async () => {
    const { slack, flow, db } = await flowServices();
    const proxy = await holdingProxy(flow.url, (p) => p.startsWith("/human_feedback_requests/"));
    const env = { CLAIM_STALE_MS: "60000", POLL_LEASE_MS: "60000", REPLICA_DEAD_AFTER_MS: "4000", FLOW_DECIDE_WITHIN: "10s", FLOW_ON_TIMEOUT: "reject" };
    const replicas = [await flowReplica("first", db.url, slack, env), await flowReplica("second", db.url, slack, env)];
    expect((await flow.send({ id: "req-deadline" }, { url: replicas[0]!.hook, callbackOrigin: proxy.url })).status).toBe(202);
    await eventually(() => slack.messages(FLOW_CHANNEL).find((m) => (m.blocks ?? []).some((bl: any) => bl.block_id === FLOW_ACTIONS_BLOCK)), { timeoutMs: 15_000 });
    // Whichever replica's deadline pass comes first claims the deadline, then the answer.
    await eventually(() => proxy.held() > 0, { what: "the deadline's answer under way", timeoutMs: 60_000 });
    const [claim] = await queryShared<{ claimedBy: string; deadlineClaimedBy: string }>(db.url, `SELECT "claimedBy", "deadlineClaimedBy" FROM "FlowRequest"`);
    expect(claim!.claimedBy).toBe(claim!.deadlineClaimedBy);
    const ids = (await queryShared<{ id: string }>(db.url, `SELECT id FROM "Replica" ORDER BY "startedAt"`)).map((r) => r.id);
    await kill(replicas[ids.indexOf(claim!.deadlineClaimedBy)]!);
    const killedAt = Date.now();
    proxy.release();

    await eventually(() => flow.answers.length === 1, { what: "the deadline's answer reaching the flow", timeoutMs: 60_000 });
    const tookMs = flow.answers[0]!.at - killedAt;
    console.log(`flow deadline claim: kill -9 -> the deadline's answer at the flow ${tookMs} ms`);
    expect(tookMs).toBeLessThan(15_000);
    await replicasSettled(db.url, slack);
    expect(flow.calls).toHaveLength(1);
    expect(flow.answers[0]).toMatchObject({ requestId: "req-deadline", feedback: expect.stringContaining("rejected") });
    const [done] = await queryShared<{ state: string; deadlineDoneAt: Date | null }>(db.url, `SELECT state, "deadlineDoneAt" FROM "FlowRequest"`);
    expect(done).toMatchObject({ deadlineDoneAt: expect.any(Date) });
  }, 120_000);
});
