// Hostile text: every function that works on text from a crew (or a flow, or a Slack user) fed 2 MiB
// inputs built to make backtracking patterns and diffs slow, and the bot end to end while such
// outputs arrive. Figures: hostile-text (each function's worst time, against a plain copy of the same
// input measured in the same run) and hostile-bot (GET /healthz latency, the bot's event-loop delay,
// and another run's Approve click reaching its crew, while a 2 MiB pathological output and a
// 20,000-line round-2 diff are processed).
import fs from "node:fs";
import {
  APPROVE_ACTION,
  compactDiff,
  diffCodeBlock,
  errorNotice,
  escapeMrkdwn,
  excerpt,
  fitMarkdown,
  fitMrkdwn,
  fitQuote,
  humanizeInputName,
  markdownToMrkdwn,
  outputBlocks,
  quoteMrkdwn,
  REVIEW_ACTIONS_BLOCK,
  revealLinkHosts,
  unifiedDiff,
} from "../src/adapters/slack/blocks/index.js";
import { redact } from "../src/log/log.js";
import { startCrewService } from "../src/sim/crew-service.js";
import { redactEchoes } from "../src/text/echoes.js";
import { sanitizeText } from "../src/text/sanitize.js";
import { truncatePlain } from "../src/text/truncate.js";
import { startFakeSlack } from "../test/support/fake-slack.js";
import { freePort } from "../test/support/harness.js";
import { slackRequester } from "../test/support/slack-requests.js";
import { createTestDatabaseUrl } from "../test/support/test-database.js";
import { buildBot, type Child, startBot, submitKickoff } from "./child.js";
import { BOT_TOKEN, CREW_NAME, CREW_TOKEN, type Figure, round, SIGNING_SECRET, summarize, tmpDir, until } from "./lib.js";
import { startNodeFlags } from "./node-flags.js";

const MIB2 = 2 * 1024 * 1024;
/** `unit` repeated to `length` UTF-16 units. */
const fill = (unit: string, length = MIB2) => unit.repeat(Math.ceil(length / unit.length)).slice(0, length);
const lines = (n: number, word: string) => Array.from({ length: n }, (_, i) => `line ${i}: ${word} ${(i * 7919) % 10007}`).join("\n");

/** Inputs that made the earlier code quadratic (or worse), and others in the same spirit. */
export function hostileInputs(): Record<string, string> {
  return {
    "unclosed bold": fill("**a "),
    "brackets then strikes": `${"[".repeat(300_000)}${fill("~~b ", MIB2 - 300_000)}`,
    "unclosed __": fill("__a "),
    "unclosed ~~": fill("~~b "),
    "unclosed ***": fill("***a "),
    "link starts": fill("[a](u "),
    "link starts, shared end": `${fill("[](a", MIB2 / 2)}${" ".repeat(MIB2 / 2 - 1)}x`,
    "autolink starts": fill("<https:"),
    backticks: fill("`"),
    "backtick runs": `x ${Array.from({ length: 2_000 }, (_, i) => `${"`".repeat(2_000 - i)}a`)
      .join("")
      .slice(0, MIB2)}`,
    "unclosed fence": `\`\`\`\n${fill("code **x** [y](z)\n", MIB2 - 4)}`,
    "< flood": fill("<"),
    "entity flood": fill("&amp;"),
    "lone surrogates": fill("\ud83d"),
    "surrogate pairs": fill("😀"),
    "one long word": fill("a"),
    "heading of blanks": `# ${" ".repeat(MIB2 - 3)}x`,
    "nested quotes": fill(">   "),
    "bullet of blanks": `- ${" ".repeat(MIB2 - 3)}\u2028`,
    "short lines": fill("a\n"),
    "blank flood": fill(" "),
    escapes: fill("\\*"),
    "NUL flood": fill("\u0000"),
    "CamelCase name": `a${fill("A", MIB2 - 1)}`,
    "URL scheme starts": fill("a-"),
    "slash run": fill("/"),
  };
}

/** Pairs of versions for the diffs: two rounds of 20,000 differing lines, and 2 MiB ones. */
export function hostilePairs(): Record<string, [string, string]> {
  return {
    "20,000 lines, every line changed": [lines(20_000, "alpha"), lines(20_000, "omega")],
    "20,000 lines, every 10th changed": [lines(20_000, "same"), lines(20_000, "same").replace(/: same (\d*0)\n/g, ": other $1\n")],
    "2 MiB, nothing shared": [fill("x y "), fill("y x ")],
    "2 MiB, shifted by a word": [`start ${fill("a ")}`, `${fill("a ")} end`],
    "2 MiB pathological, then 20,000 lines": [fill("**a "), lines(20_000, "alpha")],
  };
}

/** The text functions, each as the bot calls it on whole outside text (the limits are the ones its messages use). */
const FUNCTIONS: Record<string, (text: string) => unknown> = {
  fitMarkdown: (t) => fitMarkdown(t, 2_900),
  excerpt: (t) => excerpt(t, 2_900),
  fitMrkdwn: (t) => fitMrkdwn(t, 700),
  fitQuote: (t) => fitQuote(t, 2_500),
  outputBlocks: (t) => outputBlocks(t, true),
  "errorNotice (readableError)": (t) => errorNotice(t),
  sanitizeText: (t) => sanitizeText(t),
  truncatePlain: (t) => truncatePlain(t, 150),
  humanizeInputName: (t) => humanizeInputName(t),
  "redactEchoes (a crew's or flow's error text)": (t) => redactEchoes(t, [CREW_TOKEN]),
  "redact (every log line)": (t) => redact(t),
};

/**
 * Building blocks the bot calls only on text already cut to what a message shows (the `fit…`
 * functions above cut first): measured on the whole 2 MiB for their linearity, without a target.
 */
const WHOLE_TEXT: Record<string, [(text: string) => unknown, string]> = {
  markdownToMrkdwn: [(t) => markdownToMrkdwn(t), "called by fitMarkdown on at most 4× what is shown (≤ 11,664 chars)"],
  escapeMrkdwn: [(t) => escapeMrkdwn(t), "called on text cut first (fitMrkdwn, fitQuote, names)"],
  quoteMrkdwn: [(t) => quoteMrkdwn(t), "called on text cut first (fitQuote)"],
  revealLinkHosts: [(t) => revealLinkHosts(t), "called on outputs shown whole (≤ 10,000 chars)"],
};

const DIFFS: Record<string, (before: string, after: string) => unknown> = {
  compactDiff: (b, a) => diffCodeBlock(compactDiff(b, a)),
  unifiedDiff: (b, a) => unifiedDiff(b, a, "round-1", "round-2"),
};

/** The best of `reps` runs (the least disturbed by other work on the machine), in ms. */
function timed(f: () => unknown, reps = 3): number {
  let best = Number.POSITIVE_INFINITY;
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    f();
    best = Math.min(best, performance.now() - t0);
  }
  return best;
}

/** A plain copy of the text (UTF-8 out and back): the cost of reading it once. */
const copy = (text: string) => Buffer.from(text, "utf8").toString("utf8");

export async function hostileText(): Promise<Figure[]> {
  const inputs = hostileInputs();
  const rows: Figure[] = [];
  for (const [name, f] of Object.entries(FUNCTIONS)) {
    let worst = { ms: -1, input: "", copyMs: 0 };
    for (const [label, text] of Object.entries(inputs)) {
      const t = timed(() => f(text));
      if (t > worst.ms) worst = { ms: t, input: label, copyMs: timed(() => copy(text)) };
    }
    rows.push(row(name, worst.ms, worst.copyMs, `worst of ${Object.keys(inputs).length} inputs of 2 MiB: ${worst.input}`));
  }
  for (const [name, [f, use]] of Object.entries(WHOLE_TEXT)) {
    let worst = { ms: -1, input: "", copyMs: 0 };
    for (const [label, text] of Object.entries(inputs)) {
      const t = timed(() => f(text), 1);
      if (t > worst.ms) worst = { ms: t, input: label, copyMs: timed(() => copy(text)) };
    }
    const { target: _t, pass: _p, ...shown } = row(`${name} (whole 2 MiB)`, worst.ms, worst.copyMs, `worst of the same inputs: ${worst.input}; ${use}`);
    rows.push(shown);
  }
  const pairs = hostilePairs();
  for (const [name, f] of Object.entries(DIFFS)) {
    // Fresh inputs each time: compactDiff remembers its recent answers.
    let worst = { ms: -1, input: "", copyMs: 0 };
    for (const [label, [before, after]] of Object.entries(pairs)) {
      let n = 0;
      const t = timed(() => f(`${before}${" ".repeat(++n)}`, after));
      if (t > worst.ms) worst = { ms: t, input: label, copyMs: timed(() => copy(before + after)) };
    }
    rows.push(row(name, worst.ms, worst.copyMs, `worst of ${Object.keys(pairs).length} pairs: ${worst.input}`));
  }
  return rows;
}

function row(name: string, ms: number, copyMs: number, note: string): Figure {
  return {
    figure: "hostile-text",
    metric: name,
    value: round(ms, 1),
    unit: "ms",
    target: "< 50 ms",
    pass: ms < 50,
    baseline: round(copyMs, 1),
    ratio: round(ms / Math.max(copyMs, 0.01), 1),
    note: `${note}; baseline: a plain copy of the same input`,
  };
}

// ------------------------------------------------------------------ the bot, end to end

/** The highest event-loop delay the bot saw since the last scrape (prom-client resets it on each). */
async function eventLoopMaxMs(botUrl: string): Promise<number> {
  const res = await fetch(`${botUrl}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  const text = await res.text();
  const line = text.split("\n").find((l) => l.startsWith("nodejs_eventloop_lag_max_seconds "));
  return Number(line?.split(" ")[1] ?? Number.NaN) * 1000;
}
const METRICS_TOKEN = "bench-metrics-token";

/**
 * The compiled bot as `npm start` runs it, alone in its process (the Slack stand-in, the crew service
 * and this bench's probes run in the bench's process, so their work is not counted as the bot's).
 */
export async function hostileBot(): Promise<Figure[]> {
  // BENCH_HOSTILE_DB=postgres: on PostgreSQL (the embedded database's engine runs on a thread of its own).
  const onPostgres = process.env.BENCH_HOSTILE_DB === "postgres";
  buildBot();
  const slack = await startFakeSlack();
  const crew = await startCrewService({
    token: CREW_TOKEN,
    inputs: ["topic"],
    tasks: [{ id: "task-review", name: "review_task", agent: "Senior Research Analyst", humanInput: true, delayMs: 0, steps: 0 }],
  });
  const db = onPostgres ? await createTestDatabaseUrl() : undefined;
  const dataDir = tmpDir("hostile");
  const port = await freePort();
  const botUrl = `http://127.0.0.1:${port}`;
  let bot: Child | undefined;
  try {
    bot = await startBot(
      {
        SLACK_BOT_TOKEN: BOT_TOKEN,
        SLACK_SIGNING_SECRET: SIGNING_SECRET,
        SLACK_API_URL: slack.url,
        PORT: String(port),
        PUBLIC_URL: botUrl,
        CREW_BASE_URL: crew.url,
        CREW_TOKEN,
        CREW_NAME,
        METRICS_TOKEN,
        LOG_LEVEL: "error",
        DATA_DIR: dataDir,
        ...(db ? { DATABASE_URL: db.url } : {}),
      },
      port,
      startNodeFlags(),
    );
    const requests = slackRequester({ baseUrl: botUrl, signingSecret: SIGNING_SECRET, responseUrlBase: slack.responseUrlBase });
    const approveButton = (channel: string) =>
      slack
        .messages(channel)
        .flatMap((m) => (m.blocks ?? []) as any[])
        .flatMap((b) => (b.block_id === REVIEW_ACTIONS_BLOCK ? (b.elements ?? []) : []))
        .find((e: any) => e.action_id === APPROVE_ACTION);
    // Another run, waiting for a decision: its Approve click must reach the crew meanwhile.
    if ((await submitKickoff(slack, requests, { channel: "C0OTHER", topic: "other", trigger: "bench-hostile-other" })) !== 200) throw new Error("kickoff refused");
    if (!(await until(() => !!approveButton("C0OTHER"), 60_000, 50))) throw new Error("the other run's review was never posted");
    const other = [...crew.executions.values()].find((e) => e.inputs.topic === "other")!;
    const reviewMessage = slack.messages("C0OTHER").find((m) => JSON.stringify(m.blocks ?? []).includes(APPROVE_ACTION))!;
    const approve = approveButton("C0OTHER");

    // The hostile run: round 1 is a 2 MiB pathological output, round 2 20,000 differing lines.
    if ((await submitKickoff(slack, requests, { channel: "C0HOSTILE", topic: "hostile", trigger: "bench-hostile" })) !== 200) throw new Error("kickoff refused");
    if (!(await until(() => !!approveButton("C0HOSTILE"), 60_000, 50))) throw new Error("the hostile run never started");
    const hostile = [...crew.executions.values()].find((e) => e.inputs.topic === "hostile")!;
    const task = (output: string) => JSON.stringify({ kickoff_id: hostile.id, name: "report_task", agent: { role: "Writer" }, description: "Write the report.", output });
    const round1 = task(fill("**a ", MIB2 - 1_000));
    const round2 = task(lines(20_000, "omega"));
    const filesBefore = slack.files.filter((f) => f.channel === "C0HOSTILE").length;

    await eventLoopMaxMs(botUrl); // starts the bot's window afresh
    const probes: number[] = [];
    let probing = true;
    const probe = (async () => {
      while (probing) {
        const t0 = performance.now();
        const res = await fetch(`${botUrl}/healthz`);
        await res.arrayBuffer();
        probes.push(performance.now() - t0);
        await sleep(20);
      }
    })();
    const started = performance.now();
    const post = (body: string) => fetch(hostile.webhooks.task!, { method: "POST", headers: { "content-type": "application/json" }, body }).then((r) => r.status);
    const answers = [await post(round1)];
    await sleep(300);
    answers.push(await post(round2));
    // Meanwhile, the other run's Approve.
    const t0 = Date.now();
    await requests.blockAction({
      user_id: "U0BENCH",
      channel_id: "C0OTHER",
      message_ts: reviewMessage.ts,
      thread_ts: reviewMessage.thread_ts,
      action: { action_id: APPROVE_ACTION, block_id: REVIEW_ACTIONS_BLOCK, value: approve.value },
    });
    const resumed = () => crew.requests.find((q) => q.path === "/resume" && (q.body as any)?.execution_id === other.id);
    const reached = await until(() => !!resumed(), 10_000, 2);
    const clickMs = reached ? resumed()!.at - t0 : Number.NaN;
    // Until both rounds are in Slack with their files.
    const done = await until(() => slack.files.filter((f) => f.channel === "C0HOSTILE").length >= filesBefore + 2, 60_000, 50);
    const elapsed = performance.now() - started;
    probing = false;
    await probe;
    const worstDelay = await eventLoopMaxMs(botUrl);
    const p = summarize(probes);
    const where = onPostgres ? "PostgreSQL" : "embedded database";
    return [
      {
        figure: "hostile-bot",
        metric: `GET /healthz, worst (${where})`,
        value: round(p.max, 1),
        unit: "ms",
        target: "< 100 ms",
        pass: p.max < 100 && done,
        note: `the compiled bot in its own process; ${p.n} probes every ~20 ms over ${round(elapsed / 1000, 1)} s while a 2 MiB pathological output (round 1) and 20,000 differing lines (round 2) of one task were taken in and posted; p50 ${round(p.p50, 1)} ms; webhook answers ${answers.join(", ")}; ${done ? "both rounds and their files reached Slack" : "NOT all rounds/files reached Slack in 60 s"}`,
      },
      {
        figure: "hostile-bot",
        metric: `event-loop delay, worst (${where})`,
        value: round(worstDelay, 1),
        unit: "ms",
        target: "< 100 ms",
        pass: worstDelay < 100,
        note: "nodejs_eventloop_lag_max_seconds from the bot's /metrics (prom-client, perf_hooks.monitorEventLoopDelay), read before and after the same interval",
      },
      {
        figure: "hostile-bot",
        metric: `another run's Approve → /resume at its crew (${where})`,
        value: Number.isNaN(clickMs) ? null : round(clickMs, 0),
        unit: "ms",
        target: "< 1000 ms",
        pass: clickMs < 1_000,
        note: "clicked right after round 2 was sent",
      },
    ];
  } finally {
    await bot?.stop().catch(() => {});
    await crew.close().catch(() => {});
    await slack.close().catch(() => {});
    await db?.drop().catch(() => {});
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
