// homeFor with a fake store and fake rules: which reviews, requests and runs a user's Home lists.
import { describe, expect, it, vi } from "vitest";
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
/** Channel members by channel; a channel set to "slow" never answers. */
function members(byChannel: Record<string, string[] | "slow">) {
  return {
    isMember: vi.fn((channelId: string, userId: string) => {
      const users = byChannel[channelId];
      return users === "slow" ? new Promise<boolean>(() => undefined) : Promise.resolve(users?.includes(userId) ?? false);
    }),
  };
}
const crews = { usableBy: (teamId?: string) => (teamId === "T2" ? [] : [{ name: "research", channels: ["C1"] }]) };

describe("homeFor", () => {
  it("lists the reviews the user may decide and has not approved yet, the runs of the rules, and the crews", async () => {
    const someone = execution("e-x", { userId: "USOMEONE" });
    const reviews = [pending("mine"), pending("handed", { reassignedTo: "UDAN" }, someone), pending("approved"), pending("other", {}, someone)];
    const { fake } = store(reviews, { USTARTER: ["approved"] });
    // No reviewer rules for the crew: the runs one started, and what was handed to one.
    const access = {
      members: members({ C1: ["UDAN"] }),
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
    const listing = await homeFor({ store: fake, access: { members: members({}) }, flows, crews, clock, multiWorkspace: true, maxRuns: 6 }, "USTARTER", "T2");
    expect(listing.reviews.map((r) => r.id)).toEqual(["two"]);
    expect(listing.flowRequests.map((r) => r.id)).toEqual(["f2"]);
    expect(listing.crews).toEqual([]);
    expect(asked).toEqual([{ teamId: "T2" }, { teamId: "T2", limit: 6 }]);
    // One workspace: everything, whatever team the event names.
    const single = await homeFor({ store: fake, access: { members: members({}) }, flows, crews, clock, maxRuns: 6 }, "USTARTER", "T2");
    expect(single.reviews.map((r) => r.id)).toEqual(["one", "two"]);
    expect(single.flowRequests.map((r) => r.id)).toEqual(["f1", "f2"]);
  });

  it("lists without their content the reviews handed or escalated to someone who may not see their runs (or whose channel is not read in time)", async () => {
    const someone = (id: string, channelId: string) => execution(id, { userId: "USOMEONE", channelId });
    const reviews = [
      pending("in", { reassignedTo: "UDAN" }, someone("e-in", "CIN")),
      pending("out", { reassignedTo: "UDAN" }, someone("e-out", "COUT")),
      pending("escalated", { escalatedAt: new Date(), escalatedTo: "UDAN" }, someone("e-esc", "COUT")),
      pending("slow", { reassignedTo: "UDAN" }, someone("e-slow", "CSLOW")),
      // Escalated to a user group Dan is in: not to him by name.
      pending("group", { escalatedAt: new Date(), escalatedTo: "S0EDITORS" }, someone("e-group", "COUT")),
    ];
    const { fake } = store(reviews);
    const access = {
      members: members({ CIN: ["UDAN"], COUT: [], CSLOW: "slow" }),
      reviewers: {
        rulesFor: () => undefined,
        mayDecide: async () => true,
        isGranted: async (r: { reassignedTo: string | null; escalatedTo: string | null }, userId: string) =>
          r.reassignedTo === userId || r.escalatedTo === userId || r.escalatedTo === "S0EDITORS",
      },
    };
    const dan = await homeFor({ store: fake, access, crews, clock, maxRuns: 6, seeWaitMs: 50 }, "UDAN");
    expect(dan.reviews.map((r) => r.id)).toEqual(["in"]);
    expect(dan.withheld).toEqual([{ channelId: "COUT", why: "handed" }, { channelId: "COUT", why: "escalated" }, { channelId: "CSLOW", why: "handed" }, { channelId: "COUT" }]);
    // Asked at once for every review listed (the cache behind the port reads a channel once).
    expect(access.members.isMember.mock.calls.map(([channel]) => channel).sort()).toEqual(["CIN", "COUT", "COUT", "COUT", "CSLOW"]);
  });
});
