// Every access rule of Crewline in one place, with no Slack in it: who may see a run (its status, its
// audit trail, its content, what App Home lists), who may act on a review (its crew's reviewer rules,
// and whoever it was reassigned or escalated to), who may be handed one, who may see or answer a flow's
// feedback request, and whether a click comes from the message it claims. What the rules need to know
// from outside (channel members, user groups, people's facts) comes through small ports that the Slack
// adapter supplies (adapters/slack/access.ts).
//
// One rule for runs: the run's starter, its reviewers, and the members of its channel may see it, the
// first two only when asking from the run's own workspace (a user id means one person there only).
// Everyone else is told what an unknown id gets. Acting on a run (deciding, editing, handing on,
// stopping) takes someone of its own workspace or Grid org: in a channel shared with another
// organisation (Slack Connect), its people see the run but do not decide it.

import type { ReviewerRules as RulesConfig } from "../config/config.js";
import { type ApprovalPolicy, selfApprovalRefused } from "../domain/approvals.js";
import { reviewChannel } from "../domain/refusals.js";
import type { TeamRef } from "./ports.js";
import { describeReviewers } from "./reviewer-rules.js";

/** Who is asking. */
export interface Asker {
  userId: string;
  /** The channel the request came from (Slack signed it): someone using it there is in it. */
  channelId?: string;
}

/** Whether a user is a member of a channel (may throw when it cannot be known). */
export interface ChannelMembers {
  isMember(channelId: string, userId: string): Promise<boolean>;
}

/** The run facts the rules read. */
export type RunFacts = { id: string; crewName: string; userId: string; channelId: string; teamId: string; enterpriseId: string | null };

/** The review facts the rules read (its reassignment and escalation grants, its message). */
export type ReviewFacts = {
  messageTs: string | null;
  /** The channel of its message when not the run's (the direct message the run moved to when Slack refused its channel). */
  channelId?: string | null;
  reassignedTo: string | null;
  escalatedAt: Date | null;
  escalatedTo: string | null;
};

/** A review with its run. */
export type ReviewOfRun<R extends ReviewFacts = ReviewFacts, E extends RunFacts = RunFacts> = R & { execution: E };

/** A crew's reviewer rules (usecases/reviewer-rules.ts ReviewerRules). */
export interface ReviewerPort {
  rulesFor(crewName: string): RulesConfig | undefined;
  mayDecide(crewName: string, userId: string, team?: TeamRef): Promise<boolean>;
  isGranted(review: Pick<ReviewFacts, "reassignedTo" | "escalatedAt" | "escalatedTo">, userId: string, team?: TeamRef): Promise<boolean>;
}

/** The facts of a flow feedback request the rules read. */
export type FlowRequestFacts = {
  flowName: string;
  channelId: string;
  messageTs: string | null;
  assigneeUserId: string | null;
  teamId: string | null;
  enterpriseId: string | null;
  reassignedTo: string | null;
  escalatedAt: Date | null;
  escalatedTo: string | null;
};

/** A flow's reviewer rules with the request's assignee and grants (usecases/flows.ts FlowRequests). */
export interface FlowAccessPort {
  /** Whether the user may answer the request (its assignee, whoever it was handed to, the flow's reviewers; no rules: anyone). */
  mayDecide(request: FlowRequestFacts, userId: string): Promise<boolean>;
  /** Whether the request is the user's to answer, as App Home lists it (without rules: its assignee, or whoever it was handed to). */
  isWaitingFor(request: FlowRequestFacts, userId: string): Promise<boolean>;
}

/** What Slack says of a person (users.info): the facts a reassignment reads. */
export interface Person {
  isBot: boolean;
  /** Deactivated. */
  deleted: boolean;
  /** Their own workspace (a Slack Connect guest's is another organisation's), and Grid org if any. */
  teamId: string;
  enterpriseId?: string;
}

/** People as Slack knows them. */
export interface People {
  /** The person; throws when it cannot be known (Slack unreachable, unknown id). */
  about(userId: string): Promise<Person>;
}

export interface AccessPorts {
  members: ChannelMembers;
  /** People's facts; unset: nobody can be checked, so nothing is handed on. */
  people?: People;
  /** Reviewer rules; unset: anyone may decide. */
  reviewers?: ReviewerPort;
  flows?: FlowAccessPort;
  /** Told when a fact could not be read (the answer is then no). */
  warn?: (message: string, fields: Record<string, unknown>) => void;
  /**
   * The workspace the request came from, and its Enterprise Grid org (Slack signed them). A user id
   * names one person within a workspace or org only, so from another workspace that installed the app
   * a run's starter, its reviewer rules and its grants say nothing: only its channel counts (a Slack
   * Connect channel the two share). Unset: not known, and taken as the run's own.
   */
  workspace?: { teamId?: string; enterpriseId?: string };
  /**
   * With one bot token, the workspace it is installed in (and its Grid org): the workspace of a row
   * that names none (a flow without `team:`). Unset: not known, and such a row is anyone's.
   */
  installation?: { teamId?: string; enterpriseId?: string };
}

const teamOf = (run: RunFacts): TeamRef => ({ teamId: run.teamId, enterpriseId: run.enterpriseId });

/**
 * Whether the request comes from the workspace of a run or flow request, or from its Enterprise Grid
 * org (whose user ids are org-wide). A row that names no workspace is the installation's.
 */
export function fromItsWorkspace(ports: Pick<AccessPorts, "workspace" | "installation">, its: { teamId: string | null; enterpriseId?: string | null }): boolean {
  const from = ports.workspace;
  const [teamId, enterpriseId] = its.teamId ? [its.teamId, its.enterpriseId] : [ports.installation?.teamId, its.enterpriseId ?? ports.installation?.enterpriseId];
  if (!from?.teamId || !teamId || from.teamId === teamId) return true;
  return !!enterpriseId && from.enterpriseId === enterpriseId;
}

/** Whether the asker may see the run (its status, audit trail and output). Unknown (Slack unreachable) counts as no. */
export async function maySeeRun(ports: AccessPorts, run: RunFacts, asker: Asker): Promise<boolean> {
  return (await seesRun(ports, run, asker)) ?? false;
}

/** maySeeRun, undefined when its channel's members could not be read. */
async function seesRun(ports: AccessPorts, run: RunFacts, asker: Asker): Promise<boolean | undefined> {
  const own = fromItsWorkspace(ports, run);
  if ((own && asker.userId === run.userId) || asker.channelId === run.channelId) return true;
  const { reviewers } = ports;
  if (own && reviewers?.rulesFor(run.crewName) !== undefined && (await reviewers.mayDecide(run.crewName, asker.userId, teamOf(run)).catch(() => false))) return true;
  return memberOf(ports, run.channelId, asker.userId, "could not read the run's channel members", { executionId: run.id });
}

/** Whether the user is a member of the channel; undefined (and told) when Slack cannot say (the rules read it as no). */
async function memberOf(ports: AccessPorts, channelId: string, userId: string, warning: string, fields: Record<string, unknown>): Promise<boolean | undefined> {
  try {
    return await ports.members.isMember(channelId, userId);
  } catch (err) {
    ports.warn?.(warning, { ...fields, err });
    return undefined;
  }
}

/** The run found by `find`, if the asker may see it; undefined otherwise (the same as unknown). */
export async function visibleRun<E extends RunFacts>(ports: AccessPorts, find: () => Promise<E | null>, asker: Asker): Promise<E | undefined> {
  const run = await find();
  if (!run) return undefined;
  return (await maySeeRun(ports, run, asker)) ? run : undefined;
}

/**
 * Whether the asker may act on this review (decide it, edit it, hand it on): whoever it was reassigned
 * or escalated to, and who may see its run, asking from the run's own workspace or Grid org. People
 * of another organisation in a channel shared with it (Slack Connect) see the run but do not decide.
 */
export async function mayActOnReview(ports: AccessPorts, found: ReviewOfRun, asker: Asker): Promise<boolean> {
  if (!fromItsWorkspace(ports, found.execution)) return false;
  if (ports.reviewers && (await ports.reviewers.isGranted(found, asker.userId, teamOf(found.execution)).catch(() => false))) return true;
  return maySeeRun(ports, found.execution, asker);
}

/** Whether a click names the review its message shows: the message (channel, ts) must be the review's (in its run's channel, or in the direct message it moved to). */
export function clickFromReviewMessage(found: ReviewOfRun, click: { channelId?: string; messageTs?: string }): boolean {
  if (!click.channelId || !click.messageTs) return false;
  return reviewChannel(found, found.execution) === click.channelId && found.messageTs === click.messageTs;
}

/** Whether a click on the message at (channelId, messageTs) may decide this review. */
export async function clickMayDecide(ports: AccessPorts, found: ReviewOfRun, click: { userId: string; channelId?: string; messageTs?: string }): Promise<boolean> {
  if (!clickFromReviewMessage(found, click)) return false;
  return mayActOnReview(ports, found, { userId: click.userId, channelId: click.channelId });
}

/**
 * Whether the asker may stop a run (or stop following it): its starter, or whoever may decide its
 * reviews, by the rule of a decision: whoever a review of it waiting for a decision was handed or
 * escalated to, and otherwise the crew's reviewer rules and access to the run (without rules, anyone
 * who may see the run), asking from its own workspace or Grid org. Unknown (Slack unreachable) counts as no.
 */
export async function mayStopRun(ports: AccessPorts, run: RunFacts, asker: Asker, openReviews: readonly ReviewFacts[] = []): Promise<boolean> {
  if (!fromItsWorkspace(ports, run)) return false;
  if (asker.userId === run.userId) return true;
  const { reviewers } = ports;
  const team = teamOf(run);
  for (const review of openReviews) if (reviewers && (await reviewers.isGranted(review, asker.userId, team).catch(() => false))) return true;
  if (reviewers?.rulesFor(run.crewName) !== undefined && !(await reviewers.mayDecide(run.crewName, asker.userId, team).catch(() => false))) return false;
  return maySeeRun(ports, run, asker);
}

/** Whether a click names the run its message announces: the message (channel, ts) must be the run's announcement. */
export function clickFromAnnouncement(
  run: Pick<RunFacts, "channelId"> & { threadTs: string | null; announcementTs: string | null },
  click: { channelId?: string; messageTs?: string },
): boolean {
  const ts = run.announcementTs ?? run.threadTs;
  return !!ts && !!click.channelId && click.channelId === run.channelId && click.messageTs === ts;
}

/** Whether the user passes the crew's reviewer rules for this review (or whoever it was handed to); `who` says who does. */
export async function reviewerGate(ports: AccessPorts, found: ReviewOfRun, userId: string): Promise<{ allowed: true } | { allowed: false; who: string }> {
  const { reviewers } = ports;
  const rules = reviewers?.rulesFor(found.execution.crewName);
  if (!reviewers || !rules) return { allowed: true };
  const team = teamOf(found.execution);
  const own = fromItsWorkspace(ports, found.execution);
  if (own && ((await reviewers.isGranted(found, userId, team)) || (await reviewers.mayDecide(found.execution.crewName, userId, team)))) return { allowed: true };
  return { allowed: false, who: describeReviewers(rules) };
}

/** Whether the user may hand this review on: the same rule as deciding it (the reviewer rules, and access to the run or the review). */
export async function mayReassignReview(ports: AccessPorts, found: ReviewOfRun, userId: string): Promise<{ ok: true } | { ok: false; who?: string }> {
  const gate = await reviewerGate(ports, found, userId);
  if (!gate.allowed) return { ok: false, who: gate.who };
  return (await mayActOnReview(ports, found, { userId })) ? { ok: true } : { ok: false };
}

/**
 * Whether App Home lists this pending review for the user: reassigned or escalated to them; else, by
 * the crew's reviewer rules, or, for crews without rules, the runs they started (so nobody sees
 * reviews from channels they may not be in).
 */
export async function homeListsReview(ports: Pick<AccessPorts, "reviewers">, found: ReviewOfRun, userId: string): Promise<boolean> {
  const { reviewers } = ports;
  const team = teamOf(found.execution);
  if (reviewers && (await reviewers.isGranted(found, userId, team))) return true;
  const rules = reviewers?.rulesFor(found.execution.crewName);
  return rules ? reviewers!.mayDecide(found.execution.crewName, userId, team) : found.execution.userId === userId;
}

/**
 * Whether the user may approve this review from App Home: only one their App Home lists, in the
 * workspace it is in, and of a run they may see. A review handed or escalated to someone outside its
 * run's channel is listed for them without its content (homeFor): its output is not theirs to read.
 */
export async function mayApproveFromHome(ports: AccessPorts, found: ReviewOfRun, userId: string): Promise<boolean> {
  return fromItsWorkspace(ports, found.execution) && (await homeListsReview(ports, found, userId)) && maySeeRun(ports, found.execution, { userId });
}

/** Whether a click names the flow request its message shows. */
export function clickFromFlowMessage(request: Pick<FlowRequestFacts, "channelId" | "messageTs">, click: { channelId?: string; messageTs?: string }): boolean {
  return !!request.messageTs && !!click.channelId && request.channelId === click.channelId && request.messageTs === click.messageTs;
}

/** Whether the user may answer (or hand on) a flow request. */
export async function mayAnswerFlowRequest(ports: AccessPorts, request: FlowRequestFacts, userId: string): Promise<boolean> {
  if (!fromItsWorkspace(ports, request)) return false;
  return !ports.flows || ports.flows.mayDecide(request, userId);
}

/** Whether the user may answer a flow request from App Home: only one App Home lists for them. */
export async function mayAnswerFlowRequestFromHome(ports: Pick<AccessPorts, "flows" | "workspace">, request: FlowRequestFacts, userId: string): Promise<boolean> {
  return !!ports.flows && fromItsWorkspace(ports, request) && ports.flows.isWaitingFor(request, userId);
}

/**
 * Whether the asker may see a flow request's audit trail: the rule of runs, in the request's own
 * workspace only: the members of its channel, its assignee (and whoever it was handed or escalated
 * to), and the flow's reviewers. A flow without reviewer rules lets anyone answer in its channel, but
 * not everyone everywhere read its trail.
 */
export async function maySeeFlowRequest(ports: AccessPorts, request: FlowRequestFacts, asker: Asker): Promise<boolean> {
  return (await seesFlowRequest(ports, request, asker)) ?? false;
}

/** maySeeFlowRequest, undefined when its channel's members could not be read. */
async function seesFlowRequest(ports: AccessPorts, request: FlowRequestFacts, asker: Asker): Promise<boolean | undefined> {
  if (!fromItsWorkspace(ports, request)) return false;
  if (asker.channelId === request.channelId) return true;
  if (ports.flows && (await ports.flows.isWaitingFor(request, asker.userId).catch(() => false))) return true;
  return memberOf(ports, request.channelId, asker.userId, "could not read the flow request's channel members", { flow: request.flowName });
}

/** What a reassignment hands on: a crew review of a run (with its crew's approval rules), or a flow request. */
export type ReassignSubject = { run: RunFacts; policy: ApprovalPolicy } | { request: FlowRequestFacts };

/** Why someone may not be handed a review or flow request; `unknown`: Slack could not say. */
export type ReassignRefusal = "unknown" | "bot" | "deactivated" | "other_organisation" | "self_approval" | "cannot_see";

/** Slackbot: a person to users.info (is_bot false), but nobody to hand a review to. */
const SLACKBOT = "USLACKBOT";

/**
 * Whether a review or flow request may be handed to this person: someone who could then act on it.
 * A person (not a bot), active, of its own workspace or Grid org (a Slack Connect guest sees it but may
 * not decide it), who may see it by the rules above (the run's starter, its crew's reviewers or its
 * channel's members; a flow request's channel members), and not the run's starter when its crew
 * refuses self-approval (they could never approve it). Asked as if from their own workspace, as
 * Slack names it. What cannot be read refuses it: nobody is handed what they might not act on.
 */
export async function mayReceiveReassignment(ports: AccessPorts, subject: ReassignSubject, userId: string): Promise<{ ok: true } | { ok: false; why: ReassignRefusal }> {
  const refused = (why: ReassignRefusal) => ({ ok: false as const, why });
  let person: Person;
  try {
    if (!ports.people) throw new Error("no way to read people's facts");
    person = await ports.people.about(userId);
  } catch (err) {
    ports.warn?.("could not read the person a request would be handed to", { userId, err });
    return refused("unknown");
  }
  if (person.isBot || userId === SLACKBOT) return refused("bot");
  if (person.deleted) return refused("deactivated");
  const asThem: AccessPorts = { ...ports, workspace: { teamId: person.teamId, enterpriseId: person.enterpriseId } };
  if (!fromItsWorkspace(asThem, "run" in subject ? subject.run : subject.request)) return refused("other_organisation");
  if ("run" in subject && selfApprovalRefused(subject.policy, subject.run.userId, userId)) return refused("self_approval");
  const sees = "run" in subject ? await seesRun(asThem, subject.run, { userId }) : await seesFlowRequest(asThem, subject.request, { userId });
  if (sees === undefined) return refused("unknown");
  return sees ? { ok: true } : refused("cannot_see");
}

/** A reply in a thread: who wrote it, where. */
type Reply = { userId: string; channelId: string; threadTs: string };
/** A review with its run's thread, where replies about it are written. */
type ReviewInThread = ReviewOfRun<ReviewFacts, RunFacts & { threadTs: string | null }>;

/**
 * Whether a reply in the thread (channelId, threadTs) is in the review's place, as a click must be on
 * its message: the thread of its run in the run's channel, or, once the run moved to a direct message,
 * the thread of the review's own message there.
 */
export function replyInReviewThread(found: ReviewInThread, reply: Omit<Reply, "userId">): boolean {
  if (found.channelId && found.channelId !== found.execution.channelId) return found.channelId === reply.channelId && found.messageTs === reply.threadTs;
  return found.execution.channelId === reply.channelId && found.execution.threadTs === reply.threadTs;
}

/**
 * Whether a reply may decide this review: in its place, from someone who may act on it and passes
 * the reviewer rules (the rules of a click). Anyone else's reply is ignored.
 */
export async function replyMayDecide(ports: AccessPorts, found: ReviewInThread, reply: Reply): Promise<boolean> {
  if (!replyInReviewThread(found, reply)) return false;
  if (!(await mayActOnReview(ports, found, { userId: reply.userId, channelId: reply.channelId }))) return false;
  return (await reviewerGate(ports, found, reply.userId).catch(() => ({ allowed: false }))).allowed;
}

/** Whether a reply may answer a flow request: in the thread of its message, from someone who may answer it. */
export async function replyMayAnswerFlowRequest(ports: AccessPorts, request: FlowRequestFacts, reply: Reply): Promise<boolean> {
  if (!clickFromFlowMessage(request, { channelId: reply.channelId, messageTs: reply.threadTs })) return false;
  return mayAnswerFlowRequest(ports, request, reply.userId).catch(() => false);
}
