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
   * Resolves once nothing more happens without outside input: the crew service's runs and webhooks,
   * recorded callbacks, steps waiting to be coalesced, and Slack effects due now are all done. Effects
   * retried later (backoff) and timers (polling, reminders, deadlines) are not waited for.
   */
  settled(opts?: { timeoutMs?: number }): Promise<void>;
  close(): Promise<void>;
}

/** See Harness.settled: two quiet checks in a row, 20 ms apart. */
export async function settled(bot: Crewline, crew: SimCrewService, opts: { timeoutMs?: number } = {}): Promise<void> {
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  for (let quiet = 0; quiet < 2; ) {
    if (Date.now() > deadline) throw new Error("settled: the bot's queues did not drain");
    const busy = crew.busy || bot.lifecycle.progress.unsent > 0;
    await bot.lifecycle.callbacks.drain();
    await bot.outboxWorker.idle();
    const due = await bot.database.prisma.slackEffect.count({ where: { state: "due", runAt: { lte: new Date() } } });
    quiet = busy || due > 0 ? 0 : quiet + 1;
    await new Promise((r) => setTimeout(r, 20));
  }
}

export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const slack = await startFakeSlack({ ...(opts.oauth ? { oauthClient: OAUTH_CLIENT } : {}), ...opts.slack });
  const crew = await startCrewService({ token: CREW_TOKEN, ...opts.crew });
  const db = await createTestDatabase();
  const port = await freePort();
  const botUrl = `http://127.0.0.1:${port}`;
  const config: AppConfig = {
    slack: opts.oauth ? { signingSecret: SIGNING_SECRET, apiUrl: slack.url, oauth: OAUTH_CLIENT } : { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET, apiUrl: slack.url },
    ...(opts.oauth ? { encryption: { key: opts.oauth.encryptionKey ?? randomBytes(32), previous: [] } } : {}),
    port,
    publicUrl: opts.webhooks === false ? undefined : botUrl,
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
  await bot.start();
  const requests = slackRequester({ baseUrl: botUrl, signingSecret: SIGNING_SECRET, responseUrlBase: slack.responseUrlBase });
  return {
    bot,
    botUrl,
    slack,
    crew,
    db,
    requests,
    config,
    settled: (o) => settled(bot, crew, o),
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
  for (;;) {
    try {
      const value = await probe();
      if (value) return value as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${opts.what ?? "condition"}${last ? `: ${(last as Error).message}` : ""}`);
    await new Promise((r) => setTimeout(r, 20));
  }
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
  const form = await eventually(
    () =>
      h.slack
        .callsTo("views.update")
        .slice(before)
        .map((c) => c.args.view as any)
        .find((v) => v?.submit),
    { what: "the kickoff form" },
  );
  return submitKickoffForm(h, form, inputs, user, where);
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
