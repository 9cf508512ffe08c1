// homeFor with a fake store and fake rules: which reviews, requests and runs a user's Home lists.
import { describe, expect, it } from "vitest";
import type { HomeStore, PendingReview } from "../store/home.js";
import { homeFor } from "./home-for.js";

const execution = (id: string, over: Record<string, unknown> = {}) => ({
  id,
  crewName: "research",
  userId: "USTARTER",
  channelId: "C1",
  teamId: "T1",
  enterpriseId: null,
  ...over,
});
const pending = (id: string, over: Record<string, unknown> = {}, run = execution(`e-${id}`)) =>
  ({ id, messageTs: "1.1", reassignedTo: null, escalatedAt: null, escalatedTo: null, execution: run, ...over }) as unknown as PendingReview;

function store(reviews: PendingReview[], approved: Record<string, string[]> = {}) {
  const asked: unknown[] = [];
  const fake = {
    pendingReviews: async (opts: { teamId?: string }) => {
      asked.push(opts);
      return reviews.filter((r) => !opts.teamId || r.execution.teamId === opts.teamId);
    },
    approvedBy: async (userId: string, ids: string[]) => new Set(ids.filter((id) => approved[userId]?.includes(id))),
    recentRuns: async (_userId: string, opts: { teamId?: string; limit: number }) => {
      asked.push(opts);
      return [];
    },
  };
  return { fake: fake as unknown as HomeStore, asked };
}

const clock = { now: () => new Date("2026-03-29T01:00:00Z") };
const crews = { usableBy: (teamId?: string) => (teamId === "T2" ? [] : [{ name: "research", channels: ["C1"] }]) };

describe("homeFor", () => {
  it("lists the reviews the user may decide and has not approved yet, the runs of the rules, and the crews", async () => {
    const someone = execution("e-x", { userId: "USOMEONE" });
    const reviews = [pending("mine"), pending("handed", { reassignedTo: "UDAN" }, someone), pending("approved"), pending("other", {}, someone)];
    const { fake } = store(reviews, { USTARTER: ["approved"] });
    // No reviewer rules for the crew: the runs one started, and what was handed to one.
    const access = {
      reviewers: { rulesFor: () => undefined, mayDecide: async () => true, isGranted: async (r: { reassignedTo: string | null }, userId: string) => r.reassignedTo === userId },
    };
    const listing = await homeFor({ store: fake, access, crews, clock, maxRuns: 6 }, "USTARTER");
    expect(listing.reviews.map((r) => r.id)).toEqual(["mine"]);
    expect(listing.crews).toEqual([{ name: "research", channels: ["C1"] }]);
    expect(listing.now).toEqual(clock.now());
    const dan = await homeFor({ store: fake, access, crews, clock, maxRuns: 6 }, "UDAN");
    expect(dan.reviews.map((r) => r.id)).toEqual(["handed"]);
  });

  it("installed in many workspaces: only the asking workspace's reviews, requests and runs", async () => {
    const reviews = [pending("one"), pending("two", {}, execution("e-2", { teamId: "T2" }))];
    const { fake, asked } = store(reviews);
    const flows = {
      waitingFor: async () => [
        { id: "f1", teamId: "T1" },
        { id: "f2", teamId: "T2" },
      ],
    };
    const listing = await homeFor({ store: fake, access: {}, flows, crews, clock, multiWorkspace: true, maxRuns: 6 }, "USTARTER", "T2");
    expect(listing.reviews.map((r) => r.id)).toEqual(["two"]);
    expect(listing.flowRequests.map((r) => r.id)).toEqual(["f2"]);
    expect(listing.crews).toEqual([]);
    expect(asked).toEqual([{ teamId: "T2" }, { teamId: "T2", limit: 6 }]);
    // One workspace: everything, whatever team the event names.
    const single = await homeFor({ store: fake, access: {}, flows, crews, clock, maxRuns: 6 }, "USTARTER", "T2");
    expect(single.reviews.map((r) => r.id)).toEqual(["one", "two"]);
    expect(single.flowRequests.map((r) => r.id)).toEqual(["f1", "f2"]);
  });
});
