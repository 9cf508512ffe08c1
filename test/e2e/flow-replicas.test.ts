// Flow feedback requests with two bot processes (`src/main.ts`, flow-only configuration: no crew) on one
// PostgreSQL database: a request delivered to both posts once, clicks on both answer the flow once, and a
// request whose post failed on one replica is posted by the other's recovery sweep, once.
// Runs only with CREWLINE_TEST_DATABASE=postgres.
import { describe, expect, it } from "vitest";
import { FLOW_ACTIONS_BLOCK } from "../../src/adapters/slack/blocks/index.js";
import { startFlowService } from "../../src/sim/flow-service.js";
import { type FakeSlack, startFakeSlack } from "../support/fake-slack.js";
import { FLOW_CHANNEL, FLOW_SECRET } from "../support/flows.js";
import { eventually, USER } from "../support/harness.js";
import { cleanups, killReplicasAfterEach, startReplica } from "../support/replicas.js";
import { createTestDatabaseUrl, usePostgres } from "../support/test-database.js";

killReplicasAfterEach();

/** A flow-only replica (no crew) on the shared database; `hook` is its flow's webhook URL. */
async function flowReplica(name: string, databaseUrl: string, slack: FakeSlack) {
  const replica = await startReplica(name, {
    databaseUrl,
    slack,
    webhooks: true,
    extra: { FLOW_NAME: "content", FLOW_WEBHOOK_SECRET: FLOW_SECRET, FLOW_CHANNEL, POLL_SWEEP_MS: "500", CLAIM_STALE_MS: "1500" },
  });
  return { ...replica, hook: `${replica.url}/hooks/flows/content` };
}

describe.runIf(usePostgres)("flow feedback requests on two replicas (PostgreSQL)", () => {
  it("posts a request delivered to both once, answers once across clicks on both, and recovers a failed post once", async () => {
    const slack = await startFakeSlack();
    const flow = await startFlowService({ secret: FLOW_SECRET });
    const db = await createTestDatabaseUrl();
    cleanups.push(
      () => slack.close(),
      () => flow.close(),
      () => db.drop(),
    );
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
    await new Promise((r) => setTimeout(r, 500));
    const click = (replica: typeof a) =>
      replica.requests.blockAction({
        user_id: USER,
        channel_id: FLOW_CHANNEL,
        message_ts: msg.ts,
        action: { action_id: approved.action_id, block_id: FLOW_ACTIONS_BLOCK, value: approved.value },
      });
    await Promise.all([click(a), click(b), click(a), click(b)]);
    await eventually(() => flow.answers.length === 1, { timeoutMs: 15_000 });
    await new Promise((r) => setTimeout(r, 1000));
    expect(flow.calls).toHaveLength(1);
    expect(slack.callsTo("chat.postMessage").filter((c) => c.args.channel === FLOW_CHANNEL)).toHaveLength(1);

    // The first post of req-2 fails on a; a sweep (a's or b's) retakes the stale claim and posts it once.
    slack.failNext("chat.postMessage", "fatal_error");
    expect((await flow.send({ id: "req-2", message: "second request" }, { url: a.hook })).status).toBe(202);
    await eventually(() => slack.messages(FLOW_CHANNEL).some((m) => JSON.stringify(m.blocks).includes("second request")), { timeoutMs: 15_000, what: "the recovered post" });
    await new Promise((r) => setTimeout(r, 2500));
    expect(slack.messages(FLOW_CHANNEL).filter((m) => JSON.stringify(m.blocks).includes("second request"))).toHaveLength(1);
  }, 120_000);
});
