// The whole bot over real boundaries: signed Slack requests to /slack/events, a fake Slack Web API,
// the local crew service over HTTP (sending real webhooks), and a fresh database.
import { randomBytes } from "node:crypto";
import { freePort } from "../../src/playground/free-port.js";

export { freePort };

import { inputNameFromBlockId } from "../../src/adapters/slack/blocks/index.js";
import { type Crewline, type CrewlineOptions, createCrewline } from "../../src/app.js";
import type { AppConfig, CrewConfig } from "../../src/config/config.js";
import { silentLogger } from "../../src/log/log.js";
import { type SimCrewOptions, type SimCrewService, startCrewService } from "../../src/sim/crew-service.js";
import { type FakeSlack, type FakeSlackOptions, startFakeSlack } from "./fake-slack.js";
import { type SlackRequester, slackRequester } from "./slack-requests.js";
import { createTestDatabase, type TestDatabase } from "./test-database.js";

export const SIGNING_SECRET = "test-signing-secret";
export const BOT_TOKEN = "xoxb-test-bot-token";
export const CREW_TOKEN = "crew-org-token";
export const CHANNEL = "C0RUNS";
export const USER = "U0ALICE";
/** The app's OAuth client (distribution mode, `oauth: true`). */
export const OAUTH_CLIENT = { clientId: "1111.2222", clientSecret: "test-client-secret", stateSecret: "test-state-secret-0123456789" };

export interface HarnessOptions {
  crew?: Partial<SimCrewOptions>;
  /** Settings of the "research" crew itself (e.g. eventStream). */
  research?: Partial<CrewConfig>;
  /** Extra crews served by the same local service, under other names. */
  crews?: Partial<CrewConfig>[];
  slack?: FakeSlackOptions;
  webhooks?: boolean;
  /** A path after the bot's address in PUBLIC_URL ("/crewline"), as behind a proxy that passes it through. */
  publicPath?: string;
  config?: Partial<AppConfig>;
  crewline?: CrewlineOptions;
  /** Distribution mode: no SLACK_BOT_TOKEN; workspaces install the app by OAuth (tokens sealed with `encryptionKey`). */
  oauth?: { encryptionKey?: Buffer };
}

export interface Harness {
  bot: Crewline;
  botUrl: string;
  slack: FakeSlack;
  crew: SimCrewService;
  db: TestDatabase;
  requests: SlackRequester;
  config: AppConfig;
  /**
   * Resolves once nothing more happens without outside input (see settled() below). Say which other
   * bots share the database (moreReplicas, createCrewline) in `also`, so that their work is waited for too.
   */
  settled(opts?: SettledOptions): Promise<void>;
  close(): Promise<void>;
}

export interface SettledOptions {
  timeoutMs?: number;
  /** Other bots on the same database whose work counts too. */
  also?: Crewline[];
  /**
   * false: a crew run working on a task counts only while it sends a webhook (a test whose crew task
   * runs for a minute on purpose); by default the crew's runs must have paused or ended.
   */
  crewRuns?: boolean;
  /** The bots' clock (an injected one, moved ahead by the test): when an effect is due is read on it. */
  clock?: { now(): Date };
}

/**
 * Resolves once nothing more happens without outside input: the crew service has no run going (nor
 * webhook on its way; see crewRuns), no bot handles a Slack event or has recorded callbacks unprocessed, steps waiting to
 * be coalesced, or an effect being performed, and the outbox holds no effect still to do, whenever it
 * is due (an update spaced after the last, a retry after its backoff): what would reach Slack later
 * is waited for, so "nothing more was posted" after it proves something. Two quiet checks in a row.
 * Timers that start new work (status polling, reminder and deadline loops) are not waited for; an
 * effect due after the time-out is an error, not "settled".
 */
export async function settled(bots: Crewline[], crew: SimCrewService | undefined, opts: SettledOptions = {}): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const deadline = Date.now() + timeoutMs;
  // An effect's due time is on the bots' clock: how far ahead of it, in real time.
  const aheadMs = opts.clock ? opts.clock.now().getTime() - Date.now() : 0;
  const [first] = bots;
  if (!first) return;
  for (let quiet = 0, look = 0; quiet < 2; look++) {
    const busy =
      crew?.delivering || (opts.crewRuns !== false && crew?.busy)
        ? "the crew service's runs or webhooks"
        : bots.some((bot) => bot.busy())
          ? "a bot's Slack events, steps or polling"
          : "";
    for (const bot of bots) {
      await bot.lifecycle.callbacks.drain();
      await bot.outboxWorker.idle();
    }
    // One database for all of them: every effect not done or given up yet, due now or later.
    // Through the bot's own query builder: a look every few ms through Prisma's client cost more CPU.
    const pending = await first.database.sql.selectFrom("SlackEffect").select(["kind", "runAt"]).where("state", "=", "due").orderBy("runAt", "asc").limit(1).executeTakeFirst();
    if (pending && pending.runAt.getTime() - aheadMs > deadline)
      throw new Error(`settled: a ${pending.kind} effect is due only at ${pending.runAt.toISOString()}, after the ${timeoutMs} ms time-out`);
    quiet = busy || pending ? 0 : quiet + 1;
    if (Date.now() > deadline) throw new Error(`settled: still busy after ${timeoutMs} ms: ${busy || `a ${pending?.kind} effect, due`}`);
    // The second quiet look follows soon; a long wait is looked at less often (pollPause).
    await new Promise((r) => setTimeout(r, quiet ? 20 : pollPause(look)));
  }
}

export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const slack = await startFakeSlack({ ...(opts.oauth ? { oauthClient: OAUTH_CLIENT } : {}), ...opts.slack });
  const crew = await startCrewService({ token: CREW_TOKEN, ...opts.crew });
  const db = await createTestDatabase();
  // freePort() gives a port back before the bot listens on it: another fork can take it meanwhile
  // (EADDRINUSE). Then the bot is stopped and started again on another port.
  const startOn = async (port: number) => {
    const botUrl = `http://127.0.0.1:${port}`;
    const config: AppConfig = {
      slack: opts.oauth ? { signingSecret: SIGNING_SECRET, apiUrl: slack.url, oauth: OAUTH_CLIENT } : { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET, apiUrl: slack.url },
      ...(opts.oauth ? { encryption: { key: opts.oauth.encryptionKey ?? randomBytes(32), previous: [] } } : {}),
      port,
      publicUrl: opts.webhooks === false ? undefined : `${botUrl}${opts.publicPath ?? ""}`,
      dataDir: "unused",
      crews: [
        { name: "research", baseUrl: crew.url, token: CREW_TOKEN, ...opts.research },
        ...(opts.crews ?? []).map((c, i) => ({ name: `crew${i + 2}`, baseUrl: crew.url, token: CREW_TOKEN, ...c })),
      ],
      ...opts.config,
    };
    const bot = createCrewline(config, {
      log: silentLogger,
      database: db.database,
      progressIntervalMs: 200,
      slackRetries: { retries: 2, factor: 1, minTimeout: 10, maxTimeout: 50 },
      ...opts.crewline,
    });
    try {
      await bot.start();
    } catch (err) {
      await bot.stop().catch(() => {});
      throw err;
    }
    return { bot, botUrl, config };
  };
  let started: Awaited<ReturnType<typeof startOn>> | undefined;
  for (let tries = 1; !started; tries++) {
    try {
      started = await startOn(await freePort());
    } catch (err) {
      if ((err as { code?: string }).code !== "EADDRINUSE" || tries >= 3) throw err;
    }
  }
  const { bot, botUrl, config } = started;
  const requests = slackRequester({ baseUrl: botUrl, signingSecret: SIGNING_SECRET, responseUrlBase: slack.responseUrlBase });
  return {
    bot,
    botUrl,
    slack,
    crew,
    db,
    requests,
    config,
    settled: (o) => settled([bot, ...(o?.also ?? [])], crew, { ...(opts.crewline?.clock ? { clock: opts.crewline.clock } : {}), ...o }),
    async close() {
      await bot.stop();
      await crew.close();
      await slack.close();
      await db.drop().catch(() => {});
    },
  };
}

/** Polls until the predicate holds (for effects that happen after an HTTP answer). */
export async function eventually<T>(probe: () => T | Promise<T>, opts: { timeoutMs?: number; what?: string } = {}): Promise<NonNullable<T>> {
  const deadline = Date.now() + (opts.timeoutMs ?? 8000);
  let last: unknown;
  for (let look = 0; ; look++) {
    try {
      const value = await probe();
      if (value) return value as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${opts.what ?? "condition"}${last ? `: ${(last as Error).message}` : ""}`);
    await new Promise((r) => setTimeout(r, pollPause(look)));
  }
}

/**
 * How long a poll waits before its next look: 10 ms at first, doubling to 100 ms. Most waits end
 * within a few looks; a long one (a deadline, a paced Slack call) then costs a look every 100 ms
 * instead of every 20: each look is a database query, and the end-to-end pass keeps two cores ~90% busy.
 */
function pollPause(look: number): number {
  return Math.min(100, 10 * 2 ** look);
}

/** Opens the kickoff modal with `/crew` and submits it with the given inputs; returns the view submission answer. */
export async function kickoffViaSlack(
  h: Harness,
  inputs: Record<string, string>,
  user = USER,
  channel = CHANNEL,
  opts: { team?: string; enterprise?: string; crew?: string } = {},
) {
  const { team } = opts;
  const where = { ...(team ? { team_id: team } : {}), ...(opts.enterprise ? { enterprise_id: opts.enterprise } : {}) };
  const before = h.slack.callsTo("views.update").length;
  const command = await h.requests.command({ text: opts.crew ?? "", user_id: user, channel_id: channel, ...where });
  if (command.status !== 200) throw new Error(`/crew answered ${command.status}`);
  const form = await kickoffFormShownAfter(h, before);
  return submitKickoffForm(h, form, inputs, user, where);
}

/** The first form with a submit button the bot showed after `before` views.update calls (the kickoff form, /crew or the shortcut). */
export function kickoffFormShownAfter(h: Harness, before: number) {
  return eventually(
    () =>
      h.slack
        .callsTo("views.update")
        .slice(before)
        .map((c) => c.args.view as any)
        .find((v) => v?.submit),
    { what: "the kickoff form" },
  );
}

/** Submits a kickoff form (a view the bot showed) with the given inputs, as its user would. */
export function submitKickoffForm(h: Harness, form: any, inputs: Record<string, string>, user = USER, where: { team_id?: string; enterprise_id?: string } = {}) {
  const opened = h.slack.callsTo("views.open").at(-1)!;
  const values: Record<string, Record<string, { type: string; value: string }>> = {};
  for (const block of form.blocks.filter((b: any) => b.type === "input")) {
    const name = inputNameFromBlockId(block.block_id, Object.keys(inputs));
    values[block.block_id] = { value: { type: "plain_text_input", value: name ? inputs[name]! : "" } };
  }
  const viewId = (h.slack.views.size ? [...h.slack.views.values()].at(-1)!.id : undefined) ?? (opened.args as any).view?.id;
  return h.requests.viewSubmission({
    user_id: user,
    ...where,
    view: { id: viewId, callback_id: form.callback_id, private_metadata: form.private_metadata, state: { values } },
  });
}

/**
 * More replicas of the harness's bot, in this process, on its database (the PostgreSQL pass shares it
 * with them): their base URLs, the harness's own first. `started` collects them for the test to stop.
 */
export async function moreReplicas(h: Harness, count: number, options: CrewlineOptions, started: Crewline[]): Promise<string[]> {
  const urls = [h.botUrl];
  for (let i = 0; i < count; i++) {
    const port = await freePort();
    const bot = createCrewline({ ...h.config, port }, { log: silentLogger, database: h.db.database, slackRetries: { retries: 0 }, ...options });
    started.push(bot);
    await bot.start();
    urls.push(`http://127.0.0.1:${port}`);
  }
  return urls;
}
