// The access rules on their own, with fake ports: no Slack, no database.
import { describe, expect, it, vi } from "vitest";
import type { ReviewerRules as RulesConfig } from "../config/config.js";
import {
  type AccessPorts,
  clickFromAnnouncement,
  clickFromFlowMessage,
  clickFromReviewMessage,
  clickMayDecide,
  type FlowRequestFacts,
  homeListsReview,
  mayActOnReview,
  mayAnswerFlowRequest,
  mayAnswerFlowRequestFromHome,
  mayApproveFromHome,
  mayReassignReview,
  mayReceiveReassignment,
  maySeeFlowRequest,
  maySeeRun,
  mayStopRun,
  type Person,
  type ReviewerPort,
  type ReviewOfRun,
  reviewerGate,
  visibleRun,
} from "./access.js";

const run = { id: "e1", crewName: "research", userId: "USTARTER", channelId: "CRUN", teamId: "T1", enterpriseId: null };
const review = (over: Partial<ReviewOfRun> = {}): ReviewOfRun => ({
  messageTs: "111.222",
  reassignedTo: null,
  escalatedAt: null,
  escalatedTo: null,
  execution: run,
  ...over,
});

/** Reviewer rules per crew: named users only (groups are the real ReviewerRules' business). */
function reviewers(rules: Record<string, RulesConfig>): ReviewerPort & { teams: unknown[] } {
  const teams: unknown[] = [];
  return {
    teams,
    rulesFor: (crew) => rules[crew],
    mayDecide: async (crew, userId, team) => {
      teams.push(team);
      return !rules[crew] || rules[crew].users.includes(userId);
    },
    isGranted: async (r, userId, team) => {
      teams.push(team);
      const escalated = r.escalatedAt && r.escalatedTo ? r.escalatedTo.split(",") : [];
      return r.reassignedTo === userId || escalated.includes(userId);
    },
  };
}

function members(byChannel: Record<string, string[]> | "unreachable") {
  return {
    isMember: vi.fn(async (channelId: string, userId: string) => {
      if (byChannel === "unreachable") throw new Error("slack is down");
      return byChannel[channelId]?.includes(userId) ?? false;
    }),
  };
}

const editors: RulesConfig = { users: ["UEDITOR"], usergroups: [] };

describe("who may see a run", () => {
  it("its starter, anyone asking from its channel, and its channel's members; nobody else", async () => {
    const ports: AccessPorts = { members: members({ CRUN: ["UMEMBER"] }) };
    expect(await maySeeRun(ports, run, { userId: "USTARTER" })).toBe(true);
    expect(await maySeeRun(ports, run, { userId: "USTRANGER", channelId: "CRUN" })).toBe(true);
    expect(await maySeeRun(ports, run, { userId: "UMEMBER", channelId: "CELSEWHERE" })).toBe(true);
    expect(await maySeeRun(ports, run, { userId: "USTRANGER", channelId: "CELSEWHERE" })).toBe(false);
  });

  it("its starter and its crew's reviewers, without asking Slack for the channel's members", async () => {
    const ports: AccessPorts = { members: members({}), reviewers: reviewers({ research: editors }) };
    expect(await maySeeRun(ports, run, { userId: "UEDITOR" })).toBe(true);
    expect(await maySeeRun(ports, run, { userId: "USTARTER" })).toBe(true);
    expect(ports.members.isMember).not.toHaveBeenCalled();
  });

  it("counts an unreadable channel as no, and says so", async () => {
    const warn = vi.fn();
    const ports: AccessPorts = { members: members("unreachable"), warn };
    expect(await maySeeRun(ports, run, { userId: "UMEMBER" })).toBe(false);
    expect(warn).toHaveBeenCalledWith("could not read the run's channel members", expect.objectContaining({ executionId: "e1" }));
  });

  it("visibleRun: what an unknown id gets for someone who may not see it", async () => {
    const ports: AccessPorts = { members: members({}) };
    expect(await visibleRun(ports, async () => run, { userId: "USTARTER" })).toBe(run);
    expect(await visibleRun(ports, async () => run, { userId: "USTRANGER" })).toBeUndefined();
    expect(await visibleRun(ports, async () => null, { userId: "USTARTER" })).toBeUndefined();
  });
});

describe("asked from another workspace that installed the app", () => {
  // A user id names one person in its own workspace (or Grid org) only: from T2, the run's starter,
  // its reviewers and whoever a review was handed to are strangers unless they are in its channel.
  const from = (teamId: string, enterpriseId?: string): Pick<AccessPorts, "workspace"> => ({ workspace: { teamId, ...(enterpriseId ? { enterpriseId } : {}) } });
  const rules = () => reviewers({ research: editors });

  it("sees a run only from its channel or as a member of it (a Slack Connect channel)", async () => {
    const ports: AccessPorts = { members: members({ CRUN: ["UMEMBER"] }), reviewers: rules(), ...from("T2") };
    expect(await maySeeRun(ports, run, { userId: "USTARTER", channelId: "CELSEWHERE" })).toBe(false);
    expect(await maySeeRun(ports, run, { userId: "UEDITOR", channelId: "CELSEWHERE" })).toBe(false);
    expect(await visibleRun(ports, async () => run, { userId: "USTARTER" })).toBeUndefined();
    expect(await maySeeRun(ports, run, { userId: "USTRANGER", channelId: "CRUN" })).toBe(true);
    expect(await maySeeRun(ports, run, { userId: "UMEMBER", channelId: "CELSEWHERE" })).toBe(true);
    // The same asks from the run's own workspace.
    expect(await maySeeRun({ ...ports, ...from("T1") }, run, { userId: "USTARTER", channelId: "CELSEWHERE" })).toBe(true);
    expect(await maySeeRun({ ...ports, ...from("T1") }, run, { userId: "UEDITOR", channelId: "CELSEWHERE" })).toBe(true);
  });

  it("in an Enterprise Grid org, its other workspaces are the run's own (user ids are org-wide)", async () => {
    const gridRun = { ...run, enterpriseId: "E1" };
    const ports: AccessPorts = { members: members({}), ...from("T2", "E1") };
    expect(await maySeeRun(ports, gridRun, { userId: "USTARTER" })).toBe(true);
    expect(await maySeeRun({ ...ports, ...from("T2", "E2") }, gridRun, { userId: "USTARTER" })).toBe(false);
  });

  it("may not stop it, nor act on its reviews by a grant or the reviewer rules", async () => {
    const ports: AccessPorts = { members: members({}), reviewers: rules(), ...from("T2") };
    expect(await mayStopRun(ports, run, { userId: "USTARTER", channelId: "CELSEWHERE" })).toBe(false);
    expect(await mayStopRun(ports, run, { userId: "UEDITOR", channelId: "CELSEWHERE" })).toBe(false);
    expect(await mayStopRun(ports, run, { userId: "UDAN", channelId: "CELSEWHERE" }, [review({ reassignedTo: "UDAN" })])).toBe(false);
    expect(await mayActOnReview(ports, review({ reassignedTo: "UDAN" }), { userId: "UDAN" })).toBe(false);
    expect(await reviewerGate(ports, review(), "UEDITOR")).toEqual({ allowed: false, who: "<@UEDITOR>" });
    expect(await reviewerGate(ports, review({ reassignedTo: "UDAN" }), "UDAN")).toEqual({ allowed: false, who: "<@UEDITOR>" });
    // Not even from the review's own message in a channel the two share (Slack Connect).
    expect(await clickMayDecide(ports, review(), { userId: "UEDITOR", channelId: "CRUN", messageTs: "111.222" })).toBe(false);
    // From the run's own workspace all of these may.
    const own = { ...ports, ...from("T1") };
    expect(await mayStopRun(own, run, { userId: "USTARTER", channelId: "CELSEWHERE" })).toBe(true);
    expect(await mayStopRun(own, run, { userId: "UEDITOR", channelId: "CELSEWHERE" })).toBe(true);
    expect(await mayActOnReview(own, review({ reassignedTo: "UDAN" }), { userId: "UDAN" })).toBe(true);
    expect(await reviewerGate(own, review(), "UEDITOR")).toEqual({ allowed: true });
  });

  it("a crew without reviewer rules: a member of a channel shared with another organisation sees the run, but decides, hands on and stops nothing", async () => {
    const ports: AccessPorts = { members: members({ CRUN: ["UGUEST"] }), ...from("TPARTNER") };
    const click = { userId: "UGUEST", channelId: "CRUN", messageTs: "111.222" };
    expect(await maySeeRun(ports, run, click)).toBe(true);
    expect(await clickMayDecide(ports, review(), click)).toBe(false);
    expect(await mayActOnReview(ports, review(), click)).toBe(false);
    expect(await mayReassignReview(ports, review(), "UGUEST")).toEqual({ ok: false });
    expect(await mayStopRun(ports, run, click)).toBe(false);
    // The same clicks from the run's own workspace may.
    const own = { ...ports, ...from("T1") };
    expect(await clickMayDecide(own, review(), click)).toBe(true);
    expect(await mayStopRun(own, run, click)).toBe(true);
  });

  it("may not approve from its App Home what another workspace's Home would list", async () => {
    const ports: AccessPorts = { members: members({}), reviewers: rules(), ...from("T2") };
    expect(await mayApproveFromHome(ports, review(), "UEDITOR")).toBe(false);
    expect(await mayApproveFromHome({ ...ports, ...from("T1") }, review(), "UEDITOR")).toBe(true);
    // Home lists a crew without rules for its starter only: nobody else approves from there.
    expect(await mayApproveFromHome({ members: members({ CRUN: ["UMEMBER"] }), ...from("T1") }, review(), "UMEMBER")).toBe(false);
  });
});

describe("who may act on a review", () => {
  it("whoever may see its run, and whoever it was reassigned or escalated to (asked in the run's workspace)", async () => {
    const rules = reviewers({ research: editors });
    const ports: AccessPorts = { members: members({}), reviewers: rules };
    expect(await mayActOnReview(ports, review(), { userId: "USTARTER" })).toBe(true);
    expect(await mayActOnReview(ports, review(), { userId: "UDAN" })).toBe(false);
    expect(await mayActOnReview(ports, review({ reassignedTo: "UDAN" }), { userId: "UDAN" })).toBe(true);
    expect(await mayActOnReview(ports, review({ escalatedAt: new Date(), escalatedTo: "UBOSS" }), { userId: "UBOSS" })).toBe(true);
    // An escalation list only counts once the review was escalated.
    expect(await mayActOnReview(ports, review({ escalatedTo: "UBOSS" }), { userId: "UBOSS" })).toBe(false);
    expect(rules.teams.every((t) => JSON.stringify(t) === JSON.stringify({ teamId: "T1", enterpriseId: null }))).toBe(true);
  });

  it("a click counts only from the review's own message", async () => {
    const ports: AccessPorts = { members: members({}) };
    const found = review();
    expect(clickFromReviewMessage(found, { channelId: "CRUN", messageTs: "111.222" })).toBe(true);
    expect(clickFromReviewMessage(found, { channelId: "CRUN", messageTs: "999.000" })).toBe(false);
    expect(clickFromReviewMessage(found, { channelId: "COTHER", messageTs: "111.222" })).toBe(false);
    expect(clickFromReviewMessage(found, {})).toBe(false);
    expect(clickFromReviewMessage(review({ messageTs: null }), { channelId: "CRUN" })).toBe(false);
    expect(await clickMayDecide(ports, found, { userId: "USTRANGER", channelId: "CRUN", messageTs: "111.222" })).toBe(true);
    expect(await clickMayDecide(ports, found, { userId: "USTARTER", channelId: "CRUN", messageTs: "999.000" })).toBe(false);
  });

  it("the reviewer gate: the crew's rules or the review's grants; without rules anyone", async () => {
    const ports: AccessPorts = { members: members({}), reviewers: reviewers({ research: editors }) };
    expect(await reviewerGate(ports, review(), "UEDITOR")).toEqual({ allowed: true });
    expect(await reviewerGate(ports, review({ reassignedTo: "UDAN" }), "UDAN")).toEqual({ allowed: true });
    expect(await reviewerGate(ports, review(), "USTARTER")).toEqual({ allowed: false, who: "<@UEDITOR>" });
    expect(await reviewerGate({ members: members({}) }, review(), "UANYONE")).toEqual({ allowed: true });
    expect(await reviewerGate({ members: members({}), reviewers: reviewers({}) }, review(), "UANYONE")).toEqual({ allowed: true });
  });

  it("reassigning needs both the gate and access to the run or the review", async () => {
    const ports: AccessPorts = { members: members({ CRUN: ["UEDITOR"] }), reviewers: reviewers({ research: editors }) };
    expect(await mayReassignReview(ports, review(), "UEDITOR")).toEqual({ ok: true });
    expect(await mayReassignReview(ports, review(), "USTARTER")).toEqual({ ok: false, who: "<@UEDITOR>" });
    expect(await mayReassignReview(ports, review({ reassignedTo: "UDAN" }), "UDAN")).toEqual({ ok: true });
    // Without rules: whoever may see the run.
    const open: AccessPorts = { members: members({}) };
    expect(await mayReassignReview(open, review(), "USTARTER")).toEqual({ ok: true });
    expect(await mayReassignReview(open, review(), "USTRANGER")).toEqual({ ok: false });
  });
});

describe("what App Home lists", () => {
  it("with rules: the crew's reviewers and whoever it was handed to; not the starter", async () => {
    const ports = { reviewers: reviewers({ research: editors }) };
    expect(await homeListsReview(ports, review(), "UEDITOR")).toBe(true);
    expect(await homeListsReview(ports, review(), "USTARTER")).toBe(false);
    expect(await homeListsReview(ports, review({ reassignedTo: "UDAN" }), "UDAN")).toBe(true);
  });

  it("without rules: the runs the user started, and reviews handed to them (never a channel they may not be in)", async () => {
    const ports = { reviewers: reviewers({}) };
    expect(await homeListsReview(ports, review(), "USTARTER")).toBe(true);
    expect(await homeListsReview(ports, review(), "UMEMBER")).toBe(false);
    expect(await homeListsReview(ports, review({ escalatedAt: new Date(), escalatedTo: "UBOSS" }), "UBOSS")).toBe(true);
    expect(await homeListsReview({}, review(), "USTARTER")).toBe(true);
    expect(await homeListsReview({}, review(), "UMEMBER")).toBe(false);
  });
});

describe("approving from App Home", () => {
  it("takes access to the run too: a review handed or escalated to someone outside its channel is listed, but not approved there", async () => {
    const ports: AccessPorts = { members: members({ CRUN: ["UIN"] }), reviewers: reviewers({ research: editors }) };
    expect(await homeListsReview(ports, review({ reassignedTo: "UOUT" }), "UOUT")).toBe(true);
    expect(await mayApproveFromHome(ports, review({ reassignedTo: "UOUT" }), "UOUT")).toBe(false);
    expect(await mayApproveFromHome(ports, review({ escalatedAt: new Date(), escalatedTo: "UOUT" }), "UOUT")).toBe(false);
    expect(await mayApproveFromHome(ports, review({ reassignedTo: "UIN" }), "UIN")).toBe(true);
    // The crew's reviewers may see its runs (as /crew status says).
    expect(await mayApproveFromHome(ports, review(), "UEDITOR")).toBe(true);
    // Slack unreachable: no.
    expect(await mayApproveFromHome({ ...ports, members: members("unreachable") }, review({ reassignedTo: "UIN" }), "UIN")).toBe(false);
  });
});

describe("who may be handed a review or a flow request", () => {
  /** People as users.info would tell them: a person of T1 unless said otherwise; "UNKNOWN" cannot be read. */
  function people(over: Record<string, Partial<Person>> = {}) {
    return {
      about: vi.fn(async (userId: string): Promise<Person> => {
        if (userId === "UNKNOWN") throw new Error("slack is down");
        return { isBot: false, deleted: false, teamId: "T1", ...over[userId] };
      }),
    };
  }
  const mayApproveOwn = { required: 1, selfApproval: true };
  const noSelfApproval = { required: 1, selfApproval: false };
  const subject = (policy = mayApproveOwn) => ({ run, policy });

  it("a person of its workspace who may see the run: its channel's members, its crew's reviewers, its starter", async () => {
    const ports: AccessPorts = { members: members({ CRUN: ["UMEMBER"] }), reviewers: reviewers({ research: editors }), people: people() };
    for (const userId of ["UMEMBER", "UEDITOR", "USTARTER"]) expect(await mayReceiveReassignment(ports, subject(), userId), userId).toEqual({ ok: true });
    expect(await mayReceiveReassignment(ports, subject(), "USTRANGER")).toEqual({ ok: false, why: "cannot_see" });
  });

  it("not a bot (nor Slackbot), not a deactivated account, not the starter of a crew that refuses self-approval", async () => {
    const ports: AccessPorts = {
      members: members({ CRUN: ["UBOT", "UGONE", "USLACKBOT"] }),
      people: people({ UBOT: { isBot: true }, UGONE: { deleted: true } }),
    };
    expect(await mayReceiveReassignment(ports, subject(), "UBOT")).toEqual({ ok: false, why: "bot" });
    expect(await mayReceiveReassignment(ports, subject(), "USLACKBOT")).toEqual({ ok: false, why: "bot" });
    expect(await mayReceiveReassignment(ports, subject(), "UGONE")).toEqual({ ok: false, why: "deactivated" });
    expect(await mayReceiveReassignment(ports, subject(noSelfApproval), "USTARTER")).toEqual({ ok: false, why: "self_approval" });
    expect(await mayReceiveReassignment(ports, subject(), "USTARTER")).toEqual({ ok: true });
  });

  it("of its own workspace or Grid org, as Slack names the person: a Slack Connect guest in its channel is not", async () => {
    const ports: AccessPorts = {
      members: members({ CRUN: ["UGUEST", "UORG"] }),
      people: people({ UGUEST: { teamId: "TPARTNER" }, UORG: { teamId: "T2", enterpriseId: "E1" } }),
      // Asked by someone of the run's workspace; the person's own workspace is what counts.
      workspace: { teamId: "T1" },
    };
    expect(await mayReceiveReassignment(ports, subject(), "UGUEST")).toEqual({ ok: false, why: "other_organisation" });
    expect(await mayReceiveReassignment(ports, subject(), "UORG")).toEqual({ ok: false, why: "other_organisation" });
    expect(await mayReceiveReassignment(ports, { run: { ...run, enterpriseId: "E1" }, policy: mayApproveOwn }, "UORG")).toEqual({ ok: true });
  });

  it("what cannot be read refuses it as unknown (and says so): the person, the channel's members, no way to ask", async () => {
    const warn = vi.fn();
    const ports: AccessPorts = { members: members({ CRUN: ["UMEMBER"] }), people: people(), warn };
    expect(await mayReceiveReassignment(ports, subject(), "UNKNOWN")).toEqual({ ok: false, why: "unknown" });
    expect(await mayReceiveReassignment({ ...ports, members: members("unreachable") }, subject(), "UMEMBER")).toEqual({ ok: false, why: "unknown" });
    expect(await mayReceiveReassignment({ members: members({ CRUN: ["UMEMBER"] }) }, subject(), "UMEMBER")).toEqual({ ok: false, why: "unknown" });
    expect(warn).toHaveBeenCalledTimes(2);
  });

  it("a flow request: a person of its workspace (the installation's when it names none) in its channel", async () => {
    const request: FlowRequestFacts = {
      flowName: "content",
      channelId: "CFLOW",
      messageTs: "5.6",
      assigneeUserId: "UASSIGNEE",
      teamId: null,
      enterpriseId: null,
      reassignedTo: null,
      escalatedAt: null,
      escalatedTo: null,
    };
    const ports: AccessPorts = {
      members: members({ CFLOW: ["UMEMBER", "UGUEST", "UBOT"] }),
      people: people({ UGUEST: { teamId: "TPARTNER" }, UBOT: { isBot: true } }),
      installation: { teamId: "T1" },
    };
    expect(await mayReceiveReassignment(ports, { request }, "UMEMBER")).toEqual({ ok: true });
    expect(await mayReceiveReassignment(ports, { request }, "USTRANGER")).toEqual({ ok: false, why: "cannot_see" });
    expect(await mayReceiveReassignment(ports, { request }, "UGUEST")).toEqual({ ok: false, why: "other_organisation" });
    expect(await mayReceiveReassignment(ports, { request }, "UBOT")).toEqual({ ok: false, why: "bot" });
  });
});

describe("flow feedback requests", () => {
  const request: FlowRequestFacts = {
    flowName: "content",
    channelId: "CFLOW",
    messageTs: "5.6",
    assigneeUserId: "UASSIGNEE",
    teamId: "T1",
    enterpriseId: null,
    reassignedTo: null,
    escalatedAt: null,
    escalatedTo: null,
  };
  const flows = {
    mayDecide: async (r: FlowRequestFacts, userId: string) => r.assigneeUserId === userId || r.reassignedTo === userId,
    isWaitingFor: async (r: FlowRequestFacts, userId: string) => r.assigneeUserId === userId || r.reassignedTo === userId,
  };

  it("who may answer: the flow's rules (its port); without flows configured, anyone", async () => {
    const ports: AccessPorts = { members: members({}), flows };
    expect(await mayAnswerFlowRequest(ports, request, "UASSIGNEE")).toBe(true);
    expect(await mayAnswerFlowRequest(ports, { ...request, reassignedTo: "UDAN" }, "UDAN")).toBe(true);
    expect(await mayAnswerFlowRequest(ports, request, "USTRANGER")).toBe(false);
    expect(await mayAnswerFlowRequest({ members: members({}) }, request, "USTRANGER")).toBe(true);
  });

  it("who may see its audit trail: someone asking from its channel, a member of it, its assignee or reviewers", async () => {
    const ports: AccessPorts = { members: members({ CFLOW: ["UMEMBER"] }), flows };
    expect(await maySeeFlowRequest(ports, request, { userId: "USTRANGER", channelId: "CFLOW" })).toBe(true);
    expect(await maySeeFlowRequest(ports, request, { userId: "UASSIGNEE", channelId: "CELSEWHERE" })).toBe(true);
    expect(await maySeeFlowRequest(ports, { ...request, reassignedTo: "UDAN" }, { userId: "UDAN", channelId: "CELSEWHERE" })).toBe(true);
    expect(await maySeeFlowRequest(ports, request, { userId: "UMEMBER", channelId: "CELSEWHERE" })).toBe(true);
    expect(await maySeeFlowRequest(ports, request, { userId: "USTRANGER", channelId: "CELSEWHERE" })).toBe(false);
  });

  it("a flow without reviewer rules (anyone may answer in its channel) does not open its trail to everyone", async () => {
    // The port of a flow with no rules: anyone may answer; Home lists it for its assignee only.
    const open = { mayDecide: async () => true, isWaitingFor: flows.isWaitingFor };
    const ports: AccessPorts = { members: members({ CFLOW: ["UMEMBER"] }), flows: open, workspace: { teamId: "T1" } };
    expect(await mayAnswerFlowRequest(ports, request, "USTRANGER")).toBe(true);
    expect(await maySeeFlowRequest(ports, request, { userId: "USTRANGER", channelId: "CELSEWHERE" })).toBe(false);
    expect(await maySeeFlowRequest(ports, request, { userId: "UMEMBER", channelId: "CELSEWHERE" })).toBe(true);
    expect(await maySeeFlowRequest(ports, request, { userId: "UASSIGNEE" })).toBe(true);
    // Slack unreachable: no, and said.
    const warn = vi.fn();
    expect(await maySeeFlowRequest({ members: members("unreachable"), flows: open, warn }, request, { userId: "UMEMBER" })).toBe(false);
    expect(warn).toHaveBeenCalledOnce();
  });

  it("a flow request is seen and answered in its own workspace only", async () => {
    const ports: AccessPorts = { members: members({ CFLOW: ["UMEMBER"] }), flows, workspace: { teamId: "T2" } };
    for (const userId of ["UASSIGNEE", "UMEMBER"]) expect(await maySeeFlowRequest(ports, request, { userId, channelId: "CFLOW" })).toBe(false);
    expect(ports.members.isMember).not.toHaveBeenCalled();
    expect(await mayAnswerFlowRequest(ports, request, "UASSIGNEE")).toBe(false);
    expect(await mayAnswerFlowRequestFromHome(ports, request, "UASSIGNEE")).toBe(false);
    // Single-workspace mode: requests have no workspace, askers are all in the one.
    expect(await maySeeFlowRequest(ports, { ...request, teamId: null }, { userId: "UASSIGNEE" })).toBe(true);
  });

  it("a request that names no workspace (one bot token, a flow without team:) is the installation's: a guest of a shared channel does not answer it", async () => {
    const installation = { teamId: "T1" };
    const unnamed = { ...request, teamId: null };
    const guest: AccessPorts = { members: members({ CFLOW: ["UGUEST"] }), workspace: { teamId: "TPARTNER" }, installation };
    expect(await mayAnswerFlowRequest(guest, unnamed, "UGUEST")).toBe(false);
    expect(await maySeeFlowRequest(guest, unnamed, { userId: "UGUEST", channelId: "CFLOW" })).toBe(false);
    const own: AccessPorts = { ...guest, workspace: { teamId: "T1" } };
    expect(await mayAnswerFlowRequest(own, unnamed, "UMEMBER")).toBe(true);
  });

  it("from App Home: only a request the Home lists for the user; none without flows", async () => {
    expect(await mayAnswerFlowRequestFromHome({ flows }, request, "UASSIGNEE")).toBe(true);
    expect(await mayAnswerFlowRequestFromHome({ flows }, request, "USTRANGER")).toBe(false);
    expect(await mayAnswerFlowRequestFromHome({}, request, "UASSIGNEE")).toBe(false);
  });

  it("a click counts only from the request's own message, once posted", () => {
    expect(clickFromFlowMessage(request, { channelId: "CFLOW", messageTs: "5.6" })).toBe(true);
    expect(clickFromFlowMessage(request, { channelId: "CFLOW", messageTs: "5.7" })).toBe(false);
    expect(clickFromFlowMessage(request, { channelId: "COTHER", messageTs: "5.6" })).toBe(false);
    expect(clickFromFlowMessage({ ...request, messageTs: null }, { channelId: "CFLOW" })).toBe(false);
  });
});

describe("who may stop a run (the rule of a decision)", () => {
  const ports = (over: Partial<AccessPorts> = {}): AccessPorts => ({ members: members({ CRUN: ["UMEMBER", "UEDITOR"] }), ...over });

  it("its starter, always; without reviewer rules, whoever may see it", async () => {
    expect(await mayStopRun(ports(), run, { userId: "USTARTER", channelId: "CELSEWHERE" })).toBe(true);
    expect(await mayStopRun(ports(), run, { userId: "UMEMBER" })).toBe(true);
    expect(await mayStopRun(ports(), run, { userId: "USTRANGER", channelId: "CELSEWHERE" })).toBe(false);
  });

  it("with reviewer rules: the crew's reviewers and whoever a waiting review was handed to; not other channel members", async () => {
    const p = ports({ reviewers: reviewers({ research: editors }) });
    expect(await mayStopRun(p, run, { userId: "UEDITOR" })).toBe(true);
    expect(await mayStopRun(p, run, { userId: "UMEMBER", channelId: "CRUN" })).toBe(false);
    expect(await mayStopRun(p, run, { userId: "UMEMBER", channelId: "CRUN" }, [review({ reassignedTo: "UMEMBER" })])).toBe(true);
    expect(await mayStopRun(p, run, { userId: "USTARTER" })).toBe(true);
  });

  it("Slack unreachable counts as no", async () => {
    expect(await mayStopRun(ports({ members: members("unreachable") }), run, { userId: "UMEMBER" })).toBe(false);
  });
});

describe("a Stop click comes from the run's announcement", () => {
  const announced = { channelId: "CRUN", threadTs: "100.1", announcementTs: null };
  it("matches the announcement's channel and ts (the thread's parent, or its own ts when it is a reply)", () => {
    expect(clickFromAnnouncement(announced, { channelId: "CRUN", messageTs: "100.1" })).toBe(true);
    expect(clickFromAnnouncement({ ...announced, announcementTs: "100.2" }, { channelId: "CRUN", messageTs: "100.2" })).toBe(true);
    expect(clickFromAnnouncement({ ...announced, announcementTs: "100.2" }, { channelId: "CRUN", messageTs: "100.1" })).toBe(false);
    expect(clickFromAnnouncement(announced, { channelId: "COTHER", messageTs: "100.1" })).toBe(false);
    expect(clickFromAnnouncement(announced, { channelId: "CRUN" })).toBe(false);
    expect(clickFromAnnouncement({ ...announced, threadTs: null }, { channelId: "CRUN", messageTs: "100.1" })).toBe(false);
  });
});
