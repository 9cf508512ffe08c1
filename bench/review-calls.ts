// Figure review-calls: Slack calls per finished run, by method. Runs are started as Slack starts them
// (a signed kickoff-form submission), the local crew service runs two tasks per run that each wait for
// a person (it sends the task webhook and then the human-input request, as real deployments do), the
// bench approves every review 200 ms after its controls are visible, and the run finishes. Every Web
// API call the stand-in answered during the runs is counted.
//
// A review whose wait is known before its task message is posted costs one chat.postMessage (the
// review, with its controls); one whose task message is already in Slack costs that post and a
// chat.update adding the controls. The figure says how many reviews went either way.
//
//   npm run bench -- review-calls
//   BENCH_REVIEW_RUNS=8  BENCH_SLACK_LATENCY_MS=30-80  BENCH_TIER3_PER_MINUTE=50 (chat.update per channel; 0 = off)
import { APPROVE_ACTION } from "../src/adapters/slack/blocks/index.js";
import type { SimTask } from "../src/sim/crew-service.js";
import { prismaOf } from "../test/support/prisma.js";
import { cpuStallMs, submitKickoff } from "./child.js";
import { type Figure, round, sleep, startBenchBot, until } from "./lib.js";
import { parseLatency } from "./scale-out.js";

const RUNS = Number(process.env.BENCH_REVIEW_RUNS ?? 8);
const LATENCY = parseLatency(process.env.BENCH_SLACK_LATENCY_MS ?? "30-80");
const TIER3 = Number(process.env.BENCH_TIER3_PER_MINUTE ?? 50);
const THINK_MS = 200;
const TASKS: SimTask[] = [
  { id: "task-research", name: "research_task", agent: "Senior Research Analyst", humanInput: true, delayMs: 300, steps: 3 },
  { id: "task-write", name: "writing_task", agent: "Content Writer", humanInput: true, delayMs: 300, steps: 3 },
];

export async function reviewCalls(): Promise<Figure[]> {
  const b = await startBenchBot({ db: "embedded", slack: { latencyMs: LATENCY, ...(TIER3 > 0 ? { tier3PerMinute: TIER3 } : {}) }, crew: { tasks: TASKS, inputs: ["topic"] } });
  try {
    const stall0 = cpuStallMs();
    const t0 = Date.now();
    const channels = Array.from({ length: RUNS }, (_, i) => `C0CALLS${i}`);
    const clicked = new Set<string>();
    for (const [i, channel] of channels.entries()) {
      const status = await submitKickoff(b.slack, b.requests, { channel, topic: channel, trigger: `bench-calls-${i}` });
      if (status !== 200) throw new Error(`kickoff answered ${status}`);
    }
    const finished = () => prismaOf(b.bot.database).execution.count({ where: { completionTs: { not: null } } });
    const done = await until(
      async () => {
        for (const channel of channels)
          for (const msg of b.slack.messages(channel)) {
            const actions = (msg.blocks ?? []).find((x: any) => x.type === "actions");
            const approve = actions?.elements?.find((e: any) => e.action_id === APPROVE_ACTION);
            if (!approve || clicked.has(approve.value)) continue;
            clicked.add(approve.value);
            void sleep(THINK_MS).then(() =>
              b.requests.blockAction({
                user_id: "U0BENCH",
                channel_id: channel,
                message_ts: msg.ts,
                ...(msg.thread_ts ? { thread_ts: msg.thread_ts } : {}),
                action: { action_id: APPROVE_ACTION, block_id: actions.block_id, value: approve.value },
              }),
            );
          }
        return (await finished()) === RUNS;
      },
      120_000,
      50,
    );
    // Let the last updates (announcements, closing progress) land.
    await sleep(2000);
    const elapsed = Date.now() - t0;
    const stall1 = cpuStallMs();
    const calls = b.slack.calls.filter((c) => c.at >= t0 && c.method !== "views.open");
    const ok = calls.filter((c) => !c.error);
    const byMethod: Record<string, number> = {};
    for (const c of ok) byMethod[c.method] = (byMethod[c.method] ?? 0) + 1;
    // How each review got its controls: in its post, or by an update of its task message.
    const reviewIds = [...clicked];
    let inPost = 0;
    let byUpdate = 0;
    for (const id of reviewIds) {
      const shown = ok.find((c) => (c.method === "chat.postMessage" || c.method === "chat.update") && JSON.stringify(c.args.blocks ?? []).includes(`"value":"${id}"`));
      if (shown?.method === "chat.postMessage") inPost++;
      else if (shown) byUpdate++;
    }
    const perRun = (n: number) => round(n / RUNS, 2);
    const reviews = RUNS * TASKS.length;
    const stalled = stall0 !== undefined && stall1 !== undefined ? round(((stall1 - stall0) / elapsed) * 100, 0) : undefined;
    const note = `${RUNS} runs, ${TASKS.length} reviews each, approved ${THINK_MS} ms after they are visible; stand-in ${LATENCY.min}–${LATENCY.max} ms per call${TIER3 > 0 ? `, chat.update ${TIER3}/min per channel` : ""}; ${calls.length - ok.length} calls refused (429 or error); ${done ? "every run finished" : "NOT every run finished"} in ${round(elapsed / 1000, 1)} s${stalled !== undefined ? `; tasks waiting for a CPU ${stalled}% of the time` : ""}`;
    return [
      {
        figure: "review-calls",
        metric: "Slack calls per finished run",
        value: perRun(ok.length),
        unit: "calls",
        note: `${Object.entries(byMethod)
          .sort(([a], [c]) => a.localeCompare(c))
          .map(([m, n]) => `${m} ${perRun(n)}`)
          .join(", ")}; ${note}`,
      },
      {
        figure: "review-calls",
        metric: "reviews posted with their controls (one call)",
        value: inPost,
        unit: `of ${reviews}`,
        note: `${byUpdate} got them by a chat.update of their task message (post + update)`,
      },
      { figure: "review-calls", metric: "chat.update per run", value: perRun(byMethod["chat.update"] ?? 0), unit: "calls" },
      { figure: "review-calls", metric: "chat.postMessage per run", value: perRun(byMethod["chat.postMessage"] ?? 0), unit: "calls" },
    ];
  } finally {
    await b.close();
  }
}
