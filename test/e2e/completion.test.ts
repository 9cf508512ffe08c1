import { afterEach, describe, expect, it } from "vitest";
import { CREW_SELECT_ACTION, KICKOFF_VIEW_CALLBACK } from "../../src/adapters/slack/blocks/index.js";
import { CHANNEL, eventually, type Harness, kickoffViaSlack, startHarness, USER } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";

let h: Harness;
afterEach(async () => h?.close());

const channelNotices = (h: Harness) => h.slack.messages(CHANNEL).filter((m) => !m.thread_ts && m.ts !== undefined && /Crew .* (finished|failed)/.test(m.text ?? ""));

describe("completion", () => {
  it("announces a failed run in the channel with the reason, and marks the announcement failed", async () => {
    h = await startHarness({
      crew: {
        tasks: [{ id: "t1", name: "t", agent: "A", humanInput: false, delayMs: 10 }],
        failRun: { afterTask: 1, error: "Agent exceeded its token budget\n    at Runner.run (runner.py:42)" },
      },
    });
    await kickoffViaSlack(h, { topic: "x" });
    const notice = await eventually(() => channelNotices(h)[0], { what: "the failure notice" });
    const text = JSON.stringify(notice.blocks);
    expect(notice.text).toMatch(/failed/);
    expect(text).toContain("Agent exceeded its token budget");
    expect(text).not.toContain("runner.py:42");
    const execution = await prismaOf(h.bot.database).execution.findFirstOrThrow();
    expect(execution.state).toBe("failed");
    await eventually(() => JSON.stringify(h.slack.messages(CHANNEL).find((m) => m.ts === execution.threadTs)?.blocks).includes("Failed"));
  });

  it("shows a long final output as an excerpt in the channel and attaches the whole text", async () => {
    const long = Array.from({ length: 300 }, (_, i) => `Paragraph ${i}: ${"the tide rises and falls ".repeat(8)}`).join("\n\n");
    h = await startHarness({ crew: { tasks: [{ id: "t1", name: "t", agent: "A", humanInput: false, delayMs: 10, output: long }] } });
    await kickoffViaSlack(h, { topic: "x" });
    const notice = await eventually(() => channelNotices(h)[0]);
    expect(JSON.stringify(notice.blocks).length).toBeLessThan(13_000);
    const file = await eventually(() => h.slack.files.find((f) => f.content === long && /final output/.test(f.title ?? "")));
    expect(file.content).toBe(long);
    expect(channelNotices(h)).toHaveLength(1);
  });

  it("lets the user choose the crew first when several are configured", async () => {
    h = await startHarness({ crews: [{ name: "writer" }] });
    await h.requests.command({ text: "", user_id: USER, channel_id: CHANNEL });
    const picker = await eventually(() =>
      h.slack
        .callsTo("views.update")
        .map((c) => c.args.view as any)
        .find((v) => JSON.stringify(v).includes(CREW_SELECT_ACTION)),
    );
    const select = picker.blocks.flatMap((b: any) => (b.element ? [b] : [])).find((b: any) => b.element.action_id === CREW_SELECT_ACTION);
    const option = select.element.options.find((o: any) => o.text.text === "writer");
    const viewId = [...h.slack.views.values()].at(-1)!.id;
    await h.requests.blockAction({
      user_id: USER,
      channel_id: CHANNEL,
      message_ts: "",
      action: { action_id: CREW_SELECT_ACTION, block_id: select.block_id, type: "static_select", selected_option: option },
      view: { id: viewId, private_metadata: picker.private_metadata, callback_id: picker.callback_id },
    });
    const form = await eventually(() =>
      h.slack
        .callsTo("views.update")
        .map((c) => c.args.view as any)
        .find((v) => v?.callback_id === KICKOFF_VIEW_CALLBACK && v.submit),
    );
    expect(JSON.parse(form.private_metadata).crew).toBe("writer");
    expect(JSON.stringify(form.blocks)).toContain("writer");
  });
});
