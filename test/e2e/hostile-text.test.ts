// Hostile text from a crew, end to end: the local crew service sends a task whose output is almost
// 2 MiB of Markdown that never closes (and a link posing as the app's Approve button), then, after a
// rejection, a second round of 20,000 different lines. What a user sees: a bounded excerpt, the full
// output as a file, "changed too much to compare" with the new version attached, no link previews,
// and a bot that still answers.
import { afterEach, describe, expect, it } from "vitest";
import { CHANNEL, eventually, type Harness, startHarness } from "../support/harness.js";
import { clickReview, pendingReview, resumeCalls, startRunViaSlack } from "../support/reviews.js";

let h: Harness;
afterEach(async () => h?.close());

const ROUND_1 = `[✅ Approve](https://phish.example/ok) ${"**a ".repeat(520_000)}`;
const ROUND_2 = Array.from({ length: 20_000 }, (_, i) => `line ${i}: omega ${(i * 7919) % 10007}`).join("\n");

const blockTexts = (blocks: unknown): string[] =>
  ((blocks ?? []) as { type: string; text?: { text?: string } | string; elements?: { text?: string }[] }[]).flatMap((b) => [
    ...(typeof b.text === "string" ? [b.text] : b.text?.text !== undefined ? [b.text.text] : []),
    ...(b.elements ?? []).flatMap((e) => (typeof e.text === "string" ? [e.text] : [])),
  ]);

describe("hostile crew text", () => {
  it("posts a 2 MiB unclosed-markup output as an excerpt with the whole output attached, and a 20,000-line round 2 as 'changed too much to compare' with the new version attached", async () => {
    h = await startHarness({
      crew: {
        tasks: [{ id: "task-report", name: "report_task", agent: "Writer", humanInput: true, steps: 0, delayMs: 0, output: ({ round }) => (round === 1 ? ROUND_1 : ROUND_2) }],
      },
    });
    const execution = await startRunViaSlack(h);

    // Round 1: an excerpt, within a section's limit, whose disguised link names its host.
    const first = await pendingReview(h, { timeoutMs: 60_000 });
    const texts = blockTexts(first.msg.blocks);
    const excerpt = texts.find((t) => t.includes("phish.example"))!;
    expect(excerpt.startsWith("<https://phish.example/ok|✅ Approve (phish.example)> **a **a")).toBe(true);
    expect(excerpt.length).toBeLessThanOrEqual(3_000);
    expect(excerpt.endsWith("…")).toBe(true);
    expect(texts.join("\n")).toContain("Output shortened — the full text is attached below as a file.");
    expect(JSON.stringify(first.msg.blocks).length).toBeLessThan(20_000);
    const file1 = await eventually(() => h.slack.files.find((f) => f.channel === CHANNEL && f.filename === "report_task-round-1.md"), { what: "round 1's file" });
    expect(file1.content).toBe(ROUND_1);
    expect(file1.thread_ts).toBe(execution.threadTs);

    // Crew text is posted without link previews (the task's message; its buttons come with an update). Form-encoded: "false".
    const posted = h.slack.callsTo("chat.postMessage").find((c) => JSON.stringify(c.args.blocks ?? []).includes("phish.example"))!;
    expect(posted.args).toMatchObject({ unfurl_links: "false", unfurl_media: "false" });

    expect((await fetch(`${h.botUrl}/healthz`)).status).toBe(200);

    // Round 2: too different to compare within bounds; the new version is the file.
    await clickReview(h, first, false, "Write real lines");
    await eventually(() => resumeCalls(h)[0], { what: "the rejection at the crew" });
    const second = await pendingReview(h, { containing: "round 2", timeoutMs: 60_000 });
    const secondText = blockTexts(second.msg.blocks).join("\n");
    expect(secondText).toContain("*Changes since round 1*: changed too much to compare; the new version is attached below as a file.");
    expect(secondText).toContain("line 0: omega 0");
    const file2 = await eventually(() => h.slack.files.find((f) => f.channel === CHANNEL && f.filename === "report_task-round-2.md"), { what: "round 2's file" });
    expect(file2.content).toBe(ROUND_2);
    // No diff file: it would not be readable, and the new version says it all.
    expect(h.slack.files.some((f) => f.filename.endsWith(".diff"))).toBe(false);
    expect((await fetch(`${h.botUrl}/healthz`)).status).toBe(200);

    // The run goes on: approving round 2 reaches the crew.
    await clickReview(h, second, true, "");
    await eventually(() => resumeCalls(h).find((c) => (c.body as { is_approve?: boolean }).is_approve === true), { what: "the approval at the crew" });
    const completion = await eventually(() => h.slack.callsTo("chat.postMessage").find((c) => /Crew research finished/.test(String(c.args.text))), {
      what: "the completion notice",
      timeoutMs: 60_000,
    });
    expect(completion.args).toMatchObject({ unfurl_links: "false", unfurl_media: "false" });
  }, 180_000);
});
