import { describe, expect, it, vi } from "vitest";
import { silentLogger } from "../log/log.js";
import type { Execution, Review } from "./ports.js";
import { describeReviewers, describeWaitingReviewers, ReviewerRules, reviewGrants } from "./reviewer-rules.js";

const crew = (reviewers?: { users: string[]; usergroups: string[] }) => ({
  config: (name: string) => (name === "research" ? { reviewers } : undefined),
  all: () => [{ reviewers }],
});
const run = { crewName: "research" } as Execution;

function setup(members: Record<string, string[]>, reviewers = { users: ["U1"], usergroups: ["S1"] }) {
  const clock = { t: 0, now: () => new Date(clock.t) };
  const lookups: string[] = [];
  let gate: () => Promise<void> = async () => {};
  const rules = new ReviewerRules({
    crews: crew(reviewers),
    lookup: async (g) => {
      lookups.push(g);
      await gate();
      if (!members[g]) throw new Error("no_such_subteam");
      return members[g]!;
    },
    log: silentLogger,
    clock,
    ttlMs: 1000,
  });
  return { rules, clock, lookups, hold: (p: Promise<void>) => (gate = () => p) };
}

describe("describeWaitingReviewers", () => {
  it("leaves out named users who approved, keeps groups, and names everyone when nobody named is left", () => {
    const rules = { users: ["U1", "U2"], usergroups: ["S1"] };
    expect(describeWaitingReviewers(rules, ["U1"])).toBe("<@U2>, <!subteam^S1>");
    expect(describeWaitingReviewers(rules, [])).toBe("<@U1>, <@U2>, <!subteam^S1>");
    expect(describeWaitingReviewers({ users: ["U1", "U2"], usergroups: [] }, ["U2"])).toBe("<@U1>");
    expect(describeWaitingReviewers({ users: ["U1"], usergroups: [] }, ["U1"])).toBe("<@U1>");
  });
});

describe("ReviewerRules", () => {
  it("allows named users without a lookup and describes who may decide", async () => {
    const { rules, lookups } = setup({ S1: [] });
    expect(await rules.gate(run, "U1")).toEqual({ allowed: true });
    expect(lookups).toEqual([]);
    expect(await rules.gate(run, "U9")).toEqual({ allowed: false, who: "<@U1>, <!subteam^S1>" });
    expect(describeReviewers({ users: [], usergroups: ["S2"] })).toBe("<!subteam^S2>");
  });

  it("allows anyone when the crew has no rules", async () => {
    const rules = new ReviewerRules({ crews: crew(undefined), lookup: async () => [], log: silentLogger });
    expect(await rules.gate(run, "U9")).toEqual({ allowed: true });
  });

  it("caches group members, answers a stale yes at once and refreshes in the background", async () => {
    const members = { S1: ["U2"] };
    const { rules, clock, lookups, hold } = setup(members);
    expect(await rules.mayDecide("research", "U2")).toBe(true);
    expect(await rules.mayDecide("research", "U2")).toBe(true);
    expect(lookups).toHaveLength(1);
    clock.t = 5000; // stale
    let release!: () => void;
    hold(new Promise<void>((r) => (release = r)));
    expect(await rules.mayDecide("research", "U2")).toBe(true); // did not wait on the held lookup
    expect(lookups).toHaveLength(2);
    members.S1 = [];
    release();
  });

  it("refuses only on fresh data, and keeps old members when a lookup fails", async () => {
    const members: Record<string, string[]> = { S1: ["U2"] };
    const { rules, clock, lookups } = setup(members);
    expect(await rules.mayDecide("research", "U3")).toBe(false);
    members.S1 = ["U2", "U3"];
    clock.t = 5000;
    expect(await rules.mayDecide("research", "U3")).toBe(true); // stale no → fresh lookup
    expect(lookups).toHaveLength(2);
    delete members.S1;
    clock.t = 10_000;
    expect(await rules.mayDecide("research", "U4")).toBe(false);
    expect(await rules.mayDecide("research", "U3")).toBe(true);
  });

  it("prefetches configured groups", async () => {
    const { rules, lookups } = setup({ S1: ["U2"] });
    rules.prefetch();
    await vi.waitFor(() => expect(lookups).toEqual(["S1"]));
    expect(await rules.mayDecide("research", "U2")).toBe(true);
    expect(lookups).toEqual(["S1"]);
  });

  it("lets in whoever one review was reassigned to, and its escalation list only once it was escalated", async () => {
    const { rules } = setup({ S1: [], S7: ["U8"] });
    const review = { reassignedTo: null, escalatedAt: null, escalatedTo: "U5,S7" } as Review;
    expect(reviewGrants(review)).toEqual({ users: [], usergroups: [] });
    expect(await rules.gate(run, "U5", review)).toMatchObject({ allowed: false });
    const escalated = { ...review, escalatedAt: new Date() } as Review;
    expect(reviewGrants(escalated)).toEqual({ users: ["U5"], usergroups: ["S7"] });
    expect(await rules.gate(run, "U5", escalated)).toEqual({ allowed: true });
    expect(await rules.gate(run, "U8", escalated)).toEqual({ allowed: true });
    expect(await rules.gate(run, "U9", escalated)).toMatchObject({ allowed: false });
    // Another review of the same crew grants nothing.
    expect(await rules.gate(run, "U5")).toMatchObject({ allowed: false });
    const reassigned = { ...review, reassignedTo: "U6" } as Review;
    expect(await rules.gate(run, "U6", reassigned)).toEqual({ allowed: true });
    expect(await rules.isGranted(reassigned, "U5")).toBe(false);
  });
});
