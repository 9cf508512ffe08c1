// Every Slack effect of flow feedback requests, behind one small interface, so that they can move onto
// a durable outbox later without touching the use cases. Restart safety for now: the request row's
// postClaimedAt claim (like reviews), retaken by the recovery sweep when stale.
import type { FlowRequest } from "../generated/prisma/client.js";
import type { Logger } from "../log.js";
import { type FlowRequestState, flowRequestMessage, outputNeedsFile, type SlackMessage } from "../slack/blocks/index.js";
import type { SlackClients } from "../slack/clients.js";

export interface FlowSlackEffects {
  /** Posts the request message in the flow's channel (and the full output as a file when long). */
  postRequest(request: FlowRequest, flowLabel?: string): Promise<{ ts: string; fileAttached: boolean }>;
  /** Rewrites the request message in place (decision, platform answer, closing reason). */
  updateRequest(request: FlowRequest, note?: string): Promise<void>;
  /** A reminder as a reply under the request message. */
  remind(request: FlowRequest, text: string): Promise<void>;
  /** A private note to the clicker (in the flow's workspace, `teamId`, when the app is installed in many). */
  tellUser(channel: string, user: string, text: string, teamId?: string | null): Promise<void>;
  /** The Slack user id with this e-mail (in workspace `teamId` when given), or undefined when there is none. */
  lookupByEmail(email: string, teamId?: string | null): Promise<string | undefined>;
}

export function flowMessageFor(request: FlowRequest, note?: string): SlackMessage {
  return flowRequestMessage({
    requestId: request.id,
    flowName: request.flowName,
    deploymentName: request.deploymentName ?? undefined,
    methodName: request.methodName ?? undefined,
    message: request.message ?? undefined,
    output: request.output,
    emit: Array.isArray(request.emit) ? (request.emit as string[]) : [],
    assigneeUserId: request.assigneeUserId ?? undefined,
    assignedEmail: request.assignedEmail ?? undefined,
    state: request.state as FlowRequestState,
    decidedBy: request.decidedBy ?? undefined,
    outcome: request.outcome ?? undefined,
    feedback: request.feedback ?? undefined,
    note: note ?? request.answerMessage ?? undefined,
    outputTruncated: outputNeedsFile(request.output),
  });
}

const safeFilename = (name: string) =>
  name
    .replace(/[^A-Za-z0-9._-]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 60) || "output";

export class SlackFlowEffects implements FlowSlackEffects {
  constructor(
    private readonly clients: SlackClients,
    private readonly log: Logger,
  ) {}

  /** The client of the flow's workspace (the request row's team; single-workspace mode has one client). */
  private client(teamId: string | null | undefined) {
    return this.clients.forTeam(teamId ?? "");
  }

  async postRequest(request: FlowRequest): Promise<{ ts: string; fileAttached: boolean }> {
    const client = await this.client(request.teamId);
    const posted = await client.chat.postMessage({ channel: request.channelId, ...flowMessageFor(request) });
    const fileAttached = outputNeedsFile(request.output);
    if (fileAttached) {
      await client.filesUploadV2({
        channel_id: request.channelId,
        thread_ts: posted.ts!,
        content: request.output,
        filename: `${safeFilename(request.flowName)}-${safeFilename(request.methodName ?? "request")}.md`,
        title: `${request.flowName}: full output`,
      });
    }
    return { ts: posted.ts!, fileAttached };
  }

  async updateRequest(request: FlowRequest, note?: string): Promise<void> {
    if (!request.messageTs) return;
    await (await this.client(request.teamId)).chat.update({ channel: request.channelId, ts: request.messageTs, ...flowMessageFor(request, note) });
  }

  async remind(request: FlowRequest, text: string): Promise<void> {
    await (await this.client(request.teamId)).chat.postMessage({ channel: request.channelId, thread_ts: request.messageTs ?? undefined, text });
  }

  async tellUser(channel: string, user: string, text: string, teamId?: string | null): Promise<void> {
    await (await this.client(teamId)).chat.postEphemeral({ channel, user, text });
  }

  async lookupByEmail(email: string, teamId?: string | null): Promise<string | undefined> {
    try {
      const found = await (await this.client(teamId)).users.lookupByEmail({ email });
      return found.user?.id ?? undefined;
    } catch (err) {
      const code = (err as { data?: { error?: string } }).data?.error;
      if (code !== "users_not_found") this.log.warn("could not look up the flow request's assignee", { error: code ?? (err as Error).message });
      return undefined;
    }
  }
}
