import { afterEach, describe, expect, it, vi } from "vitest";
import { NOT_STARTED_NO_DATABASE } from "../../src/adapters/slack/kickoff/submit.js";
import { CHANNEL, CREW_TOKEN, eventually, type Harness, kickoffViaSlack, startHarness, submitKickoffForm, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";
import { clickReview, pendingReview, resumeCalls } from "../support/reviews.js";

let h: Harness;
afterEach(async () => {
  vi.restoreAllMocks();
  await h?.close();
});

/** The first form the bot showed (views.update) that says `text`, as JSON. */
const formSaying = (text: string, what: string) =>
  eventually(
    () =>
      h.slack
        .callsTo("views.update")
        .map((c) => JSON.stringify(c.args.view))
        .find((v) => v.includes(text)),
    { what },
  );

describe("kickoff from Slack", () => {
  it("opens a loading modal at once, then fills it with the crew's declared inputs", async () => {
    h = await startHarness({ crew: { inputs: ["topic", "current_year"], inputsDelayMs: 300 } });
    const res = await h.requests.command({ text: "", user_id: USER, channel_id: CHANNEL });
    expect(res.status).toBe(200);
    const [open] = await h.slack.waitForCalls("views.open", 1);
    expect(JSON.stringify(open!.args.view)).toContain("Loading");
    const [update] = await h.slack.waitForCalls("views.update", 1);
    const view = update!.args.view as any;
    const labels = view.blocks.filter((b: any) => b.type === "input").map((b: any) => b.label.text);
    expect(labels).toEqual(["Topic", "Current year"]);
    expect(update!.args.view_id).toBe((h.slack.views.values().next().value as any).id);
  });

  it("says so when Slack will not open the form (its trigger expired, an outage) instead of leaving the person waiting for it", async () => {
    h = await startHarness();
    for (const error of ["expired_trigger_id", "internal_error"]) {
      h.slack.failNext("views.open", error);
      const answers = h.slack.callsTo("response_url").length;
      expect((await h.requests.command({ text: "", user_id: USER, channel_id: CHANNEL })).status).toBe(200);
      const said = await eventually(() => h.slack.callsTo("response_url")[answers], { what: "the answer" });
      expect(said.args).toMatchObject({ response_type: "ephemeral", text: expect.stringMatching(/couldn't open the form/) });
    }
    expect(h.slack.callsTo("views.update")).toHaveLength(0);
  });

  it("through a Slack outage, /crew and a kickoff say so within seconds: a request's Web API calls are retried briefly, not for the SDK's half hour", async () => {
    // The bot's own retry policy, not the harness's shortened one.
    h = await startHarness({ crewline: { slackRetries: undefined } });
    // A form opened before the outage.
    expect((await h.requests.command({ text: "", user_id: USER, channel_id: CHANNEL })).status).toBe(200);
    const form = await eventually(
      () =>
        h.slack
          .callsTo("views.update")
          .map((c) => c.args.view as { submit?: unknown })
          .find((v) => v?.submit),
      { what: "the form" },
    );

    h.slack.outage(120_000);
    const started = Date.now();
    expect((await h.requests.command({ text: "", user_id: USER, channel_id: CHANNEL })).status).toBe(200);
    const said = await eventually(() => h.slack.callsTo("response_url")[0], { what: "the answer", timeoutMs: 15_000 });
    expect(said.args.text).toMatch(/couldn't open the form/);
    // Tried again, a few times, within seconds.
    expect(h.slack.callsTo("views.open").length - 1).toBeGreaterThan(1);
    expect(h.slack.callsTo("views.open").length - 1).toBeLessThanOrEqual(4);
    expect(Date.now() - started).toBeLessThan(10_000);

    // The earlier form, submitted during the outage: the run is not started (nothing reaches the crew), within seconds.
    await submitKickoffForm(h, form, { topic: "Storm surges" });
    await eventually(async () => (await prismaOf(h.bot.database).execution.findFirst())?.state === "kickoff_failed", { what: "the run not started", timeoutMs: 15_000 });
    expect(h.crew.requests.filter((r) => r.path === "/kickoff")).toHaveLength(0);
  });

  it("announces a run once when Slack took the announcement but its answer never came: the retry finds it instead of posting again", async () => {
    // Request calls give up after 1 s here; the post is performed at once and answered after 2 s.
    h = await startHarness({ crewline: { slackRetries: undefined, slackTimeoutMs: 1000 } });
    h.slack.answerLateNext("chat.postMessage", 2000);
    await kickoffViaSlack(h, { topic: "Rip currents" });
    const execution = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { kickoffId: { not: null } } }), { what: "the kickoff" });
    const announcements = h.slack.messages(CHANNEL).filter((m) => !m.thread_ts);
    expect(announcements).toHaveLength(1);
    expect(execution.threadTs).toBe(announcements[0]!.ts);
    // One post reached Slack (recorded once its late answer went out); the try after the time-out
    // looked for it by its metadata and took it.
    await eventually(() => h.slack.callsTo("chat.postMessage").length > 0, { what: "the late post recorded" });
    await h.settled();
    expect(h.slack.callsTo("chat.postMessage").filter((c) => c.args.channel === CHANNEL && !c.args.thread_ts)).toHaveLength(1);
    expect(h.slack.callsTo("conversations.history").length).toBeGreaterThanOrEqual(1);
    expect(h.crew.requests.filter((r) => r.path === "/kickoff")).toHaveLength(1);
  });

  it("a run whose announcement Slack did not take is not started, and the form says what would mend it: an invitation, or trying again", async () => {
    h = await startHarness();
    for (const [error, advice] of [
      ["not_in_channel", /Invite me with/],
      ["internal_error", /Slack did not take the run's announcement \(internal_error\).*try again in a moment/],
    ] as const) {
      // internal_error may have posted (Slack's docs): the form looks and tries again, so it must last every try.
      h.slack.failNext("chat.postMessage", error, error === "internal_error" ? 3 : 1);
      const updates = h.slack.callsTo("views.update").length;
      await kickoffViaSlack(h, { topic: "Tidal power" });
      const shown = await eventually(
        () =>
          h.slack
            .callsTo("views.update")
            .slice(updates)
            .find((c) => /was not started/.test(JSON.stringify(c.args.view))),
        { what: "the form's answer" },
      );
      expect(JSON.stringify(shown.args.view)).toMatch(advice);
    }
    expect(h.crew.requests.filter((r) => r.path === "/kickoff")).toHaveLength(0);
  });

  it("kicks off with inputs, meta and webhook URLs, announces the run and stores it", async () => {
    h = await startHarness({ crew: { inputs: ["topic"] } });
    const answer = await kickoffViaSlack(h, { topic: "Solar sails" });
    expect(answer.status).toBe(200);

    const kickoff = await eventually(() => h.crew.requests.find((r) => r.path === "/kickoff"), { what: "POST /kickoff" });
    const body = kickoff.body as any;
    expect(kickoff.headers.authorization).toBe(`Bearer ${CREW_TOKEN}`);
    expect(body.inputs).toEqual({ topic: "Solar sails" });
    expect(body.meta.source).toBe("slack");
    expect(body.meta.requestId).toMatch(/[0-9a-f-]{36}/);
    for (const key of ["taskWebhookUrl", "stepWebhookUrl", "crewWebhookUrl"]) {
      expect(body[key]).toMatch(new RegExp(`^${h.botUrl}/hooks/[0-9a-f-]{36}/(task|step|crew)/[A-Za-z0-9_-]{40,}$`));
    }
    // Each execution gets its own unguessable URLs.
    expect(new Set([body.taskWebhookUrl, body.stepWebhookUrl, body.crewWebhookUrl]).size).toBe(3);

    const execution = await eventually(async () => {
      const e = await prismaOf(h.bot.database).execution.findFirst();
      return e?.kickoffId ? e : undefined;
    });
    expect(execution).toMatchObject({ crewName: "research", channelId: CHANNEL, userId: USER, inputs: { topic: "Solar sails" } });
    expect(["running", "waiting"]).toContain(execution.state);
    expect(execution.threadTs).toBeTruthy();

    const text = await eventually(
      () => {
        const blocks = JSON.stringify(h.slack.messages(CHANNEL).find((m) => m.ts === execution.threadTs)?.blocks);
        return blocks?.includes(execution.kickoffId!) ? blocks : undefined;
      },
      { what: "the announcement with the kickoff id" },
    );
    expect(text).toContain(`<@${USER}>`);
    expect(text).toContain("research");
    expect(text).toContain("Solar sails");
  });

  it("shows missing inputs as field errors without calling the crew", async () => {
    h = await startHarness({ crew: { inputs: ["topic"] } });
    const answer = await kickoffViaSlack(h, { topic: "" });
    expect(answer.json?.response_action).toBe("errors");
    expect(Object.values(answer.json.errors)[0]).toMatch(/required/i);
    expect(h.crew.requests.filter((r) => r.path === "/kickoff")).toHaveLength(0);
    expect(await prismaOf(h.bot.database).execution.count()).toBe(0);
  });

  it("turns the crew's 422 into field errors on the form and leaves nothing running", async () => {
    h = await startHarness({
      crew: { inputs: ["topic"], failWith: [{ endpoint: "kickoff", status: 422, body: { error: "Validation error", details: { missing_inputs: ["topic"] } } }] },
    });
    await kickoffViaSlack(h, { topic: "x" });
    const form = await eventually(() =>
      h.slack
        .callsTo("views.update")
        .map((c) => c.args.view as any)
        .find((v) => JSON.stringify(v).includes("needs")),
    );
    expect(JSON.stringify(form)).toContain("Topic");
    const execution = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { state: "kickoff_failed" } }));
    expect(execution.kickoffId).toBeNull();
    // The announcement posted before the kickoff is removed again.
    await eventually(() => h.slack.callsTo("chat.delete").length === 1);
    expect(h.slack.messages(CHANNEL)).toHaveLength(0);
  });

  it("a 422 naming an input the crew's list did not declare: the corrected form gets a field for it, and its submission starts the run", async () => {
    h = await startHarness({ crew: { inputs: ["topic"], failWith: [{ endpoint: "kickoff", status: 422, body: { details: { missing_inputs: ["audience"] } }, times: 1 }] } });
    await kickoffViaSlack(h, { topic: "Tides" });
    const form = await eventually(
      () =>
        h.slack
          .callsTo("views.update")
          .map((c) => c.args.view as any)
          .find((v) => JSON.stringify(v).includes("needs")),
      { what: "the corrected form" },
    );
    const fields = form.blocks.filter((b: any) => b.type === "input");
    expect(fields.map((b: any) => b.label.text)).toEqual(["Topic", "Audience"]);
    expect(fields.map((b: any) => b.optional ?? false)).toEqual([false, false]);
    // The topic given is kept.
    expect(fields[0].element.initial_value).toBe("Tides");

    await submitKickoffForm(h, form, { topic: "Tides", audience: "Sailors" });
    const run = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { kickoffId: { not: null } } }), { what: "the run started" });
    expect(run.inputs).toEqual({ topic: "Tides", audience: "Sailors" });
    const kickoffs = h.crew.requests.filter((r) => r.path === "/kickoff");
    expect(kickoffs).toHaveLength(2);
    expect((kickoffs[1]!.body as any).inputs).toEqual({ topic: "Tides", audience: "Sailors" });
  });

  it("a crew of 80 inputs gets its form and starts with every one of them", async () => {
    const names = Array.from({ length: 80 }, (_, i) => `input_name_${i}`);
    h = await startHarness({ crew: { inputs: names } });
    const values = Object.fromEntries(names.map((name, i) => [name, `value ${i}`]));
    await kickoffViaSlack(h, values);
    const run = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { kickoffId: { not: null } } }), { what: "the run started" });
    expect(run.inputs).toEqual(values);
    const [kickoff] = h.crew.requests.filter((r) => r.path === "/kickoff");
    expect((kickoff!.body as any).inputs).toEqual(values);
  });

  it("a 422 naming more inputs than a form can carry: the corrected form gets the fields that fit, and says the rest do not", async () => {
    const names = Array.from({ length: 60 }, (_, i) => `audience_${i}_${"x".repeat(150)}`);
    h = await startHarness({ crew: { inputs: ["topic"], failWith: [{ endpoint: "kickoff", status: 422, body: { details: { missing_inputs: names } }, times: 1 }] } });
    await kickoffViaSlack(h, { topic: "Tides" });
    const form = await formSaying("needs", "the corrected form");
    const view = JSON.parse(form);
    const fields = view.blocks.filter((b: any) => b.type === "input");
    expect(fields.length).toBeGreaterThan(1);
    expect(fields.length).toBeLessThan(names.length + 1);
    expect(view.private_metadata.length).toBeLessThanOrEqual(3000);
    expect(form).toContain("and 50 more");
    expect(form).toContain("Not all of them fit in this form");
  });

  it.each([
    [401, /rejected Crewline's token|token/i],
    [503, /server error|try again/i],
  ])("explains a crew %i plainly and starts nothing", async (status, pattern) => {
    h = await startHarness({ crew: { inputs: ["topic"], failWith: [{ endpoint: "kickoff", status, body: { error: "nope" } }] } });
    await kickoffViaSlack(h, { topic: "x" });
    const ephemeral = await eventually(() => h.slack.callsTo("chat.postEphemeral")[0]);
    expect(ephemeral.args.text).toMatch(pattern);
    expect(ephemeral.args.text).not.toContain(CREW_TOKEN);
    expect(ephemeral.args.text).not.toMatch(/\n\s+at /);
    const execution = await prismaOf(h.bot.database).execution.findFirstOrThrow();
    expect(execution.state).toBe("kickoff_failed");
  });

  it("a kickoff the crew took but whose answer was lost (504): the run stays, its first callback adopts it, and it is reviewed and resumed like any run", async () => {
    h = await startHarness({ crew: { failWith: [{ endpoint: "kickoff", status: 504, times: 1, afterHandling: true }] } });
    await kickoffViaSlack(h, { topic: "tides" });
    const told = await formSaying("⏳", "the unconfirmed form");
    expect(told).toMatch(/may have gone through.*If \*research\* started, its progress shows in the run's thread/);
    const review = await pendingReview(h);
    const run = await prismaOf(h.bot.database).execution.findFirstOrThrow();
    expect(run.kickoffId).not.toBeNull();
    expect(run.state).toBe("waiting");
    expect(h.slack.callsTo("chat.delete")).toHaveLength(0);
    await clickReview(h, review, true);
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    expect(resumeCalls(h)[0]!.body).toMatchObject({ execution_id: run.kickoffId, is_approve: true });
    await eventually(async () => (await prismaOf(h.bot.database).review.findUniqueOrThrow({ where: { id: review.reviewId } })).state === "approved");
    // One kickoff reached the crew: nothing was started twice.
    expect(h.crew.requests.filter((r) => r.path === "/kickoff")).toHaveLength(1);
  });

  it("a kickoff the crew took (200) with an id Crewline cannot read: the run stays, the person is told it may have started, and its first callback adopts it", async () => {
    h = await startHarness({ crew: { failWith: [{ endpoint: "kickoff", status: 200, body: { status: "accepted" }, afterHandling: true, times: 1 }] } });
    await kickoffViaSlack(h, { topic: "tides" });
    const told = await formSaying("⏳", "the unconfirmed form");
    expect(told).toMatch(/answered \(200\) while starting a run.*may have gone through.*If \*research\* started, its progress shows in the run's thread/);
    // The crew's callbacks are taken: its review shows in the thread, the run has its kickoff id.
    const review = await pendingReview(h);
    const run = await prismaOf(h.bot.database).execution.findFirstOrThrow();
    expect(run.kickoffId).not.toBeNull();
    expect(run.state).toBe("waiting");
    expect(h.slack.callsTo("chat.delete")).toHaveLength(0);
    expect(h.slack.callsTo("chat.postEphemeral")).toHaveLength(0);
    await clickReview(h, review, true);
    await eventually(() => resumeCalls(h).length === 1, { what: "the resume" });
    expect(resumeCalls(h)[0]!.body).toMatchObject({ execution_id: run.kickoffId, is_approve: true });
    expect(h.crew.requests.filter((r) => r.path === "/kickoff")).toHaveLength(1);
  });

  it("a kickoff whose answer was lost and of which no news comes ends after a while, its announcement saying so", async () => {
    const clock = { offsetMs: 0, now: () => new Date(Date.now() + clock.offsetMs) };
    h = await startHarness({ crew: { failWith: [{ endpoint: "kickoff", status: 504, times: 1 }] }, crewline: { clock } });
    await kickoffViaSlack(h, { topic: "tides" });
    await formSaying("⏳", "the unconfirmed form");
    const run = await prismaOf(h.bot.database).execution.findFirstOrThrow();
    await h.bot.watcher.recover();
    expect((await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: run.id } })).state).toBe("starting");

    clock.offsetMs = 11 * 60_000;
    await h.bot.watcher.recover();
    const ended = await prismaOf(h.bot.database).execution.findUniqueOrThrow({ where: { id: run.id } });
    expect(ended).toMatchObject({ state: "kickoff_failed", kickoffId: null });
    await eventually(() => h.slack.messages(CHANNEL).some((m) => JSON.stringify(m.blocks ?? []).includes("no confirmation that the crew started this run")), {
      what: "the announcement updated",
    });
    expect(h.slack.callsTo("chat.delete")).toHaveLength(0);
  });

  it("a database that fails as the run is stored: the form says it was not started instead of spinning, and the crew hears nothing", async () => {
    h = await startHarness();
    vi.spyOn(h.bot.lifecycle.runs, "create").mockRejectedValueOnce(new Error("Can't reach database server at 127.0.0.1:5432"));
    await kickoffViaSlack(h, { topic: "tides" });
    const told = await formSaying("could not reach its database", "the form's answer");
    expect(told).toContain(NOT_STARTED_NO_DATABASE);
    expect(told).not.toContain("5432");
    expect(h.crew.requests.filter((r) => r.path === "/kickoff")).toHaveLength(0);
    expect(h.slack.messages(CHANNEL)).toHaveLength(0);
  });

  it("a stop while a kickoff is under way waits for it: the run is recorded as started, not left starting", async () => {
    h = await startHarness({ crew: { kickoffDelayMs: 1500 } });
    await kickoffViaSlack(h, { topic: "tides" });
    await eventually(() => h.crew.requests.some((r) => r.path === "/kickoff"), { what: "the kickoff call" });
    await h.bot.stop();
    expect(h.bot.busy()).toBe(false);
    const run = await prismaOf(h.bot.database).execution.findFirstOrThrow();
    expect(run.kickoffId).not.toBeNull();
    // Started (its crew may already wait on its first review), not left "starting".
    expect(["running", "waiting"]).toContain(run.state);
  });

  it("explains an unreachable crew when loading the form", async () => {
    h = await startHarness({ crew: { inputs: ["topic"] } });
    await h.crew.close();
    await h.requests.command({ text: "", user_id: USER, channel_id: CHANNEL });
    const [update] = await h.slack.waitForCalls("views.update", 1);
    expect(JSON.stringify(update!.args.view)).toMatch(/reach/i);
    expect((update!.args.view as any).submit).toBeUndefined();
  });

  it("detects a private channel the bot is not in before kickoff", async () => {
    h = await startHarness();
    h.slack.denyChannel("G0SECRET", "channel_not_found");
    await h.requests.command({ text: "", user_id: USER, channel_id: "G0SECRET" });
    const [update] = await h.slack.waitForCalls("views.update", 1);
    expect(JSON.stringify(update!.args.view)).toContain("/invite");
    expect(h.crew.requests.filter((r) => r.path === "/inputs")).toHaveLength(0);
    expect(await prismaOf(h.bot.database).execution.count()).toBe(0);
  });

  it("answers /crew help, status and list", async () => {
    h = await startHarness();
    const help = await h.requests.command({ text: "help", user_id: USER, channel_id: CHANNEL });
    expect(help.body).toContain("/crew status");
    await kickoffViaSlack(h, { topic: "Tides" });
    const execution = await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { kickoffId: { not: null } } }));
    await h.requests.command({ text: `status ${execution.kickoffId}`, user_id: USER, channel_id: CHANNEL });
    await h.requests.command({ text: "list", user_id: USER, channel_id: CHANNEL });
    const responses = await eventually(() => {
      const r = h.slack.callsTo("response_url");
      return r.length >= 2 ? r : undefined;
    });
    expect(responses[0]!.args.text).toContain(execution.kickoffId);
    expect(responses[1]!.args.text).toContain(execution.kickoffId);

    // A subcommand without what it takes gets its own usage line, not the whole help; nothing is exported.
    const usage = async (text: string) => String((await h.requests.command({ text, user_id: USER, channel_id: CHANNEL })).body);
    const xml = await usage(`audit ${execution.kickoffId} xml`);
    expect(xml).toContain("Usage: `/crew audit &lt;kickoff_id&gt; [csv|json]`");
    expect(xml).toContain("`xml` is not one of them.");
    expect(xml).not.toContain("•");
    expect(await usage("audit")).toContain("Usage: `/crew audit");
    expect(await usage(`audit ${execution.kickoffId} csv extra`)).toContain("Usage: `/crew audit");
    expect(await usage("status")).toContain("Usage: `/crew status &lt;kickoff_id&gt;`");
    expect(await usage("audit k1 <!channel>")).toContain("`&lt;!channel&gt;` is not one of them.");
    await h.settled();
    expect(h.slack.callsTo("files.completeUploadExternal")).toEqual([]);
    expect(h.slack.callsTo("response_url")).toHaveLength(2);
  });

  it("rejects requests with a bad Slack signature", async () => {
    h = await startHarness();
    const res = await h.requests.raw("command=%2Fcrew&text=&user_id=U1&channel_id=C1&trigger_id=t", {
      "content-type": "application/x-www-form-urlencoded",
      "x-slack-request-timestamp": String(Math.floor(Date.now() / 1000)),
      "x-slack-signature": "v0=deadbeef",
    });
    expect(res.status).toBe(401);
    expect(h.slack.calls.filter((c) => c.method !== "auth.test")).toHaveLength(0);
  });
});
