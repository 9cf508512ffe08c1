import { describe, expect, it } from "vitest";
import { pendingReviewNotes } from "./deadline.js";
import { type FlowMessageParams, flowOutputNeedsFile, flowRequestMessage, outcomeStyle } from "./flow.js";
import { FLOW_ACTIONS_BLOCK, FLOW_EDIT_ACTION, FLOW_FEEDBACK_BLOCK, FLOW_REASSIGN_ACTION, FLOW_SEND_ACTION } from "./ids.js";
import { blockTextLength, messageLimitViolations } from "./limits.js";
import { buildRefusedChannelHeader, withRefusedHeader } from "./refused.js";
import { PENDING_NOTES_MAX } from "./run.js";

const base: FlowMessageParams = {
  requestId: "3f0c2a9e-1b2c-4d5e-8f90-123456789abc",
  flowName: "content",
  deploymentName: "Content pipeline",
  methodName: "review_article",
  message: "Please review this article",
  output: "# Draft\n\nSome *text*.",
  emit: ["approved", "needs_changes", "rejected"],
  state: "pending",
};

const actions = (m: ReturnType<typeof flowRequestMessage>) => m.blocks.find((b) => b.type === "actions") as any;

describe("flowRequestMessage", () => {
  it("shows flow, deployment, step, message and output, with one button per outcome and a feedback field", () => {
    const m = flowRequestMessage(base);
    const text = JSON.stringify(m.blocks);
    for (const part of ["content", "Content pipeline", "review_article", "Please review this article", "# Draft"]) expect(text).toContain(part);
    const buttons = actions(m).elements;
    expect(actions(m).block_id).toBe(FLOW_ACTIONS_BLOCK);
    expect(buttons.map((b: any) => [b.text.text, b.style, b.value])).toEqual([
      ["approved", "primary", base.requestId],
      ["needs_changes", undefined, base.requestId],
      ["rejected", "danger", base.requestId],
      ["Edit and approve…", undefined, base.requestId],
      ["Reassign", undefined, base.requestId],
    ]);
    expect(new Set(buttons.map((b: any) => b.action_id)).size).toBe(5);
    expect(m.blocks.some((b: any) => b.type === "input" && b.block_id === FLOW_FEEDBACK_BLOCK)).toBe(true);
    expect(messageLimitViolations(m.blocks)).toEqual([]);
  });

  it("offers Send feedback when the flow lists no outcomes", () => {
    const m = flowRequestMessage({ ...base, emit: [] });
    expect(actions(m).elements.map((b: any) => [b.action_id, b.text.text])).toEqual([
      [FLOW_SEND_ACTION, "Send feedback"],
      [FLOW_EDIT_ACTION, "Edit and approve…"],
      [FLOW_REASSIGN_ACTION, "Reassign"],
    ]);
    expect(JSON.stringify(m.blocks)).toMatch(/Required/);
  });

  it("mentions the assignee, or says who it was for when no Slack user was found", () => {
    expect(JSON.stringify(flowRequestMessage({ ...base, assigneeUserId: "U0DAN", assignedEmail: "dan@example.com" }).blocks)).toContain("<@U0DAN>");
    const notFound = JSON.stringify(flowRequestMessage({ ...base, assignedEmail: "dan@example.com" }).blocks);
    expect(notFound).toContain("dan@example.com");
    expect(notFound).toMatch(/no Slack user/);
  });

  it("shows a long output as an excerpt, and says the file holds the rest", () => {
    const m = flowRequestMessage({ ...base, output: "word ".repeat(5000), outputTruncated: true });
    expect(JSON.stringify(m.blocks)).toMatch(/attached below as a file/);
    expect(messageLimitViolations(m.blocks)).toEqual([]);
  });

  it("does not let hostile text ping the channel or break out of formatting", () => {
    const m = flowRequestMessage({ ...base, flowName: "*x* <!channel>", output: "hi <!channel> <@U1>", emit: ["a".repeat(100)] });
    const text = JSON.stringify(m.blocks);
    expect(text).not.toContain("<!channel>");
    expect(actions(m).elements[0].text.text.length).toBeLessThanOrEqual(75);
  });

  it("after a decision: who, outcome, comment and the platform's answer, no buttons", () => {
    const m = flowRequestMessage({ ...base, state: "answered", decidedBy: "U0BOB", outcome: "rejected", feedback: "Needs sources", note: "Feedback received" });
    const text = JSON.stringify(m.blocks);
    for (const part of ["<@U0BOB>", "rejected", "Needs sources", "Feedback received"]) expect(text).toContain(part);
    expect(actions(m)).toBeUndefined();
    const closed = JSON.stringify(flowRequestMessage({ ...base, state: "closed", decidedBy: "U0BOB", outcome: "approved", note: "409 Feedback was already provided" }).blocks);
    expect(closed).toContain("Closed");
    expect(closed).toContain("409 Feedback was already provided");
  });
});

describe("outcomeStyle", () => {
  it("styles approve-like outcomes primary and reject-like ones danger", () => {
    expect(["approved", "Approve", "accept", "publish", "LGTM", "yes"].map(outcomeStyle)).toEqual(Array(6).fill("primary"));
    expect(["rejected", "reject", "deny", "needs_revision", "revise", "cancel"].map(outcomeStyle)).toEqual(["danger", "danger", "danger", undefined, "danger", "danger"]);
    expect(outcomeStyle("escalate")).toBeUndefined();
  });
});

describe("flowRequestMessage's notification text and the flow's answer", () => {
  const hostile = "<!here> <@U0VICTIM> <https://phish.example|Approve>";
  const tokens = /<[!@#]|<https?:/;

  it("escapes the flow's name, step and outcome in every state's notification text", () => {
    const p = { ...base, flowName: `f ${hostile}`, methodName: `m ${hostile}`, outcome: `o ${hostile}`, decidedBy: "U0BOB" };
    for (const state of ["pending", "answered", "closed"] as const) {
      const m = flowRequestMessage({ ...p, state });
      expect(m.text).not.toMatch(tokens);
      expect(m.text).toContain("&lt;!here&gt;");
    }
    expect(flowRequestMessage({ ...p, state: "answered", edit: { by: "U0BOB", text: "new" } }).text).not.toMatch(tokens);
  });

  it("shows the flow's answer (a 2xx message or a 4xx body) as text, not mrkdwn, in every state", () => {
    for (const state of ["pending", "answered", "closed"] as const) {
      const m = flowRequestMessage({ ...base, state, decidedBy: "U0BOB", note: `409 ${hostile}` });
      const shown = JSON.stringify(m.blocks);
      expect(shown).toContain("409 &lt;!here&gt; &lt;@U0VICTIM&gt; &lt;https://phish.example|Approve&gt;");
      for (const token of ["<!here>", "<@U0VICTIM>", "<https://phish"]) expect(shown).not.toContain(token);
    }
  });
});

describe("flowRequestMessage with text that converts to nothing", () => {
  const texts = (m: ReturnType<typeof flowRequestMessage>) => m.blocks.flatMap((b) => (b.type === "section" && b.text ? [b.text.text] : b.type === "markdown" ? [b.text] : []));

  it("shows a message with nothing visible once converted as written, and leaves a blank one out", () => {
    for (const message of ["![](chart.png)", "[](#)", "[ ](x)", "\uE000\uE001"]) {
      const m = flowRequestMessage({ ...base, message });
      expect(messageLimitViolations(m.blocks)).toEqual([]);
      expect(texts(m)).toContain(message);
    }
    const blank = flowRequestMessage({ ...base, message: " \n " });
    expect(messageLimitViolations(blank.blocks)).toEqual([]);
    expect(texts(blank).every((t) => t.trim())).toBe(true);
  });

  it("shows the excerpt of an output made only of such text as written", () => {
    // Too long to show whole, short enough to be converted whole for the excerpt (fitMarkdown).
    for (const output of ["![](chart.png)\n".repeat(720), "\uE000".repeat(11_000), "[](#) ".repeat(1_800), "\uE001\uE002 ".repeat(3_600)]) {
      const m = flowRequestMessage({ ...base, output, outputTruncated: true });
      expect(messageLimitViolations(m.blocks)).toEqual([]);
      expect(texts(m).every((t) => t.trim())).toBe(true);
      expect(JSON.stringify(m.blocks)).toContain("Output shortened");
    }
  });
});

describe("flowRequestMessage with approvals for several outcomes", () => {
  const emit = ["approved_with_minor_edits", "approved", "rejected"];
  const by = [
    { userId: "U0ALICE", note: "fix the typo", edited: false, outcome: "approved_with_minor_edits" },
    { userId: "U0BOB", edited: false, outcome: "approved" },
  ];

  it("while pending, counts and names each outcome's approvers apart", () => {
    const text = JSON.stringify(flowRequestMessage({ ...base, emit, approvals: { required: 2, by } }).blocks);
    expect(text).toContain("1 of 2 approvals for *approved_with_minor_edits*: <@U0ALICE>");
    expect(text).toContain("1 of 2 approvals for *approved*: <@U0BOB>");
    expect(text).toContain("<@U0ALICE>: fix the typo");
    expect(text).not.toContain("2 of 2");
  });

  it("once answered, names the outcome the flow received", () => {
    const approvals = { required: 2, by: [by[0]!, { userId: "U0CAROL", edited: false, outcome: "approved_with_minor_edits" }] };
    const m = flowRequestMessage({ ...base, emit, state: "answered", decidedBy: "U0CAROL", outcome: "approved_with_minor_edits", approvals });
    expect(JSON.stringify(m.blocks)).toContain("The flow received *approved_with_minor_edits*");
    expect(JSON.stringify(m.blocks)).toContain("2 of 2 approvals: <@U0ALICE>, <@U0CAROL>");
  });

  it("with one approve-like outcome, shows approvals as before, without naming it", () => {
    const one = { required: 2, by: [{ userId: "U0ALICE", edited: false, outcome: "approved" }] };
    const pending = JSON.stringify(flowRequestMessage({ ...base, emit: ["approved", "rejected"], approvals: one }).blocks);
    expect(pending).toContain("1 of 2 approvals: <@U0ALICE>");
    const answered = flowRequestMessage({ ...base, emit: ["approved", "rejected"], state: "answered", decidedBy: "U0ALICE", outcome: "approved", approvals: one });
    expect(JSON.stringify(answered.blocks)).not.toContain("The flow received");
  });

  it("stays within Slack's limits with many outcomes' approvers at their longest", () => {
    const hostile = (n: number) => "<&>".repeat(n);
    const outcomes = Array.from({ length: 20 }, (_, i) => `${hostile(40)}approve${i}`);
    const many = Array.from({ length: 40 }, (_, i) => ({ userId: `U${String(i).padStart(10, "0")}`, note: hostile(500), edited: false, outcome: outcomes[i % 20]! }));
    const m = flowRequestMessage({ ...base, emit: outcomes, output: hostile(20_000), approvals: { required: 5, by: many } });
    expect(messageLimitViolations(m.blocks)).toEqual([]);
  });
});

describe("flowRequestMessage within Slack's total of block text", () => {
  const words = (n: number) => "lorem ipsum dolor sit amet ".repeat(Math.ceil(n / 27)).slice(0, n);
  const decided = { decidedBy: "U0BOB", outcome: "approved", feedback: words(800), note: words(500) };
  /** Every state a request's message goes through, with what each shows at its longest. */
  const states = (p: FlowMessageParams): FlowMessageParams[] => [
    { ...p, state: "pending", note: words(300) },
    { ...p, state: "deciding" },
    { ...p, ...decided, state: "answered" },
    { ...p, ...decided, state: "answered", edit: { by: "U0BOB", text: `${p.output} edited` }, approvals: { required: 1, by: [{ userId: "U0BOB", edited: true }] } },
    { ...p, ...decided, state: "closed" },
    { ...p, ...decided, state: "closed", byDeadline: true },
  ];
  const markdownOf = (m: ReturnType<typeof flowRequestMessage>) => m.blocks.find((b) => b.type === "markdown");

  it("a long message beside a long output: the output is an excerpt with the whole in a file, in every state", () => {
    const many = Array.from({ length: 20 }, (_, i) => `option number ${i} with a longer descriptive label for routing`);
    for (const p of [
      { ...base, message: words(2_000), output: words(10_000) },
      { ...base, message: words(1_200), output: words(10_000), emit: ["approved", "rejected"] },
      { ...base, message: words(1_000), output: words(10_000), emit: many },
      {
        ...base,
        message: words(2_000),
        output: words(9_000),
        emit: many,
        assigneeUserId: "U0DAN",
        pendingNotes: ["⏳ If nobody decides in 2 hours, it will be rejected automatically."],
      },
    ]) {
      for (const shown of states(p)) {
        const m = flowRequestMessage({ ...shown, outputTruncated: true });
        expect(messageLimitViolations(m.blocks), `${shown.state}`).toEqual([]);
        expect(markdownOf(m)).toBeUndefined();
        expect(JSON.stringify(m.blocks)).toContain("Output shortened — the full text is attached below as a file.");
      }
      // The file decision (slack-effects.ts) agrees: the whole output is attached.
      expect(flowOutputNeedsFile(p)).toBe(true);
    }
    // An output that fits beside the rest (its pending notes counted at their longest) is shown whole,
    // before and after the answer alike (beside an edit it is cut sooner, as before, and its file
    // follows: flow.show asks again).
    const fits = { ...base, message: words(300), output: words(9_600) };
    expect(flowOutputNeedsFile(fits)).toBe(false);
    for (const shown of states(fits).filter((s) => !s.edit)) {
      const m = flowRequestMessage(shown);
      expect(messageLimitViolations(m.blocks), `${shown.state}`).toEqual([]);
      expect((markdownOf(m) as { text: string } | undefined)?.text).toBe(fits.output);
    }
  });

  it("an escalation or reassignment after posting never cuts an output that was posted without its file", () => {
    const ids = Array.from({ length: 200 }, (_, i) => `U${String(i).padStart(10, "0")}`);
    const now = new Date();
    const deadline = { at: new Date(now.getTime() + 3_600_000), action: "reject" as const };
    const atPosting = pendingReviewNotes({ deadline, now });
    // What escalation and reassignment add later (cut at PENDING_NOTES_MAX): before, an 8,050-char output
    // beside a 2,000-char message was posted whole and without a file, then cut once 80 ids were escalated to.
    const later = [40, 80, 200].map((n) => pendingReviewNotes({ deadline, escalatedTo: ids.slice(0, n), reassignedTo: "U0DAN", now }));
    for (const message of [0, 1_000, 2_000]) {
      for (let length = 7_000; length <= 10_000; length += 50) {
        const p: FlowMessageParams = { ...base, message: words(message), output: words(length), emit: ["approved", "rejected"], pendingNotes: atPosting };
        const file = flowOutputNeedsFile(p);
        for (const pendingNotes of later) {
          const m = flowRequestMessage({ ...p, pendingNotes, outputTruncated: file });
          expect(messageLimitViolations(m.blocks)).toEqual([]);
          expect(JSON.stringify(m.blocks), `${message}/${length}`).not.toContain("Output shortened to fit in Slack.");
          if (!file) expect((markdownOf(m) as { text: string } | undefined)?.text).toBe(p.output);
          // The notes do not change the decision: it is the same whenever it is asked.
          expect(flowOutputNeedsFile({ ...p, pendingNotes }), `${message}/${length}`).toBe(file);
        }
      }
    }
  });

  it("the pending notes go one under the other, cut at PENDING_NOTES_MAX", () => {
    const lines = ["↪️ Reassigned to <@U0DAN>", `🔺 Escalated to ${"<@U0CAROL>, ".repeat(300)}`, "⏳ The deadline passed."];
    const m = flowRequestMessage({ ...base, pendingNotes: lines });
    const notes = JSON.stringify(m.blocks.filter((b) => JSON.stringify(b).includes("Reassigned to")));
    expect(notes).toContain("↪️ Reassigned to <@U0DAN>\\n🔺 Escalated to <@U0CAROL>");
    expect(blockTextLength(m.blocks.filter((b) => JSON.stringify(b).includes("Reassigned to")))).toBeLessThanOrEqual(PENDING_NOTES_MAX);
  });

  it("the room kept for what may come is all used: the longest output shown whole fills the longest state to Slack's total", () => {
    const p: FlowMessageParams = { ...base, message: words(2_000), output: "" };
    // The largest output shown whole (found by bisection: the decision is monotonic in the length).
    let [whole, cut] = [0, 10_001];
    while (whole + 1 < cut) {
      const mid = (whole + cut) >> 1;
      if (flowOutputNeedsFile({ ...p, output: "o".repeat(mid) })) cut = mid;
      else whole = mid;
    }
    expect(whole).toBeLessThan(10_000);
    const longest = { decidedBy: `U${"0".repeat(40)}`, outcome: "approved", feedback: "x".repeat(5_000), note: "x".repeat(5_000) };
    const sizes = [
      { ...p, state: "pending" as const, note: "x".repeat(5_000), pendingNotes: ["x".repeat(5_000)] },
      { ...p, ...longest, state: "answered" as const },
      { ...p, ...longest, state: "closed" as const },
    ].map((shown) => {
      const m = flowRequestMessage({ ...shown, output: "o".repeat(whole), outputTruncated: true });
      expect(messageLimitViolations(m.blocks)).toEqual([]);
      expect((markdownOf(m) as { text: string } | undefined)?.text).toBe("o".repeat(whole));
      return blockTextLength(m.blocks);
    });
    expect(Math.max(...sizes)).toBe(12_000);
  });

  it("stays within Slack's limits with every part at its longest and most hostile", () => {
    const hostile = (n: number) => "<&>".repeat(n);
    const ids = Array.from({ length: 200 }, (_, i) => `U${String(i).padStart(10, "0")}`);
    const p: FlowMessageParams = {
      ...base,
      flowName: hostile(1_000),
      deploymentName: hostile(1_000),
      methodName: hostile(1_000),
      message: hostile(5_000),
      output: hostile(20_000),
      emit: Array.from({ length: 30 }, (_, i) => `${hostile(40)}${i}`),
      assignedEmail: hostile(1_000),
      pendingNotes: pendingReviewNotes({ deadline: { at: new Date(Date.now() + 3_600_000), action: "reject" }, escalatedTo: ids, reassignedTo: "U0DAN", now: new Date() }),
      approvals: { required: 5, by: ids.slice(0, 40).map((userId) => ({ userId, note: hostile(500), edited: true })) },
      edit: { by: "U0BOB", text: hostile(19_000) },
    };
    // Sent to a direct message: the refused channel's header goes on top, as long as it gets.
    const header = buildRefusedChannelHeader({ channelId: "C0FLOWS", reason: hostile(1_000), subject: { kind: "flow", flowName: p.flowName, methodName: p.methodName } });
    for (const shown of states({ ...p, besides: blockTextLength(header.blocks) })) {
      const m = withRefusedHeader(flowRequestMessage({ ...shown, outcome: p.emit[0], feedback: hostile(5_000), note: hostile(5_000), outputTruncated: true }), {
        channelId: "C0FLOWS",
        reason: hostile(1_000),
        subject: { kind: "flow", flowName: p.flowName, methodName: p.methodName },
      });
      expect(messageLimitViolations(m.blocks), `${shown.state}`).toEqual([]);
      // Still a readable excerpt of the output above the note that it was shortened.
      const note = m.blocks.findIndex((b) => JSON.stringify(b).includes("Output shortened"));
      expect((m.blocks[note - 1] as { text?: { text: string } }).text?.text.length, `${shown.state}`).toBeGreaterThan(1_000);
    }
  });
});
