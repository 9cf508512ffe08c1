// How a kickoff that goes wrong is told: in the crew's own words, on the form the person filled in,
// to them privately when the modal is gone, and never in a view Slack would refuse.
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../../src/log/log.js";
import { CHANNEL, CREW_TOKEN, eventually, type Harness, kickoffFormShownAfter, kickoffViaSlack, startHarness, submitKickoffForm, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";

let h: Harness;
afterEach(async () => {
  await h?.close();
});

/** A crew's 500 as a Python service sends it: a traceback ending in its reason, which echoes our token. */
const TRACEBACK = `Traceback (most recent call last):\n  File "/app/crew.py", line 12, in kickoff\n    inputs["audience"]\nKeyError: 'audience' (request sent with ${CREW_TOKEN})`;
const SERVER_ERROR = { error: "Internal Server Error", message: TRACEBACK };

/** The views.update calls' views, as JSON, from the `from`th on. */
const viewsShown = (from = 0) =>
  h.slack
    .callsTo("views.update")
    .slice(from)
    .map((c) => JSON.stringify(c.args.view));

describe("a crew's error on kickoff and on /inputs", () => {
  it("a 500 on kickoff is told in the crew's words (its reason, no stack, no token) and logged once as a warning", async () => {
    const lines: string[] = [];
    h = await startHarness({
      crew: { inputs: ["topic"], failWith: [{ endpoint: "kickoff", status: 500, body: SERVER_ERROR }] },
      crewline: { log: createLogger("info", (l) => lines.push(l)) },
    });
    await kickoffViaSlack(h, { topic: "Tides" });
    const told = await eventually(() => h.slack.callsTo("chat.postEphemeral")[0]?.args.text as string | undefined, { what: "the private answer" });
    expect(told).toContain("server error (500)");
    expect(told).toContain("KeyError: 'audience'");
    expect(told).not.toContain(CREW_TOKEN);
    expect(told).not.toContain("crew.py");
    await eventually(() => viewsShown().some((v) => v.includes("KeyError: 'audience'")), { what: "the modal's answer" });

    const logged = lines.filter((l) => l.includes("KeyError"));
    expect(logged).toHaveLength(1);
    expect(JSON.parse(logged[0]!)).toMatchObject({ level: "warn", msg: "crew kickoff failed", crew: "research" });
    expect(logged[0]).not.toContain(CREW_TOKEN);
    expect(logged[0]).not.toContain("crew.py");
  });

  it("a 500 on /inputs is told in the crew's words on the form and logged as a warning", async () => {
    const lines: string[] = [];
    h = await startHarness({ crew: { failWith: [{ endpoint: "inputs", status: 500, body: SERVER_ERROR }] }, crewline: { log: createLogger("info", (l) => lines.push(l)) } });
    await h.requests.command({ text: "", user_id: USER, channel_id: CHANNEL });
    const shown = await eventually(() => viewsShown().find((v) => v.includes("server error")), { what: "the error view" });
    expect(shown).toContain("KeyError: 'audience'");
    expect(shown).not.toContain(CREW_TOKEN);
    const logged = lines.filter((l) => l.includes("KeyError"));
    expect(logged).toHaveLength(1);
    expect(JSON.parse(logged[0]!)).toMatchObject({ level: "warn", msg: "crew inputs could not be listed", crew: "research" });
    expect(logged[0]).not.toContain(CREW_TOKEN);
    expect(await prismaOf(h.bot.database).execution.count()).toBe(0);
  });
});

/** The form the bot showed again (a views.update with a submit button after the first form), parsed. */
const formShownAgain = () =>
  eventually(
    () =>
      h.slack
        .callsTo("views.update")
        .map((c) => c.args.view as any)
        .filter((v) => v?.submit)[1],
    { what: "the form shown again" },
  );
const valuesOf = (form: any) => Object.fromEntries(form.blocks.filter((b: any) => b.type === "input").map((b: any) => [b.label.text, b.element.initial_value]));

describe("a crew that refuses the inputs: the form comes back with the person's values and the crew's words", () => {
  it("a 422 refusing a value names that input with the crew's message (not as missing), and a truly missing one as needed", async () => {
    const detail = [
      { loc: ["body", "inputs", "year"], msg: "value is not a valid integer", type: "type_error.integer" },
      { loc: ["body", "inputs", "audience"], msg: "field required", type: "value_error.missing" },
    ];
    h = await startHarness({ crew: { inputs: ["topic", "year"], failWith: [{ endpoint: "kickoff", status: 422, body: { detail }, times: 1 }] } });
    await kickoffViaSlack(h, { topic: "Tides", year: "twenty" });
    const form = await formShownAgain();
    const said = form.blocks[0].text.text as string;
    expect(said).toContain("*Year*: value is not a valid integer");
    expect(said).toContain("The crew needs *Audience* before it can start.");
    expect(said).not.toMatch(/needs[^\n]*Year/);
    expect(valuesOf(form)).toEqual({ Topic: "Tides", Year: "twenty", Audience: undefined });
    expect(form.blocks.length).toBeLessThanOrEqual(100);
  });

  it("a 422 whose message on a filled input says 'required' refuses that input in its words, and an item about a field Crewline sends is told, not made a field", async () => {
    const detail = [
      { loc: ["body", "inputs", "topic"], msg: "Value error, a topic is required to be in English", type: "value_error" },
      { loc: ["body", "meta"], msg: "Extra inputs are not permitted", type: "extra_forbidden" },
    ];
    h = await startHarness({ crew: { inputs: ["topic"], failWith: [{ endpoint: "kickoff", status: 422, body: { detail }, times: 1 }] } });
    await kickoffViaSlack(h, { topic: "Marées" });
    const form = await formShownAgain();
    const said = form.blocks[0].text.text as string;
    expect(said).toContain("*Topic*: Value error, a topic is required to be in English");
    expect(said).not.toContain("needs *Topic*");
    expect(said).toContain("meta: Extra inputs are not permitted");
    // Labels, not values: toEqual would overlook a field left empty.
    expect(Object.keys(valuesOf(form))).toEqual(["Topic"]);
    expect(valuesOf(form).Topic).toBe("Marées");
    // The form, sent again, starts the run: no field it could not fill in holds it back.
    await submitKickoffForm(h, form, { topic: "Tides" });
    await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { kickoffId: { not: null } } }), { what: "the run started" });
  });

  it.each([
    ["a 400", 400, { error: "Bad Request", message: "invalid input format" }, "invalid input format"],
    ["a 422 naming no input", 422, { error: "Validation error", message: "the inputs do not match the crew's template" }, "the inputs do not match the crew's template"],
  ])("%s: the form comes back with every typed value and the crew's message", async (_label, status, body, words) => {
    h = await startHarness({ crew: { inputs: ["topic", "year"], failWith: [{ endpoint: "kickoff", status, body, times: 1 }] } });
    await kickoffViaSlack(h, { topic: "A long carefully written brief", year: "twenty" });
    const form = await formShownAgain();
    expect(form.blocks[0].text.text).toContain(words);
    expect(valuesOf(form)).toEqual({ Topic: "A long carefully written brief", Year: "twenty" });
    await eventually(async () => (await prismaOf(h.bot.database).execution.findFirst())?.state === "kickoff_failed", { what: "the run not started" });
    // The form, sent again, starts the run.
    await submitKickoffForm(h, form, { topic: "A long carefully written brief", year: "2024" });
    await eventually(() => prismaOf(h.bot.database).execution.findFirst({ where: { kickoffId: { not: null } } }), { what: "the run started" });
  });
});

describe("/crew in a public channel the bot is not in", () => {
  it("joins it only when a crew may be started there", async () => {
    h = await startHarness({ research: { channels: ["C0OTHER"] } });
    h.slack.denyChannel("C0RANDOM", "not_in_channel");
    h.slack.denyChannel("C0OTHER", "not_in_channel");
    const answer = async (text: string, channel: string) => {
      const before = h.slack.callsTo("views.update").length;
      await h.requests.command({ text, user_id: USER, channel_id: channel });
      return eventually(() => viewsShown(before)[0], { what: `the answer to /crew ${text} in ${channel}` });
    };
    expect(await answer("", "C0RANDOM")).toContain("No crew may be started in this channel");
    expect(await answer("research", "C0RANDOM")).toContain("may not be started in this channel");
    expect(await answer("nosuch", "C0OTHER")).toContain("There is no crew called");
    expect(h.slack.callsTo("conversations.join")).toHaveLength(0);

    // A crew that may be started there: the channel is joined, and its form shown.
    expect(await answer("", "C0OTHER")).toContain('"submit"');
    expect(h.slack.callsTo("conversations.join").map((c) => c.args.channel)).toEqual(["C0OTHER"]);
  });
});

describe("a kickoff whose answer was lost", () => {
  it("without webhooks (no PUBLIC_URL), the person is told Crewline cannot follow the run and to check the crew's platform, not to watch the thread", async () => {
    h = await startHarness({ webhooks: false, crew: { failWith: [{ endpoint: "kickoff", status: 504, times: 1, afterHandling: true }] } });
    await kickoffViaSlack(h, { topic: "tides" });
    const told = await eventually(() => viewsShown().find((v) => /may have (started|gone through)/.test(v)), { what: "the modal's answer" });
    expect(told).toContain("Crewline cannot follow it");
    expect(told).toContain("Check the crew's platform");
    expect(told).not.toContain("progress shows in the run's thread");
    expect(told).not.toContain("check the thread");
  });
});

describe("a kickoff whose modal was closed", () => {
  it.each([
    [
      "refused inputs",
      () => h.crew.setOptions({ failWith: [{ endpoint: "kickoff", status: 422, body: { detail: [{ loc: ["body", "inputs", "year"], msg: "value is not a valid integer" }] } }] }),
      /valid integer/,
    ],
    ["an announcement Slack did not take", () => h.slack.failNext("chat.postMessage", "is_archived"), /couldn't post in this channel \(is_archived\), so the run was not started/],
    ["a run started", () => undefined, /is running \(kickoff/],
  ])("%s: the outcome is told privately, since the modal cannot show it", async (_label, arrange, words) => {
    h = await startHarness({ crew: { inputs: ["topic", "year"] } });
    arrange();
    const before = h.slack.callsTo("views.update").length;
    await h.requests.command({ text: "", user_id: USER, channel_id: CHANNEL });
    const form = await kickoffFormShownAfter(h, before);
    // Closed by the person (here before its submission's answer, so that no update can reach it first).
    const viewId = [...h.slack.views.values()].at(-1)!.id;
    h.slack.closeView(viewId);
    const values = Object.fromEntries(form.blocks.filter((b: any) => b.type === "input").map((b: any) => [b.block_id, { value: { type: "plain_text_input", value: "twenty" } }]));
    await h.requests.viewSubmission({ user_id: USER, view: { id: viewId, callback_id: form.callback_id, private_metadata: form.private_metadata, state: { values } } });
    const told = await eventually(() => h.slack.callsTo("chat.postEphemeral")[0], { what: "the private answer" });
    expect(told.args).toMatchObject({ channel: CHANNEL, user: USER, text: expect.stringMatching(words) });
    expect(h.slack.callsTo("views.update").at(-1)!.error).toBe("not_found");
  });
});

describe("views within Slack's limits, and none left loading", () => {
  const many = Array.from({ length: 99 }, (_, i) => `f${i}`);
  it.each([
    ["a crew of 99 inputs, one of them refused", many, ["f5"]],
    ["a crew of one input, 99 more asked for", ["topic"], many],
  ])("%s: the corrected form stays within 100 blocks, every field it needs shown", async (_label, inputs, missing) => {
    h = await startHarness({ crew: { inputs, failWith: [{ endpoint: "kickoff", status: 422, body: { details: { missing_inputs: missing } }, times: 1 }] } });
    await kickoffViaSlack(h, Object.fromEntries(inputs.map((name) => [name, "x"])));
    const shown = await eventually(() => h.slack.callsTo("views.update").find((c) => JSON.stringify(c.args.view).includes("before it can start")), { what: "the corrected form" });
    expect(shown.error).toBeUndefined();
    const view = shown.args.view as any;
    expect(view.blocks.length).toBeLessThanOrEqual(100);
    expect(view.blocks.filter((b: any) => b.type === "input")).toHaveLength(99);
    expect(JSON.stringify(view)).not.toContain("fit in this form; the crew gets them empty");
  });

  it("the crew picker's Next for a crew no longer there answers with an error view, not a form left loading", async () => {
    h = await startHarness({ crews: [{ name: "writer" }] });
    await h.requests.command({ text: "", user_id: USER, channel_id: CHANNEL });
    const picker = await eventually(
      () =>
        h.slack
          .callsTo("views.update")
          .map((c) => c.args.view as any)
          .find((v) => v?.callback_id === "crew_pick"),
      { what: "the picker" },
    );
    const viewId = [...h.slack.views.values()].at(-1)!.id;
    const block = picker.blocks.find((b: any) => b.type === "input");
    const before = h.slack.callsTo("views.update").length;
    const selected = { [block.block_id]: { crew_select: { type: "static_select", selected_option: { value: "a-crew-since-removed" } } } };
    await h.requests.viewSubmission({ user_id: USER, view: { id: viewId, callback_id: "crew_pick", private_metadata: picker.private_metadata, state: { values: selected } } });
    const answer = await eventually(() => viewsShown(before)[0], { what: "the answer" });
    expect(answer).toContain("can no longer be started in this channel");
    expect(answer).not.toContain("Loading");
  });
});
