// The SlackInstallation aggregate: one row per workspace install ("T:<team>") or org-wide install
// ("E:<enterprise>"). The rows hold tokens already sealed by the caller (src/adapters/slack/installations.ts
// seals and opens them); this module only reads and writes them.
import crypto from "node:crypto";
import type { Selectable } from "kysely";
import type { DB, Sql } from "./sql.js";

export type SlackInstallationRow = Selectable<DB["SlackInstallation"]>;

/** A database, a runner or a Kysely handle (possibly one transaction's). */
type On = Sql;

export const SEALED_FIELDS = ["botToken", "botRefreshToken", "userToken", "userRefreshToken"] as const;
export type SealedField = (typeof SEALED_FIELDS)[number];

/** An installation as written: every token sealed, `data` without secrets. */
export interface InstallationWrite {
  teamId: string | null;
  enterpriseId: string | null;
  isEnterpriseInstall: boolean;
  appId: string | null;
  botId: string | null;
  botUserId: string | null;
  userId: string | null;
  botToken: string | null;
  botRefreshToken: string | null;
  userToken: string | null;
  userRefreshToken: string | null;
  data: object;
  /** When Slack gave it its bot token (left out of a user-only install's update). */
  installedAt?: Date;
}

/** The stored Installation JSON of an install, if there is one. */
export async function installationData(on: On, installKey: string): Promise<unknown> {
  const row = await on.selectFrom("SlackInstallation").select("data").where("installKey", "=", installKey).executeTakeFirst();
  return row?.data;
}

/**
 * Writes an install: a new row with `row`, or the existing one updated with `update` (a user-only
 * install leaves the bot's columns out of it).
 */
export async function upsertInstallation(on: On, installKey: string, row: InstallationWrite, update: Partial<InstallationWrite>, now: Date): Promise<void> {
  const { data: updateData, ...updateRest } = update;
  await on
    .insertInto("SlackInstallation")
    .values({ id: crypto.randomUUID(), installKey, ...row, data: JSON.stringify(row.data), createdAt: now, updatedAt: now })
    .onConflict((oc) => oc.column("installKey").doUpdateSet({ ...updateRest, ...(updateData !== undefined ? { data: JSON.stringify(updateData) } : {}), updatedAt: now }))
    .execute();
}

/**
 * Refusals of message streaming are forgotten: a new install (added scopes) may be allowed what the one
 * before was refused. A workspace's install forgets its own; an org-wide one those of the org's
 * workspaces its runs name.
 */
export async function forgetStreamingRefusals(on: On, of: { teamId: string } | { enterpriseId: string }): Promise<void> {
  const teams =
    "teamId" in of ? [of.teamId] : (await on.selectFrom("Execution").select("teamId").distinct().where("enterpriseId", "=", of.enterpriseId).execute()).map((r) => r.teamId);
  if (teams.length) await on.deleteFrom("StreamingRefusal").where("teamId", "in", teams).execute();
}

/** The installs with these keys (any order). */
export async function installationsByKeys(on: On, keys: readonly string[]): Promise<SlackInstallationRow[]> {
  if (keys.length === 0) return [];
  return on.selectFrom("SlackInstallation").selectAll().where("installKey", "in", keys).execute();
}

export async function allInstallations(on: On): Promise<SlackInstallationRow[]> {
  return on.selectFrom("SlackInstallation").selectAll().orderBy("installKey").execute();
}

/** When the install with this key got its bot token, if it exists and that is known. */
export async function installedAt(on: On, installKey: string): Promise<Date | null> {
  const row = await on.selectFrom("SlackInstallation").select("installedAt").where("installKey", "=", installKey).executeTakeFirst();
  return row?.installedAt ?? null;
}

/** Deletes an install; returns how many rows went (0 or 1). */
export async function deleteInstallation(on: On, installKey: string): Promise<number> {
  const r = await on.deleteFrom("SlackInstallation").where("installKey", "=", installKey).executeTakeFirst();
  return Number(r.numDeletedRows);
}

/** Forgets the user tokens of these users in these installs (the bot's stay). */
export async function forgetUserTokens(on: On, installKeys: readonly string[], userIds: readonly string[], now: Date): Promise<void> {
  if (installKeys.length === 0 || userIds.length === 0) return;
  await on
    .updateTable("SlackInstallation")
    .set({ userToken: null, userRefreshToken: null, updatedAt: now })
    .where("installKey", "in", installKeys)
    .where("userId", "in", userIds)
    .execute();
}

/**
 * Replaces sealed tokens of one install, only where each still holds the value read (`was`): two
 * replicas re-sealing at once do no harm. True when the row was updated.
 */
export async function replaceSealedTokens(
  on: On,
  id: string,
  sealed: Partial<Record<SealedField, string>>,
  was: Partial<Record<SealedField, string>>,
  now: Date,
): Promise<boolean> {
  let q = on
    .updateTable("SlackInstallation")
    .set({ ...sealed, updatedAt: now })
    .where("id", "=", id);
  for (const field of SEALED_FIELDS) {
    const value = was[field];
    if (value !== undefined) q = q.where(field, "=", value);
  }
  return (await q.executeTakeFirst()).numUpdatedRows === 1n;
}

/** The teams of an Enterprise Grid org that have an install of their own (they keep working when the org's goes). */
export async function teamsInstalledOnTheirOwn(on: On, enterpriseId: string): Promise<string[]> {
  const rows = await on
    .selectFrom("SlackInstallation")
    .select("teamId")
    .where("enterpriseId", "=", enterpriseId)
    .where("isEnterpriseInstall", "=", false)
    .where("teamId", "is not", null)
    .execute();
  return rows.flatMap((r) => (r.teamId ? [r.teamId] : []));
}
