import { describe, expect, it } from "vitest";
import { homeView } from "./home.js";
import { blockTextLength, LIMITS } from "./limits.js";

const now = new Date("2026-11-22T12:00:00Z");

describe("homeView", () => {
  it("lists reviews with thread links, runs and crews", () => {
    const view = homeView({
      userId: "U1",
      now,
      reviews: [{ crewName: "research", taskName: "Research", round: 2, waitingMs: 90_000, channelId: "C1", permalink: "https://x.slack.com/archives/C1/p1" }],
      runs: [{ crewName: "research", state: "waiting", channelId: "C1", kickoffId: "k-1", startedAt: new Date(now.getTime() - 60_000) }],
      crews: [{ name: "research" }, { name: "writer", channels: ["C2"] }],
    });
    const text = JSON.stringify(view.blocks);
    expect(view.type).toBe("home");
    expect(text).toContain("Reviews waiting for you (1)");
    expect(text).toContain("<https://x.slack.com/archives/C1/p1|Open the thread>");
    expect(text).toContain("round 2");
    expect(text).toContain("k-1");
    expect(text).toContain("<#C2>");
    expect(text).toContain("any channel");
  });

  it("renders one list item per line (mrkdwn keeps its newlines)", () => {
    const view = homeView({
      userId: "U1",
      now,
      reviews: [{ crewName: "research", taskName: "Research", round: 1, waitingMs: 1_000, channelId: "C1" }],
      runs: [
        { crewName: "a", state: "running", channelId: "C1", startedAt: now },
        { crewName: "b", state: "completed", channelId: "C1", startedAt: now },
      ],
      crews: [{ name: "research" }, { name: "writer" }],
    });
    const sections = (view.blocks as any[]).filter((b) => b.type === "section").map((b) => b.text.text as string);
    const runs = sections.find((t) => t.includes("*a*"))!;
    expect(runs.split("\n")).toHaveLength(2);
    expect(runs.split("\n")[1]).toMatch(/^• \*b\*/);
    const crews = sections.find((t) => t.includes("*writer*"))!;
    expect(crews.split("\n")).toEqual([expect.stringMatching(/^• \*research\*/), expect.stringMatching(/^• \*writer\*/)]);
    const review = sections.find((t) => t.includes("*Research*"))!;
    expect(review.split("\n")).toHaveLength(2);
  });

  it("stays within Block Kit limits with many long entries", () => {
    const long = "x".repeat(500);
    const view = homeView({
      userId: "U1",
      now,
      reviews: Array.from({ length: 300 }, (_, i) => ({ crewName: long, taskName: long + i, round: 1, waitingMs: 1, channelId: "C1", permalink: "https://x/" + "p".repeat(200) })),
      runs: Array.from({ length: 40 }, () => ({ crewName: long, state: "running", channelId: "C1", kickoffId: long, startedAt: now })),
      crews: Array.from({ length: 80 }, () => ({ name: long, channels: Array.from({ length: 30 }, (_, j) => `C${j}`) })),
    });
    expect(view.blocks.length).toBeLessThanOrEqual(LIMITS.modalBlocks);
    for (const b of view.blocks as any[]) {
      if (b.type === "section") expect(b.text.text.length).toBeLessThanOrEqual(LIMITS.sectionText);
      if (b.type === "header") expect(b.text.text.length).toBeLessThanOrEqual(LIMITS.header);
    }
    expect(JSON.stringify(view.blocks)).toContain("and 270 more reviews");
    expect(blockTextLength(view.blocks)).toBeGreaterThan(0);
  });

  it("says where reviews whose runs the user may not see wait, grouped by channel, without their content or a button", () => {
    const view = homeView({
      userId: "U1",
      now,
      reviews: [],
      withheld: [
        { channelId: "CPRIV", why: "escalated" },
        { channelId: "CPRIV", why: "escalated" },
        { channelId: "COTHER", why: "handed" },
        { channelId: "CMIXED", why: "handed" },
        { channelId: "CMIXED" },
      ],
      runs: [],
      crews: [],
    });
    const text = JSON.stringify(view.blocks);
    expect(text).toContain("Reviews waiting for you (5)");
    expect(text).not.toContain("Nothing to decide right now");
    expect(text).toContain("2 reviews escalated to you wait in <#CPRIV>, a channel you are not in");
    expect(text).toContain("A review handed to you waits in <#COTHER>");
    expect(text).toContain("2 reviews for you wait in <#CMIXED>");
    expect((view.blocks as any[]).some((b) => b.accessory)).toBe(false);
  });

  it("names at most a few channels of withheld reviews", () => {
    const withheld = Array.from({ length: 25 }, (_, i) => ({ channelId: `C${i}`, why: "escalated" as const }));
    const view = homeView({ userId: "U1", now, reviews: [], withheld, runs: [], crews: [] });
    const text = JSON.stringify(view.blocks);
    expect(text).toContain("<#C9>");
    expect(text).not.toContain("<#C10>");
    expect(text).toContain("…and reviews in 15 more such channels.");
  });
});
