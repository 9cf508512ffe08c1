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

type Narrowing = { userId: string; ruledCrews: readonly string[]; crews: readonly string[]; escalatedTo: readonly string[] };

/** What the store's SQL narrows to (store/home.ts pendingReviews), on the fake's rows. */
const mayBeTheirs = (r: PendingReview, n: Narrowing) =>
  r.reassignedTo === n.userId ||
  (r.execution.userId === n.userId && !n.ruledCrews.includes(r.execution.crewName)) ||
  n.crews.includes(r.execution.crewName) ||
  (!!r.escalatedAt && !!r.escalatedTo && n.escalatedTo.includes(r.escalatedTo));

function store(reviews: PendingReview[], approved: Record<string, string[]> = {}) {
  const asked: unknown[] = [];
  const inTeam = (teamId?: string) => reviews.filter((r) => !teamId || r.execution.teamId === teamId);
  const distinct = <T>(rows: T[]) => [...new Map(rows.map((row) => [JSON.stringify(row), row])).values()];
  const fake = {
    pendingKinds: async (opts: { teamId?: string }) => {
      asked.push({ kinds: opts });
      const rows = inTeam(opts.teamId);
      return {
        crews: distinct(rows.map((r) => ({ crewName: r.execution.crewName, teamId: r.execution.teamId, enterpriseId: r.execution.enterpriseId }))),
        escalations: distinct(
          rows.filter((r) => r.escalatedAt && r.escalatedTo).map((r) => ({ escalatedTo: r.escalatedTo!, teamId: r.execution.teamId, enterpriseId: r.execution.enterpriseId })),
        ),
      };
    },
    pendingReviews: async (opts: { teamId?: string; for: Narrowing }) => {
      asked.push(opts);
      return inTeam(opts.teamId).filter((r) => mayBeTheirs(r, opts.for));
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
    // Without reviewer rules, the reviews of the runs one started (or handed to one) only.
    expect(asked).toEqual([
      { teamId: "T2", for: { userId: "USTARTER", ruledCrews: [], crews: [], escalatedTo: [] } },
      { teamId: "T2", limit: 6 },
    ]);
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

  it("reads only the reviews that may be the user's: the rules asked once per crew and escalation list (with its runs' workspace), not once per review", async () => {
    const run = (id: string, crewName: string, over: Record<string, unknown> = {}) => execution(id, { crewName, userId: "USOMEONE", ...over });
    const escalated = (to: string) => ({ escalatedAt: new Date(), escalatedTo: to });
    const reviews = [
      // Dan started it, but its crew has rules that do not name him.
      pending("started-ruled", {}, run("e1", "research", { userId: "UDAN" })),
      // Dan started it, and its crew has no rules.
      pending("started-free", {}, run("e2", "writer", { userId: "UDAN" })),
      // Of a crew whose rules name Dan's group: 50 of them, in two workspaces.
      ...Array.from({ length: 50 }, (_, i) => pending(`legal-${i}`, {}, run(`e-l${i}`, "legal", { teamId: i % 2 ? "T1" : "T2", enterpriseId: "E1" }))),
      pending("escalated-group", escalated("U0OTHER,S0ONCALL"), run("e3", "research")),
      pending("escalated-other", escalated("U0OTHER"), run("e4", "research")),
      pending("named-not-escalated", { escalatedTo: "UDAN" }, run("e5", "research")),
      pending("someone-else", {}, run("e6", "writer")),
    ];
    const { fake, asked } = store(reviews);
    const groups: Record<string, string[]> = { S0LEGAL: ["UDAN"], S0ONCALL: ["UDAN"] };
    const rules: Record<string, { users: string[]; usergroups: string[] }> = { research: { users: ["UBOB"], usergroups: [] }, legal: { users: [], usergroups: ["S0LEGAL"] } };
    const allows = (r: { users: string[]; usergroups: string[] }, userId: string) => r.users.includes(userId) || r.usergroups.some((g) => groups[g]?.includes(userId));
    const reviewers = {
      rulesFor: (crewName: string) => rules[crewName],
      mayDecide: vi.fn(async (crewName: string, userId: string, _team?: unknown) => !rules[crewName] || allows(rules[crewName]!, userId)),
      isGranted: vi.fn(async (r: { reassignedTo: string | null; escalatedAt: Date | null; escalatedTo: string | null }, userId: string, _team?: unknown) => {
        const ids = r.escalatedAt && r.escalatedTo ? r.escalatedTo.split(",") : [];
        return r.reassignedTo === userId || allows({ users: ids.filter((id) => !id.startsWith("S")), usergroups: ids.filter((id) => id.startsWith("S")) }, userId);
      }),
    };
    const access = { members: members({ C1: ["UDAN"] }), reviewers };
    const listing = await homeFor({ store: fake, access, crews, clock, maxRuns: 6 }, "UDAN");

    expect(asked[1]).toEqual({ for: { userId: "UDAN", ruledCrews: ["research", "legal"], crews: ["legal"], escalatedTo: ["U0OTHER,S0ONCALL"] } });
    expect(listing.reviews.map((r) => r.id).sort()).toEqual(["escalated-group", "started-free", ...Array.from({ length: 50 }, (_, i) => `legal-${i}`)].sort());
    // Each crew asked about once per workspace its pending reviews are in, with that workspace, before the rules decide each review read.
    const legalAsked = reviewers.mayDecide.mock.calls.filter(([crewName]) => crewName === "legal");
    expect(legalAsked.slice(0, 2).map(([, , team]) => team)).toEqual([
      { teamId: "T2", enterpriseId: "E1" },
      { teamId: "T1", enterpriseId: "E1" },
    ]);
    expect(reviewers.isGranted.mock.calls[0]![2]).toEqual({ teamId: "T1", enterpriseId: null });
  });
});
