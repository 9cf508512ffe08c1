// A removed workspace's closing on the database (embedded, or PostgreSQL): only its rows, in one
// transaction, every time from the caller's clock.
import crypto from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../test/support/test-database.js";
import { stopWorkspace, UNINSTALLED_NOTE } from "../usecases/workspaces.js";
import { insertFlowRequest } from "./flow-requests.js";
import type { Sql } from "./sql.js";

let db: TestDatabase;
let sql: Sql;
const before = new Date("2026-03-29T01:00:00.000Z");
const now = new Date("2026-03-29T01:30:00.123Z");

async function run(teamId: string, enterpriseId: string | null, state = "running"): Promise<{ run: string; review: string }> {
  const run = crypto.randomUUID();
  await sql
    .insertInto("Execution")
    .values({ id: run, crewName: "research", teamId, enterpriseId, channelId: "C", userId: "U", inputs: "{}", requestId: run, webhookSecret: "s", state, updatedAt: before })
    .execute();
  const review = crypto.randomUUID();
  await sql
    .insertInto("Review")
    .values({ id: review, executionId: run, taskKey: "t", taskName: "t", round: 1, output: "o", outputHash: "h", state: "pending", updatedAt: before })
    .execute();
  for (const subjectId of [run, review])
    await sql
      .insertInto("SlackEffect")
      .values({ id: crypto.randomUUID(), kind: "review.show", subjectId, key: `k:${subjectId}`, updatedAt: before })
      .execute();
  return { run, review };
}

async function flowRequest(teamId: string, enterpriseId: string | null = null): Promise<string> {
  const row = await insertFlowRequest(
    sql,
    {
      flowName: "f",
      requestId: crypto.randomUUID(),
      channelId: "C",
      teamId,
      enterpriseId,
      methodName: null,
      message: null,
      output: "o",
      emit: [],
      deploymentName: null,
      flowId: null,
      assignedEmail: null,
      callbackUrl: "http://x",
      decideBy: null,
      onTimeout: null,
    },
    before,
  );
  await sql
    .insertInto("SlackEffect")
    .values({ id: crypto.randomUUID(), kind: "flow.show", subjectId: row!.id, key: `k:${row!.id}`, updatedAt: before })
    .execute();
  return row!.id;
}

const state = async (table: "Execution" | "Review" | "FlowRequest", id: string) =>
  sql.selectFrom(table).select(["state", "updatedAt"]).where("id", "=", id).executeTakeFirstOrThrow();
const effect = async (subjectId: string) => sql.selectFrom("SlackEffect").select(["state", "updatedAt"]).where("subjectId", "=", subjectId).executeTakeFirstOrThrow();

describe("store: a removed workspace's rows", () => {
  beforeEach(async () => {
    db = await createTestDatabase();
    sql = db.database.sql;
  });
  afterEach(async () => db.drop());

  it("closes one team's runs, reviews, flow requests and due effects, and nothing of another team", async () => {
    const mine = await run("T1", null);
    const finished = await run("T1", null, "completed");
    const theirs = await run("T2", null);
    const myFlow = await flowRequest("T1");
    const theirFlow = await flowRequest("T2");

    expect(await stopWorkspace(db.database.sql, { teamId: "T1" }, now)).toEqual({ runs: 1, reviews: 2, flowRequests: 1 });
    expect(await state("Execution", mine.run)).toEqual({ state: "uninstalled", updatedAt: now });
    expect((await sql.selectFrom("Execution").select(["error", "finishedAt"]).where("id", "=", mine.run).executeTakeFirstOrThrow()).error).toBe(UNINSTALLED_NOTE);
    expect((await state("Execution", finished.run)).state).toBe("completed");
    expect(await state("Review", mine.review)).toEqual({ state: "closed", updatedAt: now });
    expect(await state("FlowRequest", myFlow)).toEqual({ state: "closed", updatedAt: now });
    for (const id of [mine.run, mine.review, myFlow]) expect(await effect(id)).toEqual({ state: "dead", updatedAt: now });

    expect(await state("Execution", theirs.run)).toEqual({ state: "running", updatedAt: before });
    expect(await state("Review", theirs.review)).toEqual({ state: "pending", updatedAt: before });
    expect(await state("FlowRequest", theirFlow)).toEqual({ state: "pending", updatedAt: before });
    for (const id of [theirs.run, theirs.review, theirFlow]) expect(await effect(id)).toEqual({ state: "due", updatedAt: before });
  });

  it("closes an org's runs and the flow requests of its teams (stored with its id, its runs' and the ones Slack named), except in teams installed on their own", async () => {
    const orgTeam = await run("T1", "E1");
    const ownInstall = await run("T2", "E1");
    const otherOrg = await run("T3", "E2");
    const runTeamFlow = await flowRequest("T1");
    const namedTeamFlow = await flowRequest("T4");
    const ownInstallFlow = await flowRequest("T2");
    const otherOrgFlow = await flowRequest("T3");
    const unknownTeamFlow = await flowRequest("T5");
    const orgFlow = await flowRequest("T6", "E1");

    expect(await stopWorkspace(db.database.sql, { enterpriseId: "E1", exceptTeams: ["T2"], namedTeams: ["T4"] }, now)).toEqual({ runs: 1, reviews: 1, flowRequests: 3 });
    expect((await state("Execution", orgTeam.run)).state).toBe("uninstalled");
    expect((await effect(orgTeam.review)).state).toBe("dead");
    expect((await state("Execution", ownInstall.run)).state).toBe("running");
    expect((await state("Execution", otherOrg.run)).state).toBe("running");
    for (const flow of [runTeamFlow, namedTeamFlow, orgFlow]) {
      expect(await state("FlowRequest", flow)).toEqual({ state: "closed", updatedAt: now });
      expect((await sql.selectFrom("FlowRequest").select("answerMessage").where("id", "=", flow).executeTakeFirstOrThrow()).answerMessage).toBe(UNINSTALLED_NOTE);
      expect(await effect(flow)).toEqual({ state: "dead", updatedAt: now });
    }
    for (const flow of [ownInstallFlow, otherOrgFlow, unknownTeamFlow]) {
      expect(await state("FlowRequest", flow)).toEqual({ state: "pending", updatedAt: before });
      expect((await effect(flow)).state).toBe("due");
    }
  });
});
