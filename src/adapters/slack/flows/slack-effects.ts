// The Slack side of flow feedback requests: one Web API call per outbox effect (FlowNotifier, see
// src/outbox/perform.ts), each post carrying its effect id so an interrupted one can be found again.
import type { WebClient } from "@slack/web-api";
import { outcomesOf } from "../../../domain/flow-outcomes.js";
import type { Logger } from "../../../log/log.js";
import { judgeFailure } from "../../../outbox/failures.js";
import type { FlowNotice, FlowNotifier, FlowRequest, FlowRequestContext } from "../../../usecases/ports.js";
import {
  blockTextLength,
  buildRefusedChannelHeader,
  type FlowMessageParams,
  type FlowRequestState,
  flowNoticeText,
  flowOutputNeedsFile,
  flowRequestMessage,
  pendingNotesOf,
  type RefusedChannelFacts,
  type SlackMessage,
  withRefusedHeader,
} from "../blocks/index.js";
import type { SlackClients } from "../clients.js";
import { editFileNeeded, effectMetadata, findPostedMessage, openConversation, safeFilename } from "../notifier.js";

/** Slack's limit of people in a group DM besides the bot. */
const GROUP_DM_MAX = 8;

function flowMessageFor(request: FlowRequest, note?: string, context: FlowRequestContext = {}): SlackMessage {
  return withRefusedHeader(flowRequestMessage(flowParamsFor(request, note, context)), refusedFacts(request));
}

/** Moved to a direct message because Slack refused the flow's channel: the message says so on top. */
function refusedFacts(request: FlowRequest): RefusedChannelFacts | undefined {
  if (!request.movedFrom) return undefined;
  return {
    channelId: request.movedFrom,
    reason: request.movedBecause ?? "",
    subject: { kind: "flow", flowName: request.flowName, methodName: request.methodName ?? undefined },
  };
}

/** What a request's message shows: one place, so the file decision (requestNeedsFile) measures the message as posted. */
function flowParamsFor(request: FlowRequest, note?: string, context: FlowRequestContext = {}): FlowMessageParams {
  const refused = refusedFacts(request);
  const params: FlowMessageParams = {
    ...(refused ? { besides: blockTextLength(buildRefusedChannelHeader(refused).blocks) } : {}),
    ...(context.approvals ? { approvals: context.approvals } : {}),
    ...(context.edit ? { edit: context.edit, editFileAttached: editFileNeeded(request.output, context.edit.text) } : {}),
    requestId: request.id,
    flowName: request.flowName,
    deploymentName: request.deploymentName ?? undefined,
    methodName: request.methodName ?? undefined,
    message: request.message ?? undefined,
    output: request.output,
    emit: outcomesOf(request),
    assigneeUserId: request.assigneeUserId ?? undefined,
    assignedEmail: request.assignedEmail ?? undefined,
    state: request.state as FlowRequestState,
    decidedBy: request.decidedBy ?? undefined,
    outcome: request.outcome ?? undefined,
    feedback: request.feedback ?? undefined,
    note: note ?? request.answerMessage ?? undefined,
    byDeadline: request.decidedByDeadline,
    pendingNotes: pendingNotesOf(request, new Date()),
  };
  return { ...params, outputTruncated: request.fileAttached || flowOutputNeedsFile(params) };
}

export class SlackFlowEffects implements FlowNotifier {
  constructor(
    private readonly clients: SlackClients,
    private readonly log: Logger,
  ) {}

  /** The client of the flow's workspace (the request row's team and Grid org; single-workspace mode has one client). */
  private client(request: Pick<FlowRequest, "teamId" | "enterpriseId">): Promise<WebClient> {
    return this.clients.forTeam(request.teamId ?? "", request.enterpriseId);
  }

  async postRequest(request: FlowRequest, effectId: string, context: FlowRequestContext = {}): Promise<{ ts: string }> {
    const posted = await (await this.client(request)).chat.postMessage({ channel: request.channelId, ...flowMessageFor(request, undefined, context), ...effectMetadata(effectId) });
    return { ts: posted.ts! };
  }

  async attachRequestFile(request: FlowRequest): Promise<void> {
    await this.attach(request, request.output, "", "full output");
  }

  /** A text as a file under the request's message (`suffix` names the version, `what` titles it). */
  private async attach(request: FlowRequest, content: string, suffix: string, what: string): Promise<void> {
    await (await this.client(request)).filesUploadV2({
      channel_id: request.channelId,
      thread_ts: request.messageTs!,
      content,
      filename: `${safeFilename(request.flowName)}-${safeFilename(request.methodName ?? "request")}${suffix}.md`,
      title: `${request.flowName}: ${what}`,
    });
  }

  async updateRequest(request: FlowRequest, context?: FlowRequestContext): Promise<void> {
    if (!request.messageTs) return;
    await (await this.client(request)).chat.update({ channel: request.channelId, ts: request.messageTs, ...flowMessageFor(request, undefined, context) });
  }

  async attachEditedOutput(request: FlowRequest, edit: { by: string; text: string }): Promise<void> {
    await this.attach(request, edit.text, "-edited", "edited version");
  }

  requestNeedsFile(request: FlowRequest, context: FlowRequestContext = {}): boolean {
    return flowOutputNeedsFile(flowParamsFor(request, undefined, context));
  }

  editNeedsFile(request: FlowRequest, edit: { text: string }): boolean {
    return editFileNeeded(request.output, edit.text);
  }

  async postNotice(request: FlowRequest, notice: FlowNotice, effectId: string): Promise<void> {
    await (await this.client(request)).chat.postMessage({
      channel: request.channelId,
      thread_ts: request.messageTs ?? undefined,
      text: flowNoticeText(request, notice),
      ...effectMetadata(effectId),
    });
  }

  async findPosted(request: FlowRequest, threadTs: string | null, effectId: string, since: Date): Promise<string | undefined> {
    return findPostedMessage(await this.client(request), this.log, request.channelId, threadTs, effectId, since);
  }

  /** A direct message with these people (group DM with several; the members of user groups, up to Slack's limit). */
  async openConversation(request: FlowRequest, who: { users: string[]; usergroups: string[] }): Promise<string> {
    const client = await this.client(request);
    const users = new Set(who.users);
    for (const usergroup of who.usergroups) {
      if (users.size >= GROUP_DM_MAX) break;
      const members = await client.usergroups.users
        .list({ usergroup })
        .then((r) => r.users ?? [])
        .catch((err) => {
          this.log.warn("could not read a user group for a direct message", { usergroup, error: (err as { data?: { error?: string } }).data?.error ?? (err as Error).message });
          return [] as string[];
        });
      for (const m of members) users.add(m);
    }
    const list = [...users].slice(0, GROUP_DM_MAX);
    if (!list.length) throw new Error("nobody to send the request to directly");
    return openConversation(client, list);
  }

  /**
   * The Slack user with this e-mail; undefined when Slack says there is none, or refuses the look-up (a
   * missing scope: no retry mends it, and the request is posted without them). A rate limit, a 5xx or no
   * answer is thrown: the outbox tries the post again, look-up first, rather than post it unassigned for good.
   */
  async lookupByEmail(email: string, request: Pick<FlowRequest, "teamId" | "enterpriseId">): Promise<string | undefined> {
    try {
      const found = await (await this.client(request)).users.lookupByEmail({ email });
      return found.user?.id ?? undefined;
    } catch (err) {
      const code = (err as { data?: { error?: string } }).data?.error;
      if (code === "users_not_found") return undefined;
      const verdict = judgeFailure(err);
      if (verdict.kind === "retry" && (verdict.ambiguous || verdict.afterMs !== undefined)) throw err;
      this.log.warn("could not look up the flow request's assignee", { error: code ?? verdict.reason });
      return undefined;
    }
  }
}
