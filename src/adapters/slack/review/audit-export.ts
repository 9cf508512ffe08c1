// `/crew audit <kickoff_id> [csv|json]`: a run's audit trail, shown privately, and exported as files
// (JSON and CSV by default) into the run's thread, where the decisions it lists were made.
import type { WebClient } from "@slack/web-api";
import type { AccessPorts } from "../../../usecases/access.js";
import { type AuditRecord, auditCsv, auditJson } from "../../../usecases/audit.js";
import { auditFor } from "../../../usecases/audit-for.js";
import { escapeMrkdwn, excerpt, formatDuration, formatUtcTime, mentionIds, truncatePlain, unknownKickoffText } from "../blocks/index.js";
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
  const task = `*${escapeMrkdwn(truncatePlain(row.taskKey ?? "task", 80))}* round ${row.round ?? "?"}`;
  const step = row.taskKey ? ` on *${escapeMrkdwn(truncatePlain(row.taskKey, 80))}*` : "";
  const quoted = row.feedback ? `: “${escapeMrkdwn(truncatePlain(row.feedback, 120))}”` : "";
  const after = row.msToDecision != null ? ` after ${formatDuration(row.msToDecision)}` : "";
  const edited = detail.edited ? " with edits" : "";
  const count = typeof detail.approvals === "number" && typeof detail.required === "number" ? ` (${detail.approvals} of ${detail.required} approvals)` : "";
  switch (row.kind) {
    case "kickoff":
      return `• ${at} — started by <@${row.actor}>`;
    case "decision": {
      const verb = row.decision === "reject" ? "rejected" : "approved";
      const outcome = detail.outcome === "decided" ? "" : detail.outcome === "not_waiting" ? " — the crew was not waiting" : " — did not reach the crew";
      const who = detail.byDeadline ? "the deadline" : `<@${row.actor}>`;
      return `• ${at} — ${who} ${verb}${edited} ${task}${after}${quoted}${outcome}`;
    }
    case "approval":
      return `• ${at} — <@${row.actor}> approved${edited} ${task}${count}${quoted}`;
    case "deadline": {
      const what = `*${escapeMrkdwn(truncatePlain(row.taskKey ?? (row.flowRequestId ? "the request" : "task"), 80))}*${row.round != null ? ` round ${row.round}` : ""}`;
      return `• ${at} — deadline passed on ${what}: reminder posted`;
    }
    case "escalation": {
      const ids = Array.isArray(detail.escalatedTo) ? (detail.escalatedTo as unknown[]).map(String).filter((id) => /^[UWS][A-Z0-9]+$/.test(id)) : [];
      return `• ${at} — ${task} escalated${ids.length ? ` to ${mentionIds(ids.slice(0, 10))}` : ""} after its last reminder`;
    }
    case "reassignment": {
      const to = typeof detail.reassignedTo === "string" ? ` to <@${escapeMrkdwn(truncatePlain(detail.reassignedTo, 30))}>` : "";
      return `• ${at} — <@${row.actor}> reassigned ${task}${to}${quoted}`;
    }
    case "stop":
      return row.decision === "abandoned"
        ? `• ${at} — <@${row.actor}> stopped following the run (its crew cannot be stopped from Slack)`
        : `• ${at} — <@${row.actor}> stopped the run`;
    case "completion":
      return `• ${at} — run ended: ${escapeMrkdwn(String(detail.event ?? "finished"))}`;
    case "flow_approval": {
      const choice = row.decision && row.decision !== "feedback" ? ` chose *${escapeMrkdwn(truncatePlain(row.decision, 80))}*` : " approved";
      return `• ${at} — <@${row.actor}>${choice}${edited}${step}${count}${quoted}`;
    }
    case "flow_decision": {
      const choice = row.decision && row.decision !== "feedback" ? ` chose *${escapeMrkdwn(truncatePlain(row.decision, 80))}*` : " sent feedback";
      const words = escapeMrkdwn(truncatePlain(row.resumeMessage ?? "", 120));
      const result =
        detail.outcome === "answered"
          ? detail.takenEarlier
            ? " — the flow had taken it, though its delivery was not confirmed"
            : ""
          : detail.outcome === "closed"
            ? ` — the flow refused it (${words})`
            : detail.notTaken
              ? ` — the flow did not take this answer (${words}); the request opened again`
              : detail.maybeTaken
                ? " — may have reached the flow (no answer came); the request opened again"
                : " — did not reach the flow";
      return `• ${at} — ${detail.byDeadline ? "the deadline" : `<@${row.actor}>`}${choice}${step}${after}${quoted}${result}`;
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
  if (trail.kind === "unknown") return unknownKickoffText(req.kickoffId);
  if (trail.kind === "flow") {
    const { request } = trail;
    return exportReply(client, deps, req, trail.rows, {
      head: `flow ${escapeMrkdwn(request.flowName)} · \`${escapeMrkdwn(truncatePlain(request.requestId, 80))}\``,
      name: request.flowName,
      file: `audit-flow-${fileSafe(request.requestId)}`,
      place: { channel: request.channelId, threadTs: request.messageTs },
      uploaded: () => `The export is in the request's thread in <#${request.channelId}>.`,
      logged: { flowRequestId: request.id },
    });
  }
  const { execution } = trail;
  return exportReply(client, deps, req, trail.rows, {
    head: `${escapeMrkdwn(execution.crewName)} · \`${escapeMrkdwn(req.kickoffId)}\``,
    name: execution.crewName,
    file: `audit-${fileSafe(req.kickoffId)}`,
    place: { channel: execution.channelId, threadTs: execution.threadTs },
    uploaded: (formats) => `The export (${formats}) is in the run's thread in <#${execution.channelId}>.`,
    logged: { kickoffId: req.kickoffId },
  });
}

/** A trail's reply (a run's or a flow request's): its lines, and the export files uploaded into its thread (`place`) when it has one. */
async function exportReply(
  client: WebClient,
  deps: FeatureDeps,
  req: AuditRequest,
  rows: AuditRecord[],
  t: { head: string; name: string; file: string; place: { channel: string; threadTs: string | null }; uploaded: (formats: string) => string; logged: Record<string, unknown> },
): Promise<string> {
  const head = `*Audit trail* · ${t.head} · ${rows.length} record${rows.length === 1 ? "" : "s"}`;
  const body = rows.length ? rows.map(auditLine).join("\n") : "Nothing recorded yet.";
  let where = "";
  if (rows.length && t.place.threadTs) {
    const files = [
      ...(req.format !== "csv" ? [{ content: auditJson(rows), filename: `${t.file}.json`, title: `Audit trail (JSON) · ${t.name}` }] : []),
      ...(req.format !== "json" ? [{ content: auditCsv(rows), filename: `${t.file}.csv`, title: `Audit trail (CSV) · ${t.name}` }] : []),
    ];
    try {
      await client.filesUploadV2({
        channel_id: t.place.channel,
        thread_ts: t.place.threadTs,
        initial_comment: `Audit export requested by <@${req.userId}>.`,
        file_uploads: files,
      });
      where = `\n_${t.uploaded(files.map((f) => f.filename.split(".").pop()!.toUpperCase()).join(" and "))}_`;
    } catch (err) {
      deps.log.warn("could not upload audit export", { ...t.logged, err });
      where = "\n_The export file could not be uploaded; try again in a moment._";
    }
  }
  return `${head}\n${excerpt(body, 2600).text}${where}`;
}

const fileSafe = (id: string) => id.replace(/[^A-Za-z0-9_-]+/g, "-").slice(0, 60);
