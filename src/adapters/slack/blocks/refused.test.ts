import { describe, expect, it } from "vitest";
import { buildRefusedChannelHeader, refusalInWords, withRefusedHeader } from "./refused.js";

const run = { kind: "run" as const, crewName: "research", startedBy: "U0ALICE" };

describe("buildRefusedChannelHeader", () => {
  it("names the channel, Slack's reason in plain words, the run and who started it", () => {
    const header = buildRefusedChannelHeader({ channelId: "C0RUNS", reason: "is_archived", subject: run });
    expect(header.text).toBe(
      "⚠️ I couldn't post in <#C0RUNS> because the channel is archived, so the run of *research* started by <@U0ALICE> continues here, in this direct message.",
    );
    expect(header.blocks).toEqual([{ type: "context", elements: [{ type: "mrkdwn", text: header.text }] }]);
  });

  it("words each refusal, and shows an unknown code as code", () => {
    expect(refusalInWords("not_in_channel")).toMatch(/not a member of the channel/);
    expect(refusalInWords("channel_not_found")).toMatch(/no longer exists/);
    expect(refusalInWords("restricted_action")).toMatch(/only lets certain people post/);
    expect(refusalInWords("team_access_not_granted")).toMatch(/no access to the channel's workspace/);
    expect(refusalInWords("<!channel>")).toBe("Slack answered `&lt;!channel&gt;`");
  });

  it("escapes names from outside (a crew or flow name, a flow step) so they cannot mention or link", () => {
    const header = buildRefusedChannelHeader({
      channelId: "C0FLOWS",
      reason: "not_in_channel",
      subject: { kind: "flow", flowName: "<!here> flow", methodName: "<https://phish.example|review>" },
    });
    expect(header.text).toContain("*&lt;!here&gt; flow*");
    expect(header.text).toContain("(step *&lt;https://phish.example|review&gt;*)");
    expect(header.text).not.toContain("<!here>");
    expect(header.text).not.toContain("<https://");
    const crew = buildRefusedChannelHeader({ channelId: "C0RUNS", reason: "is_archived", subject: { ...run, crewName: "a&b <@U0EVIL>", startedBy: "<!channel>" } });
    expect(crew.text).toContain("*a&amp;b &lt;@U0EVIL&gt;*");
    expect(crew.text).not.toContain("<!channel>");
  });

  it("says 'its channel' rather than a malformed channel token", () => {
    expect(buildRefusedChannelHeader({ channelId: "C0RUNS>|x", reason: "is_archived", subject: run }).text).toContain("couldn't post in its channel because");
  });

  it("goes on top of a message, whose notification text starts with it", () => {
    const message = { text: "📝 Review: research_task", blocks: [{ type: "divider" as const }] };
    const placed = withRefusedHeader(message, { channelId: "C0RUNS", reason: "is_archived", subject: run });
    expect(placed.blocks).toHaveLength(2);
    expect(placed.blocks[0]!.type).toBe("context");
    expect(placed.text).toMatch(/^⚠️ I couldn't post in <#C0RUNS>.* 📝 Review: research_task$/);
    expect(withRefusedHeader(message, undefined)).toBe(message);
  });
});
