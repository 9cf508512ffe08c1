// `/crew audit <kickoff_id> [csv|json]`: a run's audit trail, shown privately, and exported as files
// (JSON and CSV by default) into the run's thread, where the decisions it lists were made.
import type { WebClient } from "@slack/web-api";
import { auditCsv, auditJson, type AuditRecord } from "../lifecycle/audit.js";
import type { FeatureDeps } from "../slack/deps.js";
import { visibleRun } from "./access.js";
import { escapeMrkdwn, fitMrkdwn, formatDuration, formatUtcTime, truncatePlain } from "../slack/blocks/index.js";

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
      return `• ${at} — <@${row.actor}> ${verb} ${task}${after}${feedback}${outcome}`;
    }
    case "completion":
      return `• ${at} — run ended: ${escapeMrkdwn(String(detail.event ?? "finished"))}`;
    default:
      return `• ${at} — ${escapeMrkdwn(row.kind)}`;
  }
}

/** Answers the command (mrkdwn for the ephemeral reply) and uploads the export. */
export async function auditReply(client: WebClient, deps: FeatureDeps, req: AuditRequest): Promise<string> {
  // Who may see the run: access.ts; everyone else gets the answer an unknown id gets.
  const execution = await visibleRun(client, deps, req.kickoffId, { userId: req.userId, channelId: req.channelId });
  if (!execution) return `I don't know a run with kickoff id \`${escapeMrkdwn(truncatePlain(req.kickoffId, 80))}\`. \`/crew list\` shows this channel's recent runs.`;

  const rows = await deps.lifecycle.audit.forExecution(execution.id);
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
  return `${head}\n${fitMrkdwn(body, 2600).text}${where}`;
}
