import type { types } from "@slack/bolt";
import { describe, expect, it } from "vitest";
import { pendingReviewNotes } from "./deadline.js";
import { APPROVE_ACTION, EDIT_ACTION, FEEDBACK_ACTION, FEEDBACK_BLOCK, REJECT_ACTION, STOP_ACTION, STOP_FOLLOWING_ACTION } from "./ids.js";
import { blockTextLength, messageLimitViolations } from "./limits.js";
import {
  announcementMessage,
  cannotStopMessage,
  completionMessage,
  errorNotice,
  OUTPUT_EXCERPT_MAX,
  OUTPUT_MARKDOWN_MAX,
  outputNeedsFile,
  PENDING_NOTES_MAX,
  progressMessage,
  type ReviewParams,
  reviewMessage,
  reviewReserve,
  type SlackMessage,
} from "./run.js";

const huge = (n: number) => "Ü😀 <x> & **y**\n".repeat(Math.ceil(n / 16)).slice(0, n);
const hugeMarkdown = (n: number) => `# Report\n\n${"Some **text** & <tags>.\n\n```py\nprint('x < y')\n```\n\n".repeat(n / 50)}`;
const json = (m: SlackMessage) => JSON.stringify(m.blocks);
const ofType = <T extends types.KnownBlock["type"]>(m: SlackMessage, type: T) => m.blocks.filter((b): b is Extract<types.KnownBlock, { type: T }> => b.type === type);

function expectWithinLimits(m: SlackMessage): void {
  expect(messageLimitViolations(m.blocks)).toEqual([]);
  expect(m.blocks.length).toBeLessThanOrEqual(50);
  expect(blockTextLength(m.blocks)).toBeLessThanOrEqual(12_000);
  expect(m.text.length).toBeLessThanOrEqual(1_000);
  for (const s of ofType(m, "section")) if (s.text) expect(s.text.text.length).toBeLessThanOrEqual(3000);
}

const started = new Date("2025-03-01T14:00:00Z");
const finished = new Date("2025-03-01T14:02:05Z");

describe("announcementMessage", () => {
  const base = {
    crewName: "Research crew",
    userId: "U012AB3CD",
    inputs: { topic: "AI <agents> & co", current_year: "2025" },
    state: "running" as const,
    startedAt: started,
  };

  it("names who started which crew, with inputs as fields and a thread pointer", () => {
    const m = announcementMessage({ ...base, kickoffId: "k-123" });
    expect(m.blocks[0]).toMatchObject({ type: "section", text: { type: "mrkdwn" } });
    const first = ofType(m, "section")[0]?.text?.text ?? "";
    expect(first).toContain("<@U012AB3CD> started crew *Research crew*");
    expect(first).toContain("🏃");
    expect(ofType(m, "section")[1]?.fields?.map((f) => f.text)).toEqual(["*Topic*\nAI &lt;agents&gt; &amp; co", "*Current year*\n2025"]);
    const ctx = JSON.stringify(ofType(m, "context"));
    expect(ctx).toContain("k-123");
    expect(ctx).toContain("Activity in the thread 🧵");
    expect(ctx).toContain("<!date^1740837600^");
    expect(m.text).toContain("Research crew");
    expectWithinLimits(m);
  });

  it("shows state, duration and a readable failure summary", () => {
    const m = announcementMessage({ ...base, state: "failed", finishedAt: finished, summary: "Boom\n    at x (y.js:1:1)" });
    const first = ofType(m, "section")[0]?.text?.text ?? "";
    expect(first).toContain("❌");
    expect(first).toContain("took 2 min 5 s");
    expect(first).toContain("Boom");
    expect(first).not.toContain("y.js");
  });

  it("shows at most 10 inputs and counts the rest", () => {
    const inputs = Object.fromEntries(Array.from({ length: 13 }, (_, i) => [`in_${i}`, `v${i}`]));
    const m = announcementMessage({ ...base, inputs });
    expect(ofType(m, "section")[1]?.fields).toHaveLength(10);
    expect(json(m)).toContain("+3 more inputs");
  });

  it("omits the fields section without inputs", () => {
    const m = announcementMessage({ ...base, inputs: {}, state: "starting" });
    expect(ofType(m, "section")).toHaveLength(1);
    expect(json(m)).not.toContain("Kickoff");
    expectWithinLimits(m);
  });

  it("stays within limits with huge names and values", () => {
    const inputs = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`${huge(5000)}${i}`, huge(50_000)]));
    const m = announcementMessage({ ...base, crewName: huge(100_000), userId: huge(500), inputs, kickoffId: huge(5000), summary: huge(50_000) });
    expectWithinLimits(m);
    for (const f of ofType(m, "section")[1]?.fields ?? []) expect(f.text.length).toBeLessThanOrEqual(2000);
  });
});

describe("progressMessage", () => {
  it("is one section and a context line", () => {
    const m = progressMessage({ steps: 12, latest: "Searching **the web**", updatedAt: new Date("2025-03-01T14:03:05Z") });
    expect(m.blocks.map((b) => b.type)).toEqual(["section", "context"]);
    expect(json(m)).toContain("⚙️ Searching *the web*");
    expect(json(m)).toContain("12 steps so far · last update 14:03:05 UTC");
    expectWithinLimits(m);
  });

  it("reads well when done and with one step", () => {
    const m = progressMessage({ steps: 1, latest: "", updatedAt: started, done: true });
    expect(json(m)).toContain("1 step in total");
    expectWithinLimits(m);
  });

  it("says how the run ended: stopped, failed or lost are not finished", () => {
    const ended = (state?: string) => progressMessage({ steps: 3, latest: "Writing", updatedAt: started, done: true, ...(state ? { state } : {}) });
    expect([undefined, "completed", "stopped", "abandoned", "failed", "lost", "uninstalled"].map((s) => [ended(s).text, ofType(ended(s), "section")[0]?.text?.text])).toEqual([
      ["Finished: 3 steps", "✅ Writing"],
      ["Finished: 3 steps", "✅ Writing"],
      ["Stopped: 3 steps", "⏹️ Writing"],
      ["No longer followed: 3 steps", "⏹️ Writing"],
      ["Failed: 3 steps", "❌ Writing"],
      ["Lost track of the run: 3 steps", "⚠️ Writing"],
      ["Lost track of the run: 3 steps", "⚠️ Writing"],
    ]);
    expect(json(ended("stopped"))).toContain("3 steps in total");
  });

  it("stays within limits with huge text", () => {
    expectWithinLimits(progressMessage({ steps: 1e9, latest: huge(100_000), updatedAt: started }));
  });
});

describe("reviewMessage", () => {
  const base = { reviewId: "rev_1", taskName: "Write report", agent: "Writer", round: 2, output: "## Findings\n\n**Good** stuff", state: "pending" as const };

  it("pending: output as a markdown block, feedback input and the two buttons", () => {
    const m = reviewMessage(base);
    expect(m.blocks.map((b) => b.type)).toEqual(["section", "markdown", "input", "actions"]);
    expect(json(m)).toContain("📝 *Write report* · Writer · round 2");
    expect(ofType(m, "markdown")[0]?.text).toBe(base.output);
    expect(ofType(m, "input")[0]).toMatchObject({
      block_id: FEEDBACK_BLOCK,
      optional: true,
      label: { text: "Feedback" },
      element: {
        type: "plain_text_input",
        action_id: FEEDBACK_ACTION,
        multiline: true,
        max_length: 3000,
        placeholder: { text: "Required to reject; optional to approve" },
      },
    });
    expect(ofType(m, "actions")[0]?.elements).toMatchObject([
      { type: "button", action_id: APPROVE_ACTION, style: "primary", value: "rev_1", text: { text: "Approve" } },
      { type: "button", action_id: EDIT_ACTION, value: "rev_1", text: { text: "Edit and approve…" } },
      { type: "button", action_id: REJECT_ACTION, style: "danger", value: "rev_1", text: { text: "Reject" } },
    ]);
    expectWithinLimits(m);
  });

  it("pending with a long output: mrkdwn excerpt plus the file note", () => {
    const output = hugeMarkdown(50_000);
    expect(outputNeedsFile(output)).toBe(true);
    const m = reviewMessage({ ...base, output, outputTruncated: true });
    expect(ofType(m, "markdown")).toHaveLength(0);
    const excerpt = ofType(m, "section")[1]?.text?.text ?? "";
    expect(excerpt.length).toBeLessThanOrEqual(OUTPUT_EXCERPT_MAX);
    expect(excerpt.startsWith("*Report*")).toBe(true);
    expect(excerpt.match(/^```/gm)?.length ?? 0).toSatisfy((n: number) => n % 2 === 0);
    expect(json(m)).toContain("Output shortened — the full text is attached below as a file.");
    expectWithinLimits(m);
  });

  it("does not promise a file that was not attached", () => {
    const m = reviewMessage({ ...base, output: "x".repeat(OUTPUT_MARKDOWN_MAX + 1) });
    expect(json(m)).not.toContain("attached");
    expect(json(m)).toContain("Output shortened");
  });

  it("uses the markdown block up to the threshold, and says so when a file is attached anyway", () => {
    const output = "y".repeat(OUTPUT_MARKDOWN_MAX);
    expect(outputNeedsFile(output)).toBe(false);
    const m = reviewMessage({ ...base, output, outputTruncated: true });
    expect(ofType(m, "markdown")[0]?.text).toBe(output);
    expect(json(m)).toContain("also attached");
    expectWithinLimits(m);
  });

  it("keeps crew output from pinging anyone", () => {
    const m = reviewMessage({ ...base, output: "Hey <!channel>, ask <@U1> in <#C1>; see <https://ex.com>" });
    const text = ofType(m, "markdown")[0]?.text ?? "";
    expect(text).not.toMatch(/<[!@#]/);
    expect(text.replace(/\u200B/g, "")).toBe("Hey <!channel>, ask <@U1> in <#C1>; see <https://ex.com>");
  });

  it("shows an empty output plainly", () => {
    const m = reviewMessage({ ...base, output: "  \n" });
    expect(json(m)).toContain("_No output._");
    expectWithinLimits(m);
  });

  it("approved: no input or buttons, who decided and the quoted feedback", () => {
    const m = reviewMessage({ ...base, state: "approved", decidedBy: "U9", feedback: "Nice <b>\nwork", note: "Crew said: ok" });
    expect(ofType(m, "input")).toHaveLength(0);
    expect(ofType(m, "actions")).toHaveLength(0);
    expect(json(m)).not.toContain(APPROVE_ACTION);
    expect(ofType(m, "section").at(-1)?.text?.text).toBe("✅ Approved by <@U9>\n> Nice &lt;b&gt;\n> work");
    expect(JSON.stringify(ofType(m, "context"))).toContain("Crew said: ok");
    expectWithinLimits(m);
  });

  it("rejected: says it is retrying", () => {
    const m = reviewMessage({ ...base, state: "rejected", decidedBy: "U9", feedback: "More sources" });
    expect(ofType(m, "actions")).toHaveLength(0);
    expect(ofType(m, "section").at(-1)?.text?.text).toBe("↩️ Rejected by <@U9> — retrying\n> More sources");
  });

  it("closed: no decision needed, with the note", () => {
    const m = reviewMessage({ ...base, state: "closed", note: "The run finished without needing this decision." });
    expect(ofType(m, "actions")).toHaveLength(0);
    expect(ofType(m, "input")).toHaveLength(0);
    expect(ofType(m, "section").at(-1)?.text?.text).toBe("No decision needed — The run finished without needing this decision.");
  });

  it("stays within limits with huge everything, in every state", () => {
    for (const state of ["pending", "approved", "rejected", "closed"] as const) {
      for (const output of [huge(200_000), "z".repeat(OUTPUT_MARKDOWN_MAX), hugeMarkdown(OUTPUT_MARKDOWN_MAX - 100), "<!".repeat(5000)]) {
        const m = reviewMessage({
          reviewId: "r".repeat(2000),
          taskName: huge(100_000),
          agent: huge(10_000),
          round: 99,
          output,
          state,
          decidedBy: "U1",
          feedback: "line\n".repeat(20_000),
          note: huge(50_000),
          outputTruncated: true,
        });
        expectWithinLimits(m);
      }
    }
  });

  it("keeps room for what hostile names, notes and every extra take: the output is cut sooner, and the file decision agrees", () => {
    const hostile = (n: number) => "<&>".repeat(n);
    const words = (n: number, w = "word") => `${w} `.repeat(n / 5).slice(0, n);
    const ids = Array.from({ length: 80 }, (_, i) => `U${String(i).padStart(10, "0")}`);
    const pendingNotes = pendingReviewNotes({ deadline: { at: new Date(Date.now() + 3_600_000), action: "reject" }, escalatedTo: ids, reassignedTo: "U0DAN", now: new Date() });
    const approvals = { required: 5, by: ids.slice(0, 40).map((userId) => ({ userId, note: hostile(100), edited: true })) };
    const previous = { round: 2, output: words(7_400, "wxrd"), feedback: hostile(1_000), decidedBy: "U0BOB" };
    const names = { reviewId: "r1", taskName: hostile(4_000), agent: hostile(4_000), round: 3, reassignable: true, pendingNotes };
    const edit = { by: "U0BOB", text: words(7_400, "ward") };
    // [params, whether the output must be excerpted]: with a fixed reserve the first and third came to
    // 12,221 and 12,935 chars of block text, which Slack refuses.
    const cases: [ReviewParams, boolean | undefined][] = [
      [{ ...names, state: "pending", output: words(10_000) }, true],
      [{ ...names, state: "pending", output: words(7_400), approvals, edit }, undefined],
      [{ ...names, state: "pending", output: words(7_400), previous, approvals, edit }, true],
      [{ ...names, state: "pending", output: words(7_400), previous: { ...previous, output: words(7_400).replace(/word/, "first") } }, undefined],
      [{ ...names, taskName: "Report", agent: "Writer", pendingNotes: [], state: "pending", output: words(10_000), previous: { ...previous, feedback: "More" } }, undefined],
    ];
    for (const [c, expected] of cases) {
      const excerpted = outputNeedsFile(c.output, reviewReserve(c));
      if (expected !== undefined) expect(excerpted).toBe(expected);
      for (const state of ["posted", "pending", "approved", "rejected", "closed"] as const) {
        const m = reviewMessage({ ...c, state, decidedBy: "U0BOB", feedback: hostile(1_000), note: hostile(1_000), outputTruncated: excerpted, editFileAttached: !!c.edit });
        expectWithinLimits(m);
        // Shown the same way in every state, as the file decision says: no excerpt without its file.
        expect(ofType(m, "markdown").length, state).toBe(excerpted ? 0 : 1);
      }
    }
  });

  it("an escalation or reassignment after posting never cuts an output that was posted without its file", () => {
    const words = (n: number) => "word ".repeat(n / 5).slice(0, n);
    const ids = Array.from({ length: 200 }, (_, i) => `U${String(i).padStart(10, "0")}`);
    const now = new Date();
    const deadline = { at: new Date(now.getTime() + 3_600_000), action: "reject" as const };
    const escalated = pendingReviewNotes({ deadline, escalatedTo: ids, reassignedTo: "U0DAN", now });
    // What escalation and reassignment add later: before, five such lines (600 chars each) made a
    // 9,000-char output posted whole and without a file be cut.
    const later = [escalated, Array.from({ length: 5 }, () => escalated[1]!)];
    const approvals = { required: 2, by: [{ userId: "U0BOB", note: "fine", edited: false }] };
    for (const extra of [{ taskName: "Report" }, { taskName: "<&>".repeat(50), agent: "Senior Research Analyst" }, { taskName: "Report", approvals }]) {
      for (let length = 7_000; length <= 10_000; length += 50) {
        const posted = { reviewId: "r1", round: 1, output: words(length), reassignable: true, pendingNotes: pendingReviewNotes({ deadline, now }), ...extra };
        const file = outputNeedsFile(posted.output, reviewReserve(posted));
        for (const pendingNotes of later) {
          const m = reviewMessage({ ...posted, state: "pending", pendingNotes, note: "n".repeat(1_000), outputTruncated: file });
          expectWithinLimits(m);
          expect(json(m), `${extra.taskName}/${length}`).not.toContain("Output shortened to fit in Slack.");
          if (!file) expect(ofType(m, "markdown")[0]?.text).toBe(posted.output);
        }
      }
    }
  });

  it("shows the pending notes one under the other, cut at PENDING_NOTES_MAX in all", () => {
    const lines = ["↪️ Reassigned to <@U0DAN>", `🔺 Escalated to ${"<@U0CAROL>, ".repeat(300)}`, "⏳ The deadline passed.", "x".repeat(600), "y".repeat(600)];
    const m = reviewMessage({ ...base, pendingNotes: lines });
    const notes = ofType(m, "context").filter((b) => JSON.stringify(b).includes("Reassigned to"));
    expect(notes).toHaveLength(1);
    expect(notes[0]?.elements).toHaveLength(1);
    expect((notes[0]?.elements[0] as { text: string }).text).toMatch(/^↪️ Reassigned to <@U0DAN>\n🔺 Escalated to <@U0CAROL>, /);
    expect(blockTextLength(notes)).toBeLessThanOrEqual(PENDING_NOTES_MAX);
    expectWithinLimits(m);
  });

  it("uses all the room it keeps for what may come: the longest output shown whole fills the longest state to Slack's total", () => {
    const posted = { reviewId: "r1", taskName: "t".repeat(150), agent: "Senior Research Analyst", round: 1, reassignable: true };
    // The largest output shown whole (by bisection: the decision is monotonic in the length).
    let [whole, cut] = [0, OUTPUT_MARKDOWN_MAX + 1];
    while (whole + 1 < cut) {
      const mid = (whole + cut) >> 1;
      if (outputNeedsFile("o".repeat(mid), reviewReserve({ ...posted, output: "o".repeat(mid) }))) cut = mid;
      else whole = mid;
    }
    expect(whole).toBeLessThan(OUTPUT_MARKDOWN_MAX);
    const decided = { decidedBy: `U${"0".repeat(40)}`, feedback: "x".repeat(5_000), note: "x".repeat(5_000) };
    const sizes = [
      { ...posted, state: "pending" as const, note: "x".repeat(5_000), pendingNotes: ["x".repeat(5_000)] },
      { ...posted, ...decided, state: "approved" as const },
      { ...posted, ...decided, state: "rejected" as const },
      { ...posted, ...decided, state: "closed" as const },
    ].map((shown) => {
      const m = reviewMessage({ ...shown, output: "o".repeat(whole), outputTruncated: true });
      expectWithinLimits(m);
      expect(ofType(m, "markdown")[0]?.text).toBe("o".repeat(whole));
      return blockTextLength(m.blocks);
    });
    expect(Math.max(...sizes)).toBe(12_000);
  });

  it("refuses a review id that cannot be a button value", () => {
    expect(() => reviewMessage({ ...base, reviewId: "r".repeat(2001) })).toThrow();
  });
});

describe("completionMessage", () => {
  const base = { crewName: "Research crew", userId: "U1", durationMs: 125_000 };

  it("success: headline, who, duration, output and thread link", () => {
    const m = completionMessage({ ...base, outcome: "succeeded", output: "**Done**", threadPermalink: "https://x.slack.com/archives/C1/p1?thread_ts=1&cid=C1" });
    const first = ofType(m, "section")[0]?.text?.text ?? "";
    expect(first).toBe("✅ Crew *Research crew* finished\nStarted by <@U1> · took 2 min 5 s");
    expect(ofType(m, "markdown")[0]?.text).toBe("**Done**");
    expect(json(m)).toContain("<https://x.slack.com/archives/C1/p1?thread_ts=1&amp;cid=C1|View the run's thread>");
    expect(m.text).toContain("finished");
    expectWithinLimits(m);
  });

  it("a long output: shortened, and its file is said to be in the run's thread (the notice is in the channel)", () => {
    const m = completionMessage({ ...base, outcome: "succeeded", output: "word ".repeat(5000), outputTruncated: true });
    expect(json(m)).toContain("Output shortened — the full text is attached in the run's thread as a file.");
  });

  it("failure: plain reason without the stack trace", () => {
    const error = "TypeError: Cannot read <x> of undefined\n    at run (/app/crew.js:10:5)\n    at main (/app/index.js:3:1)";
    const m = completionMessage({ ...base, outcome: "failed", error });
    expect(json(m)).toContain("❌ Crew *Research crew* failed");
    expect(ofType(m, "section")[1]?.text?.text).toBe("*Reason:* TypeError: Cannot read &lt;x&gt; of undefined");
    expect(json(m)).not.toContain("crew.js");
  });

  it("lost: says so, even without an error", () => {
    const m = completionMessage({ ...base, outcome: "lost" });
    expect(json(m)).toContain("⚠️ Lost track of crew *Research crew*");
    expect(json(m)).toContain("stopped hearing");
  });

  it("ignores links that are not http(s)", () => {
    expect(json(completionMessage({ ...base, outcome: "succeeded", threadPermalink: "javascript:alert(1)" }))).not.toContain("View the run");
  });

  it("stays within limits with huge everything", () => {
    for (const outcome of ["succeeded", "failed", "lost"] as const) {
      for (const output of [huge(200_000), "z".repeat(OUTPUT_MARKDOWN_MAX)]) {
        const m = completionMessage({
          crewName: huge(100_000),
          userId: "U1",
          outcome,
          durationMs: 1e12,
          output,
          error: huge(100_000),
          threadPermalink: `https://x.slack.com/${"p".repeat(400)}`,
          outputTruncated: true,
        });
        expectWithinLimits(m);
      }
    }
  });
});

describe("errorNotice", () => {
  it("errorNotice is a readable, escaped section", () => {
    const m = errorNotice("Rate limited <429>\n    at fetch (x.js:1:1)");
    expect(ofType(m, "section")[0]?.text?.text).toBe("⚠️ *The crew reported an error*\n> Rate limited &lt;429&gt;");
    expectWithinLimits(m);
    expectWithinLimits(errorNotice(huge(100_000)));
    expectWithinLimits(errorNotice(""));
  });

  it("is bounded for an error of 2 MiB", () => {
    const m = errorNotice(`${"<!here> ".repeat(2 ** 18)}`);
    expectWithinLimits(m);
    expect(ofType(m, "section")[0]?.text?.text).toMatch(/^⚠️ \*The crew reported an error\*\n> (&lt;!here&gt; )+&lt;!here&gt;…$/);
  });
});

describe("outputs that pose as the app", () => {
  it("names the host of disguised links in an output shown whole, and in its excerpt", () => {
    const output = "Done. [✅ Approve](https://phish.example/a) or [Reject](https://phish.example/r)";
    const whole = reviewMessage({ reviewId: "r1", taskName: "t", round: 1, output, state: "pending" });
    const markdown = whole.blocks.find((b) => b.type === "markdown") as { text: string } | undefined;
    expect(markdown?.text).toBe("Done. [✅ Approve (phish.example)](https://phish.example/a) or [Reject (phish.example)](https://phish.example/r)");
    const long = reviewMessage({ reviewId: "r1", taskName: "t", round: 1, output: `${output}\n\n${"filler ".repeat(3_000)}`, state: "pending", outputTruncated: true });
    expect(
      ofType(long, "section")
        .map((b) => b.text?.text)
        .join("\n"),
    ).toContain("<https://phish.example/a|✅ Approve (phish.example)>");
  });
});

describe("notification text (the `text` field is mrkdwn too)", () => {
  const hostile = ["<!here>", "<@U0VICTIM>", "<https://phish.example|Approve>", "<!subteam^S1>"];
  const tokens = /<[!@#]|<https?:/;
  const named = hostile.join(" ");

  it("escapes task names in every review state's notification", () => {
    const states = ["posted", "pending", "closed", "approved", "rejected"] as const;
    for (const state of states) {
      const m = reviewMessage({ reviewId: "rev_1", taskName: named, round: 1, output: "ok", state });
      expect(m.text).not.toMatch(tokens);
      expect(m.text).toContain("&lt;!here&gt; &lt;@U0VICTIM&gt; &lt;https://phish.example|Approve&gt;");
    }
    expect(reviewMessage({ reviewId: "rev_1", taskName: named, round: 1, output: "ok", state: "approved", edit: { by: "U1", text: "new" } }).text).not.toMatch(tokens);
  });

  it("escapes crew names in announcements and completions, and the crew's error", () => {
    const announcement = announcementMessage({ crewName: named, userId: "U1", inputs: {}, state: "running", startedAt: started });
    expect(announcement.text).not.toMatch(tokens);
    for (const outcome of ["succeeded", "failed", "lost"] as const)
      expect(completionMessage({ crewName: named, userId: "U1", durationMs: 1000, outcome }).text).not.toMatch(tokens);
    const error = errorNotice(`boom ${named}`);
    expect(error.text).not.toMatch(tokens);
    expect(error.text).toContain("&lt;!here&gt;");
  });
});

describe("stopping a run", () => {
  const base = { crewName: "Research <crew>", userId: "U012AB3CD", inputs: { topic: "tides" }, kickoffId: "k-1", startedAt: started };
  const buttons = (m: SlackMessage) => ofType(m, "actions").flatMap((a) => a.elements) as types.Button[];

  it("a live run's announcement has a Stop button (the run's id) with a confirm dialog", () => {
    const m = announcementMessage({ ...base, state: "running", stoppable: "exec-1" });
    const [stop] = buttons(m);
    expect(stop).toMatchObject({ action_id: STOP_ACTION, value: "exec-1", style: "danger", text: { text: "Stop" } });
    expect(stop?.confirm?.title?.text).toBe("Stop this run?");
    expect(stop?.confirm?.text?.text).toContain("Research <crew>");
    expect(stop?.confirm?.text?.type).toBe("plain_text");
    expectWithinLimits(m);
  });

  it("without a run to stop, no button", () => {
    expect(buttons(announcementMessage({ ...base, state: "completed", finishedAt: finished }))).toEqual([]);
  });

  it("after the stop: Stopped by who, in the blocks and the notification text", () => {
    const m = announcementMessage({ ...base, state: "stopped", stoppedBy: "U0BOB", finishedAt: finished });
    expect(ofType(m, "section")[0]?.text?.text).toContain("⏹️ <@U012AB3CD> started crew *Research &lt;crew&gt;* — Stopped by <@U0BOB> · took 2 min 5 s");
    expect(m.text).toContain("Stopped by <@U0BOB>");
    expect(buttons(m)).toEqual([]);
    const abandoned = announcementMessage({ ...base, state: "abandoned", stoppedBy: "U0BOB", finishedAt: finished });
    expect(ofType(abandoned, "section")[0]?.text?.text).toContain("No longer followed by <@U0BOB>");
  });

  it("a closed review of a stopped run says who stopped it", () => {
    const m = reviewMessage({ reviewId: "r-1", taskName: "t", round: 1, output: "x", state: "closed", runStopped: { how: "stopped", by: "U0BOB" } });
    expect(json(m)).toContain("No decision needed — ⏹️ The run was stopped by <@U0BOB>.");
    expect(json(m)).not.toContain(APPROVE_ACTION);
  });

  it("the crew cannot be stopped: said plainly, with a Stop following button", () => {
    const m = cannotStopMessage("exec-1", "Research <crew>");
    expect(m.text).toContain("cannot be stopped from Slack");
    expect(m.text).toContain("Research &lt;crew&gt;");
    expect(buttons(m)).toMatchObject([{ action_id: STOP_FOLLOWING_ACTION, value: "exec-1", text: { text: "Stop following" } }]);
    expectWithinLimits(m);
  });
});
