// AuditRecord rows: the append-only audit trail. Rows are only ever inserted, never updated or
// deleted by the app; a row recording a state change is written in that change's transaction.
import crypto from "node:crypto";
import type { Selectable } from "kysely";
import type { Db } from "./db/database.js";
import type { SqlRunner } from "./db/sql.js";
import { type DB, type Sql, sqlOf } from "./sql.js";

export type AuditRow = Selectable<DB["AuditRecord"]>;
export type NewAuditRow = Omit<AuditRow, "id" | "createdAt" | "detail" | "flowRequestId"> & { detail: Record<string, unknown> | null; flowRequestId?: string | null };

type Handle = Sql | SqlRunner | Db;

export function insertAudit(db: Handle, row: NewAuditRow, now: Date): Promise<AuditRow> {
  return sqlOf(db)
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
export function auditOfExecution(db: Handle, executionId: string): Promise<AuditRow[]> {
  return sqlOf(db).selectFrom("AuditRecord").selectAll().where("executionId", "=", executionId).orderBy("createdAt").orderBy("id").execute();
}

/** A flow feedback request's history, oldest first. */
export function auditOfFlowRequest(db: Handle, flowRequestId: string): Promise<AuditRow[]> {
  return sqlOf(db).selectFrom("AuditRecord").selectAll().where("flowRequestId", "=", flowRequestId).orderBy("createdAt").orderBy("id").execute();
}
