// The two kinds of decision request as the Slack handlers see them (edit.ts, reassign.ts): a crew's
// review round and a flow's feedback request. Everything a handler does is the same for both; what
// differs is this small port: how one is found and checked against the message clicked, who may act
// on it, how an edited approval and a reassignment reach its use case, and its words.
import { approvalPolicy, selfApprovalRefused } from "../../../domain/approvals.js";
import { flowEditable, outcomeLeaning, outcomesOf } from "../../../domain/flow-outcomes.js";
import { reviewChannel } from "../../../domain/refusals.js";
import {
  type AccessPorts,
  clickFromFlowMessage,
  clickFromReviewMessage,
  clickMayDecide,
  fromItsWorkspace,
  mayAnswerFlowRequest,
  mayReassignReview,
  type ReassignSubject,
  reviewerGate,
} from "../../../usecases/access.js";
import type { FlowRequests } from "../../../usecases/flows.js";
import type { TeamRef } from "../../../usecases/ports.js";
import { within } from "../../../usecases/within.js";
import {
  APPROVE_ACTION,
  EDIT_ACTION,
  EDIT_VIEW_CALLBACK,
  FEEDBACK_ACTION,
  FEEDBACK_BLOCK,
  FLOW_EDIT_ACTION,
  FLOW_EDIT_VIEW_CALLBACK,
  FLOW_FEEDBACK_ACTION,
  FLOW_FEEDBACK_BLOCK,
  FLOW_OUTCOME_ACTION_PREFIX,
  FLOW_REASSIGN_ACTION,
  FLOW_REASSIGN_VIEW_CALLBACK,
  FLOW_SEND_ACTION,
  REASSIGN_ACTION,
  REASSIGN_VIEW_CALLBACK,
  REJECT_ACTION,
} from "../blocks/index.js";
import type { FeatureDeps } from "../deps.js";
import {
  type DecisionKind,
  FLOW_NOT_RECORDED,
  flowReplyFor,
  NOT_RECORDED,
  NOT_THIS_MESSAGE,
  NOT_THIS_REQUEST,
  otherOrganisation,
  replyFor,
  SELF_APPROVAL_REFUSED,
  WORDS,
} from "./replies.js";

/** One decision request, as a handler needs it. */
export interface Subject {
  id: string;
  state: string;
  output: string;
  /** What the edit and reassign modals name it by. */
  title: string;
  /** What the reassign modal names it by, when more than its title. */
  fullTitle?: string;
  round?: number;
}

/** A click or a submission: who, and on which message. */
export interface Place {
  userId: string;
  channelId?: string;
  messageTs?: string;
}

/** A decision button clicked: which, its value (the request's id), the feedback field, who and where. */
export interface Click extends Place {
  actionId: string;
  value: string;
  feedback: string;
}

export interface KindPort<S extends Subject = Subject> {
  kind: DecisionKind;
  ids: { decide: (string | RegExp)[]; feedback: [block: string, action: string]; edit: string; editView: string; reassign: string; reassignView: string };
  words: (typeof WORDS)[DecisionKind] & { notThisMessage: string; notThisReassign: string; editNotPending: string; editExpired: string; notRecorded: string; editEmpty: string };
  find(id: string): Promise<S | null>;
  /** A decision button on its message (Approve, Reject, a flow's outcome, Send feedback): decided through its use case; the private reply, if any. */
  click(c: Click, ports: AccessPorts): Promise<string | undefined>;
  /** Whether the click names the request its message shows. */
  fromMessage(found: S, place: Place): boolean;
  /** That, and (for a review) the user may act on its run. */
  mayAct(found: S, place: Place, ports: AccessPorts): Promise<boolean>;
  /** Why the edit form is not opened for this user (said privately), or undefined; may answer late (undefined then). */
  editRefused(found: S, userId: string, ports: AccessPorts): Promise<string | undefined>;
  /** Approves with an edit (or a note only when nothing changed): the private reply, if any. */
  approveEdited(found: S, place: Required<Place>, note: string, editedOutput: string | undefined): Promise<string | undefined>;
  mayReassign(found: S, userId: string, ports: AccessPorts): Promise<{ ok: true } | { ok: false; who?: string }>;
  /** What the rule on who may be handed it reads (access.ts mayReceiveReassignment). */
  reassignSubject(found: S): ReassignSubject;
  /** Hands it on; undefined when there is nobody to do it. */
  reassign(found: S, p: { by: string; to: string; reason: string }): Promise<"reassigned" | "same_person" | "not_pending" | undefined>;
  /** Where the user is told privately about it later (after a modal): its channel, and thread if any. */
  replyPlace(found: S, channelId?: string): { channel: string; threadTs?: string };
  team(found: S): TeamRef | undefined;
}

/** How long opening the edit form waits for the reviewer rules before opening it anyway (trigger_id lives 3 s). */
const GATE_WAIT_MS = 1_000;

/**
 * Who may decide, when it is known at once (group members are cached): no form for someone refused.
 * A slow answer does not hold the trigger (undefined: open the form); the submission is checked again either way.
 */
async function refusedEarly(refusal: Promise<string | undefined>): Promise<string | undefined> {
  return within(
    refusal.catch(() => undefined),
    GATE_WAIT_MS,
    () => undefined,
  );
}

const EDIT_NOT_PENDING = "This review is not waiting for a decision any more, so there is nothing to edit.";
const EDIT_EXPIRED = "This edit form does not belong to you or to a review message, so nothing was sent to the crew. Click *Edit and approve…* on the review again.";

const STILL_POSTING = "This review is still being posted, so nothing was sent to the crew yet. Please click again in a moment.";
const FLOW_STILL_POSTING = "This feedback request is still being posted, so nothing was sent to the flow yet. Please click again in a moment.";
const FLOW_ACTION_PATTERN = new RegExp(`^(${FLOW_OUTCOME_ACTION_PREFIX}\\d{1,2}|${FLOW_SEND_ACTION})$`);

/**
 * The request, once the ts of its message is recorded: Slack shows a message a moment before the
 * outbox records its ts, and a click in that moment would otherwise be refused as coming from
 * another message. Waits up to about 2 s (the click was acknowledged already).
 */
async function posted<S extends { messageTs: string | null }>(get: (id: string) => Promise<S | null>, id: string): Promise<S | null> {
  let found = await get(id);
  for (let i = 0; found && !found.messageTs && i < 10; i++) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    found = await get(id);
  }
  return found;
}

function reviewKind(deps: FeatureDeps) {
  const reviews = deps.lifecycle.reviews;
  const get = async (id: string) => {
    const found = await reviews.get(id);
    return found && { ...found, title: found.taskName };
  };
  type Found = NonNullable<Awaited<ReturnType<typeof get>>>;
  return {
    kind: "review",
    ids: {
      decide: [APPROVE_ACTION, REJECT_ACTION],
      feedback: [FEEDBACK_BLOCK, FEEDBACK_ACTION],
      edit: EDIT_ACTION,
      editView: EDIT_VIEW_CALLBACK,
      reassign: REASSIGN_ACTION,
      reassignView: REASSIGN_VIEW_CALLBACK,
    },
    words: {
      ...WORDS.review,
      notThisMessage: NOT_THIS_MESSAGE,
      notThisReassign: NOT_THIS_MESSAGE,
      editNotPending: EDIT_NOT_PENDING,
      editExpired: EDIT_EXPIRED,
      notRecorded: NOT_RECORDED,
      editEmpty: "The edited output is empty. To reject the task, close this and use Reject with feedback.",
    },
    find: get,
    async click(c, ports) {
      // The review must be the one this message shows, in a run the clicker may see.
      const found = await posted(get, c.value);
      if (found && !found.messageTs) {
        // Slack shows the message; its ts is not recorded yet (a slow or retaken post): nothing to match it against.
        deps.log.warn("review click before its message was recorded", { userId: c.userId });
        return STILL_POSTING;
      }
      if (found && !fromItsWorkspace(ports, found.execution)) return otherOrganisation("review");
      if (found && !(await clickMayDecide(ports, found, c))) {
        deps.log.warn("review click from another message refused", { userId: c.userId });
        return NOT_THIS_MESSAGE;
      }
      return replyFor(await reviews.decide({ reviewId: c.value, userId: c.userId, approve: c.actionId === APPROVE_ACTION, feedback: c.feedback }), c.userId);
    },
    fromMessage: (found, place) => clickFromReviewMessage(found, place),
    mayAct: (found, place, ports) => clickMayDecide(ports, found, place),
    async editRefused(found, userId, ports) {
      if (!fromItsWorkspace(ports, found.execution)) return otherOrganisation("review");
      if (selfApprovalRefused(approvalPolicy(deps.crews.config(found.execution.crewName)), found.execution.userId, userId)) return SELF_APPROVAL_REFUSED;
      return refusedEarly(reviewerGate(ports, found, userId).then((gate) => (gate.allowed ? undefined : replyFor({ kind: "not_allowed", who: gate.who }))));
    },
    async approveEdited(found, place, note, editedOutput) {
      return replyFor(
        await reviews.decide({ reviewId: found.id, userId: place.userId, approve: true, feedback: note, ...(editedOutput !== undefined ? { editedOutput } : {}) }),
        place.userId,
      );
    },
    mayReassign: (found, userId, ports) => mayReassignReview(ports, found, userId),
    reassignSubject: (found) => ({ run: found.execution, policy: approvalPolicy(deps.crews.config(found.execution.crewName)) }),
    async reassign(found, p) {
      const outcome = await deps.reviewRequests?.reassign({ reviewId: found.id, ...p });
      return outcome && (outcome.kind === "reassigned" || outcome.kind === "same_person" ? outcome.kind : "not_pending");
    },
    // In the direct message the run moved to, replies are not threaded.
    replyPlace: (found, channelId) => ({
      channel: channelId ?? reviewChannel(found, found.execution),
      ...(found.execution.threadTs && !found.channelId ? { threadTs: found.execution.threadTs } : {}),
    }),
    team: (found) => ({ teamId: found.execution.teamId, enterpriseId: found.execution.enterpriseId }),
  } satisfies KindPort<Found>;
}

function flowKind(deps: FeatureDeps, flows: FlowRequests) {
  const get = async (id: string) => {
    const found = await flows.get(id);
    return found && { ...found, title: found.methodName ?? found.flowName, fullTitle: `${found.flowName}${found.methodName ? ` · ${found.methodName}` : ""}` };
  };
  type Found = NonNullable<Awaited<ReturnType<typeof get>>>;
  return {
    kind: "flow",
    ids: {
      decide: [FLOW_ACTION_PATTERN],
      feedback: [FLOW_FEEDBACK_BLOCK, FLOW_FEEDBACK_ACTION],
      edit: FLOW_EDIT_ACTION,
      editView: FLOW_EDIT_VIEW_CALLBACK,
      reassign: FLOW_REASSIGN_ACTION,
      reassignView: FLOW_REASSIGN_VIEW_CALLBACK,
    },
    words: {
      ...WORDS.flow,
      notThisMessage: NOT_THIS_REQUEST,
      notThisReassign: "I can't match this button to a feedback request, so nothing was reassigned.",
      editNotPending: NOT_THIS_REQUEST,
      editExpired: NOT_THIS_REQUEST,
      notRecorded: FLOW_NOT_RECORDED,
      editEmpty: "The edited output is empty. To refuse it, close this and answer with the request's buttons.",
    },
    find: get,
    // Its use case checks the message, the outcome and who may answer; asked from another workspace
    // than the request's, it is not this message's.
    click: async (c, ports) => {
      const found = await posted(get, c.value);
      if (found && !found.messageTs) {
        // As for a review: Slack shows the message before its ts is recorded, and the use case would refuse the click as another message's.
        deps.log.warn("flow request click before its message was recorded", { userId: c.userId });
        return FLOW_STILL_POSTING;
      }
      if (found && !fromItsWorkspace(ports, found)) return otherOrganisation("flow");
      return flowReplyFor(
        await flows.decide({
          requestId: c.value,
          userId: c.userId,
          outcomeIndex: c.actionId === FLOW_SEND_ACTION ? undefined : Number(c.actionId.slice(FLOW_OUTCOME_ACTION_PREFIX.length)),
          feedback: c.feedback,
          channelId: c.channelId,
          messageTs: c.messageTs,
        }),
        c.userId,
      );
    },
    fromMessage: (found, place) => clickFromFlowMessage(found, place),
    mayAct: async (found, place, ports) => clickFromFlowMessage(found, place) && fromItsWorkspace(ports, found),
    async editRefused(found, userId, ports) {
      if (!fromItsWorkspace(ports, found)) return otherOrganisation("flow");
      if (!flowEditable(outcomesOf(found))) return NOT_THIS_REQUEST;
      return refusedEarly(mayAnswerFlowRequest(ports, found, userId).then((may) => (may ? undefined : flowReplyFor(flows.notAllowed(found)))));
    },
    // The flow gets its first approve-like outcome (or, for free-feedback flows, no outcome); its
    // use case checks the message and the reviewer rules.
    async approveEdited(found, place, note, editedOutput) {
      const approveIndex = outcomesOf(found).findIndex((e) => outcomeLeaning(e) === "approve");
      return flowReplyFor(
        await flows.decide({
          requestId: found.id,
          userId: place.userId,
          ...(approveIndex >= 0 ? { outcomeIndex: approveIndex } : {}),
          feedback: note,
          channelId: place.channelId,
          messageTs: place.messageTs,
          ...(editedOutput !== undefined ? { editedOutput } : {}),
        }),
        place.userId,
      );
    },
    mayReassign: async (found, userId, ports) => ((await mayAnswerFlowRequest(ports, found, userId)) ? { ok: true } : { ok: false, who: flows.who(found) }),
    reassignSubject: (found) => ({ request: found }),
    reassign: async (found, p) => {
      const outcome = await flows.reassign({ requestId: found.id, ...p });
      return outcome.kind === "reassigned" || outcome.kind === "same_person" ? outcome.kind : "not_pending";
    },
    replyPlace: (found) => ({ channel: found.channelId }),
    // With its Grid org: an org-wide install is stored under the org, not the workspace (home.ts finds its client by both).
    team: (found) => (found.teamId ? { teamId: found.teamId, enterpriseId: found.enterpriseId } : undefined),
  } satisfies KindPort<Found>;
}

/** Registers handlers once for each kind this app serves (flows when configured). */
export function forEachKind(deps: FeatureDeps, register: <S extends Subject>(port: KindPort<S>) => void): void {
  register(reviewKind(deps));
  if (deps.flows) register(flowKind(deps, deps.flows));
}
