// ReviewApproval rows: one person's approval of one review round, unique per (review, user), so
// approving twice counts once.
import crypto from "node:crypto";
import type { Selectable } from "kysely";
import type { Db } from "./db/database.js";
import type { SqlRunner } from "./db/sql.js";
import { type DB, type Sql, sqlOf } from "./sql.js";

export type ReviewApprovalRow = Selectable<DB["ReviewApproval"]>;
/** What the rules need of an approval (domain/approvals.ts StoredApproval). */
export type ApprovalEntry = Pick<ReviewApprovalRow, "userId" | "note" | "editedOutput" | "createdAt">;

type Handle = Sql | SqlRunner | Db;

/**
 * Records one person's approval; false when they had approved this round already. A later edit by
 * the same person replaces their earlier edit (and a new note their earlier note).
 */
export async function addApproval(db: Handle, a: { reviewId: string; userId: string; note: string | null; editedOutput: string | null }, now: Date): Promise<boolean> {
  const sql = sqlOf(db);
  const inserted = await sql
    .insertInto("ReviewApproval")
    .values({ id: crypto.randomUUID(), reviewId: a.reviewId, userId: a.userId, note: a.note, editedOutput: a.editedOutput, createdAt: now })
    .onConflict((oc) => oc.columns(["reviewId", "userId"]).doNothing())
    .returning("id")
    .executeTakeFirst();
  if (inserted) return true;
  if (a.note !== null || a.editedOutput !== null) {
    await sql
      .updateTable("ReviewApproval")
      .set({ ...(a.note !== null ? { note: a.note } : {}), ...(a.editedOutput !== null ? { editedOutput: a.editedOutput, createdAt: now } : {}) })
      .where("reviewId", "=", a.reviewId)
      .where("userId", "=", a.userId)
      .execute();
  }
  return false;
}

/** A review's approvals, oldest first. */
export function approvalsOf(db: Handle, reviewId: string): Promise<ApprovalEntry[]> {
  return sqlOf(db)
    .selectFrom("ReviewApproval")
    .select(["userId", "note", "editedOutput", "createdAt"])
    .where("reviewId", "=", reviewId)
    .orderBy("createdAt")
    .orderBy("id")
    .execute();
}

/** Who approved a review so far. */
export async function approverIds(db: Handle, reviewId: string): Promise<string[]> {
  return (await sqlOf(db).selectFrom("ReviewApproval").select("userId").where("reviewId", "=", reviewId).execute()).map((r) => r.userId);
}
