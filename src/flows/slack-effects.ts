// Every Slack effect of flow feedback requests, behind one small interface, so that they can move onto
// a durable outbox later without touching the use cases. Restart safety for now: the request row's
// postClaimedAt claim (like reviews), retaken by the recovery sweep when stale.
import type { WebClient } from "@slack/web-api";
import type { TimeoutAction } from "../config.js";
import type { FlowRequest } from "../generated/prisma/client.js";
import type { Logger } from "../log.js";
import { type FlowRequestState, flowRequestMessage, outputNeedsFile, pendingReviewNotes, type SlackMessage } from "../slack/blocks/index.js";

export interface FlowSlackEffects {
  /** Posts the request message in the flow's channel (and the full output as a file when long). */
  postRequest(request: FlowRequest, flowLabel?: string): Promise<{ ts: string; fileAttached: boolean }>;
  /** Rewrites the request message in place (decision, platform answer, closing reason). */
  updateRequest(request: FlowRequest, note?: string): Promise<void>;
  /** A reminder as a reply under the request message. */
  remind(request: FlowRequest, text: string): Promise<void>;
  /** A private note to the clicker. */
  tellUser(channel: string, user: string, text: string): Promise<void>;
  /** The Slack user id with this e-mail, or undefined when there is none. */
  lookupByEmail(email: string): Promise<string | undefined>;
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
    byDeadline: request.decidedByDeadline,
    pendingNotes: pendingReviewNotes({
      deadline: request.decideBy && request.onTimeout && !request.deadlineHandledAt ? { at: request.decideBy, action: request.onTimeout as TimeoutAction } : undefined,
      now: new Date(),
    }),
  });
}

const safeFilename = (name: string) =>
  name
    .replace(/[^A-Za-z0-9._-]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 60) || "output";

export class SlackFlowEffects implements FlowSlackEffects {
  constructor(
    private readonly client: WebClient,
    private readonly log: Logger,
  ) {}

  async postRequest(request: FlowRequest): Promise<{ ts: string; fileAttached: boolean }> {
    const posted = await this.client.chat.postMessage({ channel: request.channelId, ...flowMessageFor(request) });
    const fileAttached = outputNeedsFile(request.output);
    if (fileAttached) {
      await this.client.filesUploadV2({
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
    await this.client.chat.update({ channel: request.channelId, ts: request.messageTs, ...flowMessageFor(request, note) });
  }

  async remind(request: FlowRequest, text: string): Promise<void> {
    await this.client.chat.postMessage({ channel: request.channelId, thread_ts: request.messageTs ?? undefined, text });
  }

  async tellUser(channel: string, user: string, text: string): Promise<void> {
    await this.client.chat.postEphemeral({ channel, user, text });
  }

  async lookupByEmail(email: string): Promise<string | undefined> {
    try {
      const found = await this.client.users.lookupByEmail({ email });
      return found.user?.id ?? undefined;
    } catch (err) {
      const code = (err as { data?: { error?: string } }).data?.error;
      if (code !== "users_not_found") this.log.warn("could not look up the flow request's assignee", { error: code ?? (err as Error).message });
      return undefined;
    }
  }
}
