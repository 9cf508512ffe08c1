// The private (ephemeral) replies carry the crew's and the flow's own words (error messages, names,
// kickoff ids): Slack reads them as mrkdwn, so outside text in them is escaped.
import { describe, expect, it } from "vitest";
import type { Execution } from "../../usecases/ports.js";
import { flowReplyFor, replyFor } from "./decisions/replies.js";
import { statusText } from "./kickoff/command.js";

const hostile = "<!here> <@U0VICTIM> <https://phish.example|Approve>";
const escaped = "&lt;!here&gt; &lt;@U0VICTIM&gt; &lt;https://phish.example|Approve&gt;";
const noTokens = (text: string | undefined) => {
  for (const token of ["<!here>", "<@U0VICTIM>", "<https://phish"]) expect(text).not.toContain(token);
  expect(text).toContain(escaped);
};

describe("private replies escape outside text", () => {
  it("a review click: the crew's message when it was not waiting, or could not be reached", () => {
    const review = {} as never;
    noTokens(replyFor({ kind: "not_waiting", review, message: `The crew refused the request: “${hostile}”` }));
    noTokens(replyFor({ kind: "resume_failed", review, message: hostile }));
  });

  it("a flow click: the flow's refusal (a 4xx body) and its failure", () => {
    const request = {} as never;
    noTokens(flowReplyFor({ kind: "closed", request, reason: `409 ${hostile}` }));
    noTokens(flowReplyFor({ kind: "failed", request, message: `the flow answered 503 ${hostile}` }));
  });

  it("/crew status: the crew's name, kickoff id and why its status could not be read", () => {
    const execution = { crewName: hostile, kickoffId: hostile, state: "running", output: null, error: null } as unknown as Execution;
    const text = statusText("k1", { kind: "run", execution, crew: { unreadable: `The crew “${hostile}” had a server error` } });
    noTokens(text);
  });

  it("/crew status: the crew's output reads as its review would (Markdown as mrkdwn, escaped); an error stays plain", () => {
    const output = `# Findings\n**Vents** host [life](https://example.org/vents) ${hostile}`;
    const run = (e: Partial<Execution>) => ({ crewName: "research", kickoffId: "k1", state: "completed", output: null, error: null, ...e }) as unknown as Execution;
    const done = statusText("k1", { kind: "run", execution: run({ output }) });
    expect(done).toContain("*Findings*");
    // A link shows where it goes, as in a review; mentions and a disguised link do not come through.
    expect(done).toContain("*Vents* host <https://example.org/vents|life (example.org)>");
    expect(done).not.toContain("**");
    for (const token of ["<!here>", "<@U0VICTIM>", "|Approve>"]) expect(done).not.toContain(token);
    const sofar = statusText("k1", { kind: "run", execution: run({ state: "running" }), crew: { status: { phase: "running", rawState: "RUNNING", output } } as never });
    expect(sofar).toContain("Output so far:\n*Findings*");
    const failed = statusText("k1", { kind: "run", execution: run({ state: "failed", error: "**boom** at step 3" }) });
    expect(failed).toContain("**boom** at step 3");
  });
});
