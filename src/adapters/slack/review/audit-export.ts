// `/crew audit <kickoff_id> [csv|json]`: a run's audit trail, shown privately, and exported as files
// (JSON and CSV by default) into the run's thread, where the decisions it lists were made.
import type { WebClient } from "@slack/web-api";
import type { AccessPorts } from "../../../usecases/access.js";
import { type AuditRecord, auditCsv, auditJson } from "../../../usecases/audit.js";
import { auditFor } from "../../../usecases/audit-for.js";
import type { FlowRequest } from "../../../usecases/flows.js";
import { escapeMrkdwn, excerpt, formatDuration, formatUtcTime, mentionIds, truncatePlain } from "../blocks/index.js";
import type { FeatureDeps } from "../deps.js";

export type AuditFormat = "both" | "csv" | "json";

export interface AuditRequest {
  kickoffId: string;
  format: AuditFormat;
  userId: string;
  channelId: string;
}

export function auditLine(row: AuditRecord): string {
  const at = formatUtcTime(row.createdAt);
  const detail = (row.detail ?? {}) as Record<string, unknown>;
  switch (row.kind) {
    case "kickoff":
      return `• ${at} — started by <@${row.actor}>`;
    case "decision": {
      const task = `*${escapeMrkdwn(truncatePlain(row.taskKey ?? "task", 80))}* round ${row.round ?? "?"}`;
      const verb = row.decision === "reject" ? "rejected" : "approved";
      const after = row.msToDecision != null ? ` after ${formatDuration(row.msToDecision)}` : "";
      const outcome = detail.outcome === "decided" ? "" : detail.outcome === "not_waiting" ? " — the crew was not waiting" : " — did not reach the crew";
      const feedback = row.feedback ? `: “${escapeMrkdwn(truncatePlain(row.feedback, 120))}”` : "";
      const edited = detail.edited ? " with edits" : "";
      const who = detail.byDeadline ? "the deadline" : `<@${row.actor}>`;
      return `• ${at} — ${who} ${verb}${edited} ${task}${after}${feedback}${outcome}`;
    }
    case "approval": {
      const task = `*${escapeMrkdwn(truncatePlain(row.taskKey ?? "task", 80))}* round ${row.round ?? "?"}`;
      const edited = detail.edited ? " with edits" : "";
      const count = typeof detail.approvals === "number" && typeof detail.required === "number" ? ` (${detail.approvals} of ${detail.required} approvals)` : "";
      const feedback = row.feedback ? `: “${escapeMrkdwn(truncatePlain(row.feedback, 120))}”` : "";
      return `• ${at} — <@${row.actor}> approved${edited} ${task}${count}${feedback}`;
    }
    case "deadline": {
      const task = `*${escapeMrkdwn(truncatePlain(row.taskKey ?? (row.flowRequestId ? "the request" : "task"), 80))}*${row.round != null ? ` round ${row.round}` : ""}`;
      return `• ${at} — deadline passed on ${task}: reminder posted`;
    }
    case "escalation": {
      const task = `*${escapeMrkdwn(truncatePlain(row.taskKey ?? "task", 80))}* round ${row.round ?? "?"}`;
      const ids = Array.isArray(detail.escalatedTo) ? (detail.escalatedTo as unknown[]).map(String).filter((id) => /^[UWS][A-Z0-9]+$/.test(id)) : [];
      return `• ${at} — ${task} escalated${ids.length ? ` to ${mentionIds(ids.slice(0, 10))}` : ""} after its last reminder`;
    }
    case "reassignment": {
      const task = `*${escapeMrkdwn(truncatePlain(row.taskKey ?? "task", 80))}* round ${row.round ?? "?"}`;
      const to = typeof detail.reassignedTo === "string" ? ` to <@${escapeMrkdwn(truncatePlain(detail.reassignedTo, 30))}>` : "";
      const reason = row.feedback ? `: “${escapeMrkdwn(truncatePlain(row.feedback, 120))}”` : "";
      return `• ${at} — <@${row.actor}> reassigned ${task}${to}${reason}`;
    }
    case "stop":
      return row.decision === "abandoned"
        ? `• ${at} — <@${row.actor}> stopped following the run (its crew cannot be stopped from Slack)`
        : `• ${at} — <@${row.actor}> stopped the run`;
    case "completion":
      return `• ${at} — run ended: ${escapeMrkdwn(String(detail.event ?? "finished"))}`;
    case "flow_approval": {
      const step = row.taskKey ? ` on *${escapeMrkdwn(truncatePlain(row.taskKey, 80))}*` : "";
      const choice = row.decision && row.decision !== "feedback" ? ` chose *${escapeMrkdwn(truncatePlain(row.decision, 80))}*` : " approved";
      const edited = detail.edited ? " with edits" : "";
      const count = typeof detail.approvals === "number" && typeof detail.required === "number" ? ` (${detail.approvals} of ${detail.required} approvals)` : "";
      const feedback = row.feedback ? `: “${escapeMrkdwn(truncatePlain(row.feedback, 120))}”` : "";
      return `• ${at} — <@${row.actor}>${choice}${edited}${step}${count}${feedback}`;
    }
    case "flow_decision": {
      const step = row.taskKey ? ` on *${escapeMrkdwn(truncatePlain(row.taskKey, 80))}*` : "";
      const choice = row.decision && row.decision !== "feedback" ? ` chose *${escapeMrkdwn(truncatePlain(row.decision, 80))}*` : " sent feedback";
      const after = row.msToDecision != null ? ` after ${formatDuration(row.msToDecision)}` : "";
      const feedback = row.feedback ? `: “${escapeMrkdwn(truncatePlain(row.feedback, 120))}”` : "";
      const result =
        detail.outcome === "answered"
          ? ""
          : detail.outcome === "closed"
            ? ` — the flow refused it (${escapeMrkdwn(truncatePlain(row.resumeMessage ?? "", 120))})`
            : " — did not reach the flow";
      return `• ${at} — ${detail.byDeadline ? "the deadline" : `<@${row.actor}>`}${choice}${step}${after}${feedback}${result}`;
    }
    default:
      return `• ${at} — ${escapeMrkdwn(row.kind)}`;
  }
}

/** Answers the command (mrkdwn for the ephemeral reply) and uploads the export. */
export async function auditReply(client: WebClient, deps: FeatureDeps, req: AuditRequest, access: AccessPorts): Promise<string> {
  const trail = await auditFor({ access, runs: deps.lifecycle.runs, audit: deps.lifecycle.audit, ...(deps.flows ? { flows: deps.flows } : {}) }, req.kickoffId, {
    userId: req.userId,
    channelId: req.channelId,
  });
  if (trail.kind === "unknown") return `I don't know a run with kickoff id \`${escapeMrkdwn(truncatePlain(req.kickoffId, 80))}\`. \`/crew list\` shows this channel's recent runs.`;
  if (trail.kind === "flow") return flowAuditReply(client, deps, trail.request, trail.rows, req);
  const { execution, rows } = trail;
  const head = `*Audit trail* · ${escapeMrkdwn(execution.crewName)} · \`${escapeMrkdwn(req.kickoffId)}\` · ${rows.length} record${rows.length === 1 ? "" : "s"}`;
  const body = rows.length ? rows.map(auditLine).join("\n") : "Nothing recorded yet.";
  let where = "";
  if (rows.length && execution.threadTs) {
    const base = `audit-${req.kickoffId.replace(/[^A-Za-z0-9_-]+/g, "-").slice(0, 60)}`;
    const files = [
      ...(req.format !== "csv" ? [{ content: auditJson(rows), filename: `${base}.json`, title: `Audit trail (JSON) · ${execution.crewName}` }] : []),
      ...(req.format !== "json" ? [{ content: auditCsv(rows), filename: `${base}.csv`, title: `Audit trail (CSV) · ${execution.crewName}` }] : []),
    ];
    try {
      await client.filesUploadV2({
        channel_id: execution.channelId,
        thread_ts: execution.threadTs,
        initial_comment: `Audit export requested by <@${req.userId}>.`,
        file_uploads: files,
      });
      where = `\n_The export (${files.map((f) => f.filename.split(".").pop()!.toUpperCase()).join(" and ")}) is in the run's thread in <#${execution.channelId}>._`;
    } catch (err) {
      deps.log.warn("could not upload audit export", { kickoffId: req.kickoffId, err });
      where = "\n_The export file could not be uploaded; try again in a moment._";
    }
  }
  return `${head}\n${excerpt(body, 2600).text}${where}`;
}

/** `/crew audit <flow request id>`: the same for a flow's feedback request (files under its message). */
async function flowAuditReply(client: WebClient, deps: FeatureDeps, request: FlowRequest, rows: AuditRecord[], req: AuditRequest): Promise<string> {
  const head = `*Audit trail* · flow ${escapeMrkdwn(request.flowName)} · \`${escapeMrkdwn(truncatePlain(request.requestId, 80))}\` · ${rows.length} record${rows.length === 1 ? "" : "s"}`;
  const body = rows.length ? rows.map(auditLine).join("\n") : "Nothing recorded yet.";
  let where = "";
  if (rows.length && request.messageTs) {
    const base = `audit-flow-${request.requestId.replace(/[^A-Za-z0-9_-]+/g, "-").slice(0, 60)}`;
    const files = [
      ...(req.format !== "csv" ? [{ content: auditJson(rows), filename: `${base}.json`, title: `Audit trail (JSON) · ${request.flowName}` }] : []),
      ...(req.format !== "json" ? [{ content: auditCsv(rows), filename: `${base}.csv`, title: `Audit trail (CSV) · ${request.flowName}` }] : []),
    ];
    try {
      await client.filesUploadV2({
        channel_id: request.channelId,
        thread_ts: request.messageTs,
        initial_comment: `Audit export requested by <@${req.userId}>.`,
        file_uploads: files,
      });
      where = `\n_The export is in the request's thread in <#${request.channelId}>._`;
    } catch (err) {
      deps.log.warn("could not upload audit export", { flowRequestId: request.id, err });
      where = "\n_The export file could not be uploaded; try again in a moment._";
    }
  }
  return `${head}\n${excerpt(body, 2600).text}${where}`;
}
