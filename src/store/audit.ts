// AuditRecord rows: the append-only audit trail. Rows are only ever inserted, never updated or
// deleted by the app; a row recording a state change is written in that change's transaction.
import crypto from "node:crypto";
import type { Selectable } from "kysely";
import type { DB, Sql } from "./sql.js";

export type AuditRow = Selectable<DB["AuditRecord"]>;
export type NewAuditRow = Omit<AuditRow, "id" | "createdAt" | "detail" | "flowRequestId"> & { detail: Record<string, unknown> | null; flowRequestId?: string | null };

export function insertAudit(db: Sql, row: NewAuditRow, now: Date): Promise<AuditRow> {
  return db
    .insertInto("AuditRecord")
    .values({
      id: crypto.randomUUID(),
      ...row,
      flowRequestId: row.flowRequestId ?? null,
      detail: row.detail === null ? null : JSON.stringify(row.detail),
      createdAt: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** An execution's history, oldest first. */
export function auditOfExecution(db: Sql, executionId: string): Promise<AuditRow[]> {
  return db.selectFrom("AuditRecord").selectAll().where("executionId", "=", executionId).orderBy("createdAt").orderBy("id").execute();
}

/** A flow feedback request's history, oldest first. */
export function auditOfFlowRequest(db: Sql, flowRequestId: string): Promise<AuditRow[]> {
  return db.selectFrom("AuditRecord").selectAll().where("flowRequestId", "=", flowRequestId).orderBy("createdAt").orderBy("id").execute();
}
