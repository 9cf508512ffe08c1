// The access rules of a reply in a thread, with fake ports: no Slack, no database.
import { describe, expect, it } from "vitest";
import type { ReviewerRules as RulesConfig } from "../config/config.js";
import { type AccessPorts, type FlowRequestFacts, replyInReviewThread, replyMayAnswerFlowRequest, replyMayDecide } from "./access.js";

const run = { id: "e1", crewName: "research", userId: "USTARTER", channelId: "CRUN", teamId: "T1", enterpriseId: null, threadTs: "100.000" };
const review = (over: Record<string, unknown> = {}) => ({ messageTs: "111.222", reassignedTo: null, escalatedAt: null, escalatedTo: null, execution: run, ...over });

function ports(rules?: RulesConfig, inChannel: string[] = []): AccessPorts {
  return {
    members: { isMember: async (_channel, userId) => inChannel.includes(userId) },
    ...(rules
      ? {
          reviewers: {
            rulesFor: () => rules,
            mayDecide: async (_crew, userId) => rules.users.includes(userId),
            isGranted: async (r, userId) => r.reassignedTo === userId,
          },
        }
      : {}),
  };
}

describe("a reply in a review's thread", () => {
  it("is in the review's place: its run's thread, or its own message's thread in the direct message it moved to", () => {
    expect(replyInReviewThread(review(), { channelId: "CRUN", threadTs: "100.000" })).toBe(true);
    expect(replyInReviewThread(review(), { channelId: "CRUN", threadTs: "111.222" })).toBe(false);
    expect(replyInReviewThread(review(), { channelId: "COTHER", threadTs: "100.000" })).toBe(false);
    const moved = review({ channelId: "DSTARTER", messageTs: "222.333" });
    expect(replyInReviewThread(moved, { channelId: "DSTARTER", threadTs: "222.333" })).toBe(true);
    // Its old thread no longer decides it, as a click on its old message would not.
    expect(replyInReviewThread(moved, { channelId: "CRUN", threadTs: "100.000" })).toBe(false);
  });

  it("decides only for someone who may act on the run and passes the reviewer rules", async () => {
    const here = { channelId: "CRUN", threadTs: "100.000" };
    expect(await replyMayDecide(ports(), review(), { ...here, userId: "UANYONE" })).toBe(true);
    const editors = { users: ["UEDITOR"], usergroups: [] };
    expect(await replyMayDecide(ports(editors), review(), { ...here, userId: "UEDITOR" })).toBe(true);
    expect(await replyMayDecide(ports(editors), review(), { ...here, userId: "USTARTER" })).toBe(false);
    expect(await replyMayDecide(ports(editors), review({ reassignedTo: "UHANDED" }), { ...here, userId: "UHANDED" })).toBe(true);
    expect(await replyMayDecide(ports(), review(), { channelId: "CRUN", threadTs: "999.000", userId: "UANYONE" })).toBe(false);
    // In the direct message a run moved to: its starter (the DM is not the run's channel).
    const moved = review({ channelId: "DSTARTER", messageTs: "222.333" });
    expect(await replyMayDecide(ports(), moved, { channelId: "DSTARTER", threadTs: "222.333", userId: "USTARTER" })).toBe(true);
    expect(await replyMayDecide(ports(), moved, { channelId: "DSTARTER", threadTs: "222.333", userId: "USTRANGER" })).toBe(false);
  });
});

describe("a reply in a flow request's thread", () => {
  const request: FlowRequestFacts = {
    flowName: "content",
    channelId: "CFLOW",
    messageTs: "300.000",
    assigneeUserId: null,
    teamId: null,
    enterpriseId: null,
    reassignedTo: null,
    escalatedAt: null,
    escalatedTo: null,
  };
  const flowPorts = (allowed: string[]): AccessPorts => ({ ...ports(), flows: { mayDecide: async (_r, userId) => allowed.includes(userId), isWaitingFor: async () => false } });

  it("answers only in the request's own thread, for someone who may answer it", async () => {
    expect(await replyMayAnswerFlowRequest(flowPorts(["UREV"]), request, { channelId: "CFLOW", threadTs: "300.000", userId: "UREV" })).toBe(true);
    expect(await replyMayAnswerFlowRequest(flowPorts(["UREV"]), request, { channelId: "CFLOW", threadTs: "300.000", userId: "UOTHER" })).toBe(false);
    expect(await replyMayAnswerFlowRequest(flowPorts(["UREV"]), request, { channelId: "CFLOW", threadTs: "301.000", userId: "UREV" })).toBe(false);
  });
});
