import { describe, expect, it } from "vitest";
import type { Execution } from "../../usecases/ports.js";
import { UNINSTALLED_NOTE } from "../../usecases/workspaces.js";
import { announcementFor } from "./notifier.js";

const run = (patch: Partial<Execution>): Execution => ({
  id: "00000000-0000-4000-8000-000000000001",
  kickoffId: "k-1",
  crewName: "research",
  teamId: "T0ONE",
  enterpriseId: null,
  channelId: "C0ONE",
  threadTs: "1.0",
  announcementTs: null,
  userId: "U0ALICE",
  inputs: { topic: "tides" },
  state: "running",
  requestId: "r-1",
  webhookSecret: "s",
  humanInputToken: null,
  webhooks: false,
  progressTs: null,
  output: null,
  error: null,
  completionTs: null,
  createdAt: new Date(0),
  updatedAt: new Date(0),
  startedAt: new Date(0),
  finishedAt: null,
  nextPollAt: new Date(0),
  pollBackoffMs: 2000,
  movedTo: null,
  movedBecause: null,
  streamTs: null,
  streamShown: null,
  streamStoppedAt: null,
  earlyTs: null,
  earlyStepAt: null,
  movedAt: null,
  stoppedBy: null,
  stopClaimedAt: null,
  stopClaimedBy: null,
  leaseOwner: null,
  leaseExpiresAt: null,
  notFoundSince: null,
  endSeenAt: null,
  ...patch,
});

describe("announcementFor", () => {
  it("shows a run stopped by an uninstall as lost, with the reason (not as still running)", () => {
    const text = JSON.stringify(announcementFor(run({ state: "uninstalled", error: UNINSTALLED_NOTE, finishedAt: new Date(60_000) })));
    expect(text).toContain("Lost track");
    expect(text).toContain("removed from this workspace");
    expect(text).not.toContain("Running");
  });
});
