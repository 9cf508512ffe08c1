// The append-only audit trail: one row per kickoff, per decision outcome and per run completion.
// Rows are only ever created, never updated or deleted by the app.
import type { Logger } from "../log/log.js";
import { type AuditRow, auditOfExecution, auditOfFlowRequest, insertAudit, type NewAuditRow } from "../store/audit.js";
import type { Sql } from "../store/sql.js";
import { type Clock, systemClock } from "./ports.js";

export type AuditRecord = AuditRow;
/** approval: one person's approval while more are needed (the last one needed is a decision row). */
/** stop: someone ended the run from Slack (decision: stopped, or abandoned when its crew could not be stopped). */
export type AuditKind = "kickoff" | "decision" | "approval" | "completion" | "flow_decision" | "flow_approval" | "deadline" | "escalation" | "reassignment" | "stop";

export interface NewAuditRecord {
  /** The crew run; null for a flow feedback request (then flowRequestId is set). */
  executionId: string | null;
  flowRequestId?: string | null;
  kind: AuditKind;
  taskKey?: string | null;
  round?: number | null;
  actor?: string | null;
  /** approve | reject for crew reviews; the chosen outcome (or "feedback") for flow requests. */
  decision?: string | null;
  feedback?: string | null;
  outputHash?: string | null;
  msToDecision?: number | null;
  resumeStatus?: string | null;
  resumeMessage?: string | null;
  detail?: Record<string, unknown>;
}

export interface AuditDeps {
  db: Sql;
  /** Where a failed write on its own (no transaction) is reported. */
  log: Logger;
  clock?: Clock;
}

export class Audit {
  private readonly clock: Clock;

  constructor(private readonly deps: AuditDeps) {
    this.clock = deps.clock ?? systemClock;
  }

  /**
   * Appends a row. Given the transaction of the state change it records, it commits (or fails) with
   * it; on its own, a failure is logged, never thrown into the flow it records.
   */
  async record(row: NewAuditRecord, tx?: Sql): Promise<AuditRecord | undefined> {
    if (tx) return insertAudit(tx, auditRow(row), this.clock.now());
    try {
      return await insertAudit(this.deps.db, auditRow(row), this.clock.now());
    } catch (err) {
      this.deps.log.error("could not write audit record", { executionId: row.executionId, kind: row.kind, err });
      return undefined;
    }
  }

  /** A flow feedback request's history, oldest first. */
  forFlowRequest(flowRequestId: string): Promise<AuditRecord[]> {
    return auditOfFlowRequest(this.deps.db, flowRequestId);
  }

  /** An execution's history, oldest first. */
  forExecution(executionId: string): Promise<AuditRecord[]> {
    return auditOfExecution(this.deps.db, executionId);
  }
}

const AUDIT_COLUMNS = [
  "createdAt",
  "kind",
  "executionId",
  "taskKey",
  "round",
  "actor",
  "decision",
  "feedback",
  "outputHash",
  "msToDecision",
  "resumeStatus",
  "resumeMessage",
  "detail",
  "flowRequestId",
] as const;

function csvCell(value: unknown): string {
  if (value === null || value === undefined) return "";
  const text = value instanceof Date ? value.toISOString() : typeof value === "object" ? JSON.stringify(value) : String(value);
  // Quote everything that could break a row; neutralise spreadsheet formulas.
  const safe = /^[=+\-@\t\r]/.test(text) ? `'${text}` : text;
  return /[",\n\r]/.test(safe) || safe !== text ? `"${safe.replace(/"/g, '""')}"` : safe;
}

export function auditCsv(rows: readonly AuditRecord[]): string {
  const lines = [AUDIT_COLUMNS.join(",")];
  for (const row of rows) lines.push(AUDIT_COLUMNS.map((c) => csvCell(row[c])).join(","));
  return lines.join("\r\n") + "\r\n";
}

/** Dates become ISO strings (Date.toJSON), as in auditCsv. */
export function auditJson(rows: readonly AuditRecord[]): string {
  const objects = rows.map((row) => Object.fromEntries(AUDIT_COLUMNS.map((c) => [c, row[c]])));
  return JSON.stringify(objects, null, 2) + "\n";
}

function auditRow(row: NewAuditRecord): NewAuditRow {
  return {
    executionId: row.executionId,
    flowRequestId: row.flowRequestId ?? null,
    kind: row.kind,
    taskKey: row.taskKey ?? null,
    round: row.round ?? null,
    actor: row.actor ?? null,
    decision: row.decision ?? null,
    feedback: row.feedback ?? null,
    outputHash: row.outputHash ?? null,
    msToDecision: row.msToDecision ?? null,
    resumeStatus: row.resumeStatus ?? null,
    resumeMessage: row.resumeMessage ?? null,
    detail: row.detail ?? null,
  };
}
