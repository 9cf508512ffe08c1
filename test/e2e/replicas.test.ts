import { describe, expect, it } from "vitest";
import type { SimCrewService, SimTask } from "../../src/sim/crew-service.js";
import type { FakeSlack, SlackCall } from "../support/fake-slack.js";
import { eventually } from "../support/harness.js";
import {
  approve,
  kickoffForm,
  kill,
  killReplicasAfterEach,
  pendingReviews,
  queryShared,
  type Replica,
  replicaServices,
  replicasSettled,
  startReplica,
  submitKickoff,
} from "../support/replicas.js";
import { usePostgres } from "../support/test-database.js";

killReplicasAfterEach();

const reviewPostsById = (slack: FakeSlack) => {
  const counts = new Map<string, number>();
  for (const call of slack.callsTo("chat.postMessage")) {
    const m = /^(?:✔️ Task finished|📝 Review needed): (\S+)/.exec(String(call.args.text ?? ""));
    if (!m || !call.args.thread_ts) continue;
    const key = `${call.args.thread_ts}/${m[1]}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
};
const completionPosts = (slack: FakeSlack): SlackCall[] =>
  slack.callsTo("chat.postMessage").filter((c) => !c.args.thread_ts && /^(✅ Crew|❌ Crew|⚠️ Lost track)/.test(String(c.args.text ?? "")));
const resumeKeys = (crew: SimCrewService) => crew.requests.filter((r) => r.path === "/resume").map((r) => `${(r.body as any).execution_id}/${(r.body as any).task_id}`);

const TASKS: SimTask[] = [
  { id: "task-research", name: "research_task", agent: "Senior Research Analyst", humanInput: true, delayMs: 100, steps: 1 },
  { id: "task-write", name: "writing_task", agent: "Content Writer", humanInput: true, delayMs: 100, steps: 1 },
];

describe.runIf(usePostgres)("several replicas on PostgreSQL", () => {
  it("three replicas, 12 concurrent runs, one replica killed: every review and notice once, every decision resumed once", async () => {
    const { slack, crew, db } = await replicaServices(TASKS);

    // a and b get webhooks; c has no PUBLIC_URL and relies on polling for the runs it starts.
    const replicas = await Promise.all([
      startReplica("a", { databaseUrl: db.url, slack, crew, webhooks: true }),
      startReplica("b", { databaseUrl: db.url, slack, crew, webhooks: true }),
      startReplica("c", { databaseUrl: db.url, slack, crew, webhooks: false }),
    ]);
    const [a, b, c] = replicas as [Replica, Replica, Replica];

    // One form per run: a form starts one run, however often it is submitted.
    const RUNS = 12;
    const forms = [];
    for (let i = 0; i < RUNS; i++) forms.push(await kickoffForm(slack, replicas[i % 3]!));
    const answers = await Promise.all(forms.map((form, i) => submitKickoff(replicas[(i + 1) % 3]!, form, `Topic ${i}`)));
    expect(answers.every((r) => r.status === 200)).toBe(true);
    await eventually(async () => (await queryShared<{ n: string }>(db.url, `SELECT count(*) AS n FROM "Execution" WHERE "kickoffId" IS NOT NULL`))[0]!.n === String(RUNS), {
      timeoutMs: 30_000,
      what: "12 kickoffs",
    });

    // Approve reviews as they appear, spreading the clicks; kill b once a third of them are decided.
    const TOTAL = RUNS * TASKS.length;
    const clicked = new Map<string, Replica>();
    let alive: Replica[] = replicas;
    let killed = false;
    const clickedAt = new Map<string, number>();
    const deadline = Date.now() + 75_000;
    const undecided = async () =>
      (await queryShared<{ id: string }>(db.url, `SELECT id FROM "Review" WHERE state IN ('posted', 'pending', 'deciding')`)).map((r) => r.id).filter((id) => clicked.has(id));
    while (clicked.size < TOTAL || (await undecided()).length > 0) {
      if (Date.now() > deadline) {
        const stuck = await queryShared(
          db.url,
          `SELECT r.id, r.state, r."shownState", r."messageTs", r."taskKey", e.state AS run, e."leaseOwner", e."nextPollAt", e.webhooks FROM "Review" r JOIN "Execution" e ON e.id = r."executionId" WHERE r."messageTs" IS NULL OR r.state <> 'approved'`,
        );
        const events = await queryShared(db.url, `SELECT kind, "processedAt", attempts FROM "WebhookEvent" WHERE "processedAt" IS NULL`);
        const effects = await queryShared(
          db.url,
          `SELECT kind, "subjectId", state, attempts, "runAt", "doneAt", "leaseOwner", "lastError", generation FROM "SlackEffect" WHERE state <> 'done' OR "subjectId" IN (SELECT id FROM "Review" WHERE state = 'pending')`,
        );
        const logs = replicas.map((r) => `--- ${r.name}\n${r.output().slice(-3000)}`).join("\n");
        throw new Error(`only ${clicked.size}/${TOTAL} reviews appeared: ${JSON.stringify({ stuck, events, effects, now: new Date() })}\n${logs}`);
      }
      // A click can be refused (a replica's answer on a loaded machine can come after the review's
      // message shows): like a person, click again what is still open a few seconds later.
      const shown = pendingReviews(slack);
      const again = (await undecided()).filter((id) => Date.now() - clickedAt.get(id)! > 3000 && shown.has(id));
      const fresh = [...shown].filter(([id]) => !clicked.has(id) || again.includes(id));
      await Promise.all(
        fresh.map(([id, where], i) => {
          const replica = alive[i % alive.length]!;
          clicked.set(id, replica);
          clickedAt.set(id, Date.now());
          return approve(replica, id, where);
        }),
      );
      if (!killed && clicked.size >= TOTAL / 3) {
        // Stop clicking on b and let the decisions it received reach the crew (a click is acknowledged
        // before the crew is called), then kill it: its leases, webhook URLs and runs are orphaned.
        alive = [a, c];
        const onB = [...clicked].filter(([, r]) => r === b).map(([id]) => `'${id}'`);
        if (onB.length) {
          // A click is acknowledged before it is claimed (a replica waits up to 2 s for a review's ts):
          // give b's last clicks time to claim, then let every claim reach the crew. Fixed wait: b is
          // another process, and a click it refused leaves no trace to wait for.
          await new Promise((r) => setTimeout(r, 3000));
          await eventually(
            async () => (await queryShared<{ n: string }>(db.url, `SELECT count(*) AS n FROM "Review" WHERE state = 'deciding' AND id IN (${onB.join(",")})`))[0]!.n === "0",
            { timeoutMs: 10_000, what: "b's decisions" },
          );
        }
        expect(await queryShared(db.url, `SELECT id FROM "Execution" WHERE "leaseOwner" IS NOT NULL OR "completionTs" IS NULL`)).not.toHaveLength(0);
        await kill(b);
        killed = true;
      }
      // The poll interval of this clicking loop (like eventually's), not a wait for something to happen.
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(killed).toBe(true);

    const finished = await eventually(
      async () => {
        const rows = await queryShared<{ id: string; state: string; completionTs: string | null }>(db.url, `SELECT id, state, "completionTs" FROM "Execution"`);
        return rows.length === RUNS && rows.every((r) => r.completionTs) ? rows : undefined;
      },
      // Generous: runs whose replica was killed finish through status polling, slower on a loaded machine.
      { timeoutMs: 60_000, what: "every run announced" },
    ).catch(async (err) => {
      // Say where it stopped: runs not announced, Slack effects not done, webhooks not processed.
      const runs = await queryShared(
        db.url,
        `SELECT id, state, "completionTs", "leaseOwner", "leaseExpiresAt", "nextPollAt", webhooks FROM "Execution" WHERE "completionTs" IS NULL`,
      );
      const effects = await queryShared(db.url, `SELECT kind, state, attempts, "runAt", "leaseOwner", "leaseExpiresAt", "lastError" FROM "SlackEffect" WHERE state <> 'done'`);
      const events = await queryShared(db.url, `SELECT kind, "processedAt", attempts FROM "WebhookEvent" WHERE "processedAt" IS NULL`);
      const logs = replicas.map((r) => `--- ${r.name}\n${r.output().slice(-4000)}`).join("\n");
      const reviewRows = await queryShared(db.url, `SELECT id, state, "messageTs", "taskKey", "executionId" FROM "Review" WHERE state <> 'approved'`);
      const shown = [...pendingReviews(slack)].map(([id, w]) => ({ id, ts: w.ts }));
      const clicks = [...clicked].map(([id, r]) => `${id.slice(0, 8)}@${r.name}`);
      const sim = [...crew.executions.values()].map((e) => ({ id: e.id, state: e.state, paused: e.pausedTaskId }));
      throw new Error(`${err.message}: ${JSON.stringify({ runs, reviewRows, shown, clicks, effects, events, sim, now: new Date() })}\n${logs}`);
    });
    expect(finished.every((r) => r.state === "completed")).toBe(true);
    // Late duplicates would be on their way now.
    await replicasSettled(db.url, slack, crew);

    const posts = reviewPostsById(slack);
    expect(posts.size).toBe(TOTAL);
    expect([...posts.entries()].filter(([, n]) => n !== 1)).toEqual([]);
    const reviews = await queryShared<{ id: string; state: string }>(db.url, `SELECT id, state FROM "Review"`);
    expect(reviews).toHaveLength(TOTAL);
    expect(reviews.every((r) => r.state === "approved")).toBe(true);

    expect(completionPosts(slack)).toHaveLength(RUNS);
    const resumes = resumeKeys(crew);
    expect(resumes).toHaveLength(TOTAL);
    expect(new Set(resumes).size).toBe(TOTAL);
  }, 150_000);

  it("kill -9 of the only bot mid-run, restart on the same database: the run completes in Slack without duplicates", async () => {
    // Slow second task: the bot is dead when its task webhook is sent.
    const { slack, crew, db } = await replicaServices([TASKS[0]!, { ...TASKS[1]!, delayMs: 2500 }]);

    const first = await startReplica("first", { databaseUrl: db.url, slack, crew, webhooks: true });
    const form = await kickoffForm(slack, first);
    await submitKickoff(first, form, "Restarts");
    const [reviewId, where] = await eventually(() => [...pendingReviews(slack)][0], { timeoutMs: 20_000, what: "the first review" });
    await approve(first, reviewId, where);
    await eventually(async () => (await queryShared<{ state: string }>(db.url, `SELECT state FROM "Review"`))[0]?.state === "approved", { what: "the decision stored" });
    await kill(first);

    // The crew finishes task 2 while no bot is up: its webhook is lost.
    await crew.waitFor(() => [...crew.executions.values()].some((e) => e.state === "PAUSED" && e.pausedTaskId === "task-write"), 10_000);
    const second = await startReplica("second", { databaseUrl: db.url, slack, crew, webhooks: true, port: first.port });
    const [secondId, secondWhere] = await eventually(() => [...pendingReviews(slack)].find(([id]) => id !== reviewId), {
      timeoutMs: 20_000,
      what: "the second review, from status",
    });
    await approve(second, secondId, secondWhere);
    await eventually(async () => (await queryShared<{ completionTs: string | null }>(db.url, `SELECT "completionTs" FROM "Execution"`))[0]?.completionTs, {
      timeoutMs: 20_000,
      what: "the completion",
    });
    await replicasSettled(db.url, slack, crew);

    expect([...reviewPostsById(slack).values()]).toEqual([1, 1]);
    expect(completionPosts(slack)).toHaveLength(1);
    expect(resumeKeys(crew)).toHaveLength(2);
    expect(new Set(resumeKeys(crew)).size).toBe(2);
  }, 90_000);

  it("two required approvals given at once on two replicas: every review resumed exactly once", async () => {
    const { slack, crew, db } = await replicaServices(TASKS);
    const extra = { CREW_APPROVALS: "2" };
    const [a, b] = (await Promise.all([
      startReplica("a", { databaseUrl: db.url, slack, crew, webhooks: true, extra }),
      startReplica("b", { databaseUrl: db.url, slack, crew, webhooks: true, extra }),
    ])) as [Replica, Replica];
    const RUNS = 3;
    for (let i = 0; i < RUNS; i++) await submitKickoff(b, await kickoffForm(slack, a), `Topic ${i}`);

    const TOTAL = RUNS * TASKS.length;
    const clicked = new Set<string>();
    const deadline = Date.now() + 60_000;
    while (clicked.size < TOTAL) {
      if (Date.now() > deadline) throw new Error(`only ${clicked.size}/${TOTAL} reviews appeared`);
      const fresh = [...pendingReviews(slack)].filter(([id]) => !clicked.has(id));
      await Promise.all(
        fresh.flatMap(([id, where]) => {
          clicked.add(id);
          // Two different people approve the same review at the same moment, each on another replica.
          return [approve(a, id, where, "U0BOB"), approve(b, id, where, "U0CAROL")];
        }),
      );
      // The poll interval of this clicking loop (like eventually's), not a wait for something to happen.
      await new Promise((r) => setTimeout(r, 100));
    }
    await eventually(
      async () => {
        const rows = await queryShared<{ completionTs: string | null }>(db.url, `SELECT "completionTs" FROM "Execution"`);
        return rows.length === RUNS && rows.every((r) => r.completionTs);
      },
      { timeoutMs: 30_000, what: "every run announced" },
    );
    await replicasSettled(db.url, slack, crew);
    const keys = resumeKeys(crew);
    expect(keys).toHaveLength(TOTAL);
    expect(new Set(keys).size).toBe(TOTAL);
    const approvals = await queryShared<{ n: string }>(db.url, `SELECT count(*) AS n FROM "ReviewApproval"`);
    expect(approvals[0]!.n).toBe(String(TOTAL * 2));
    // Each decision names both approvers (an approval that arrived while the other completed the count has no row of its own).
    const decisions = await queryShared<{ detail: { approvers?: string[] } }>(db.url, `SELECT detail FROM "AuditRecord" WHERE kind = 'decision'`);
    expect(decisions).toHaveLength(TOTAL);
    expect(decisions.every((d) => [...(d.detail.approvers ?? [])].sort().join() === "U0BOB,U0CAROL")).toBe(true);
  }, 120_000);
});
