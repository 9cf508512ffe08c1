// The installation store on a real database: tokens sealed at rest, workspace and Grid org lookups,
// key rotation (re-sealing), tampering detected; and the per-workspace Slack clients built on it.
import { randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { orgWide, workspace } from "../../../test/support/installations.js";
import { prismaOf } from "../../../test/support/prisma.js";
import { createTestDatabase, type TestDatabase } from "../../../test/support/test-database.js";
import { TokenCipher } from "../../crypto/token-cipher.js";
import { createLogger, silentLogger } from "../../log/log.js";
import { InstalledClients } from "./clients.js";
import { DbInstallationStore, InstallationNotFound, InstallationUnreadable } from "./installations.js";

let db: TestDatabase;
beforeEach(async () => {
  db = await createTestDatabase();
});
afterEach(async () => db.drop());

describe("DbInstallationStore", () => {
  it("keeps every token sealed, and gives back the installation Bolt stored", async () => {
    const store = new DbInstallationStore({ db: db.database.sql, cipher: new TokenCipher(randomBytes(32)), log: silentLogger });
    const installation = workspace("T0ONE", "xoxb-one-secret");
    await store.storeInstallation(installation);

    const raw = JSON.stringify(await prismaOf(db.database).$queryRawUnsafe(`SELECT * FROM "SlackInstallation"`));
    for (const secret of ["xoxb-one-secret", "xoxp-user-T0ONE", "xoxe-user-refresh-T0ONE", "xoxe-bot-refresh-T0ONE", "hooks.slack.com/services/secret"])
      expect(raw).not.toContain(secret);

    const fetched = await store.fetchInstallation({ teamId: "T0ONE", enterpriseId: undefined, isEnterpriseInstall: false });
    const { incomingWebhook: _dropped, ...rest } = installation;
    expect(fetched).toEqual({ ...rest, incomingWebhook: { channel: "#general" } });
    expect((await store.botFor("T0ONE")).botToken).toBe("xoxb-one-secret");
    await expect(store.fetchInstallation({ teamId: "T0TWO", enterpriseId: undefined, isEnterpriseInstall: false })).rejects.toThrow(InstallationNotFound);
  });

  it("keeps the bot of a workspace when a later install brings only a user token", async () => {
    const store = new DbInstallationStore({ db: db.database.sql, cipher: new TokenCipher(randomBytes(32)), log: silentLogger });
    await store.storeInstallation(workspace("T0ONE", "xoxb-one-secret"));
    const { bot: _bot, ...userOnly } = workspace("T0ONE", "unused");
    await store.storeInstallation({ ...userOnly, user: { id: "U0OTHER", token: "xoxp-other", scopes: ["search:read"] } });
    expect((await store.botFor("T0ONE")).botToken).toBe("xoxb-one-secret");
    const fetched = await store.fetchInstallation({ teamId: "T0ONE", enterpriseId: undefined, isEnterpriseInstall: false });
    expect(fetched.bot).toMatchObject({ token: "xoxb-one-secret", userId: "U0BOT" });
    expect(fetched.user).toMatchObject({ id: "U0OTHER", token: "xoxp-other" });
  });

  it("finds an org-wide install for any workspace of its Grid org, a workspace's own install first", async () => {
    const store = new DbInstallationStore({ db: db.database.sql, cipher: new TokenCipher(randomBytes(32)), log: silentLogger });
    await store.storeInstallation(orgWide("E0GRID", "xoxb-org-token"));
    await store.storeInstallation(workspace("T0OWN", "xoxb-own-token", "E0GRID"));
    expect((await store.botFor("T0ANY", "E0GRID")).botToken).toBe("xoxb-org-token");
    expect((await store.botFor("T0OWN", "E0GRID")).botToken).toBe("xoxb-own-token");
    await expect(store.botFor("T0ANY")).rejects.toThrow(
      /^Crewline is not installed in workspace T0ANY \(a workspace an Enterprise Grid org-wide install serves is found with its org: a flow's enterprise:, FLOW_ENTERPRISE\)$/,
    );
    const org = await store.fetchInstallation({ teamId: undefined, enterpriseId: "E0GRID", isEnterpriseInstall: true });
    expect(org.bot?.token).toBe("xoxb-org-token");
    expect(org.isEnterpriseInstall).toBe(true);

    await store.deleteInstallation({ teamId: undefined, enterpriseId: "E0GRID", isEnterpriseInstall: true });
    await expect(store.botFor("T0ANY", "E0GRID")).rejects.toThrow(InstallationNotFound);
    expect((await store.botFor("T0OWN", "E0GRID")).botToken).toBe("xoxb-own-token");
  });

  it("rotates keys: reads with the previous key, re-seals with the current one, then needs only the new key", async () => {
    const oldKey = randomBytes(32);
    const newKey = randomBytes(32);
    await new DbInstallationStore({ db: db.database.sql, cipher: new TokenCipher(oldKey), log: silentLogger }).storeInstallation(workspace("T0ONE", "xoxb-one-secret"));
    const before = await prismaOf(db.database).slackInstallation.findFirstOrThrow();

    // Without the old key the token cannot be read, and the error says where to put it.
    await expect(new DbInstallationStore({ db: db.database.sql, cipher: new TokenCipher(newKey), log: silentLogger }).botFor("T0ONE")).rejects.toThrow(/ENCRYPTION_KEY_PREVIOUS/);

    const rotating = new DbInstallationStore({ db: db.database.sql, cipher: new TokenCipher(newKey, [oldKey]), log: silentLogger });
    expect((await rotating.botFor("T0ONE")).botToken).toBe("xoxb-one-secret");
    expect(await rotating.resealStale()).toBe(1);
    expect(await rotating.resealStale()).toBe(0);
    const after = await prismaOf(db.database).slackInstallation.findFirstOrThrow();
    for (const field of ["botToken", "botRefreshToken", "userToken", "userRefreshToken"] as const) expect(after[field]).not.toBe(before[field]);

    const newOnly = new DbInstallationStore({ db: db.database.sql, cipher: new TokenCipher(newKey), log: silentLogger });
    expect((await newOnly.botFor("T0ONE")).botToken).toBe("xoxb-one-secret");
    expect((await newOnly.fetchInstallation({ teamId: "T0ONE", enterpriseId: undefined, isEnterpriseInstall: false })).user.refreshToken).toBe("xoxe-user-refresh-T0ONE");
  });

  it("one workspace whose tokens cannot be opened (a removed key, a damaged row) fails alone, once loudly; the others are re-sealed and served", async () => {
    const removedKey = randomBytes(32);
    const oldKey = randomBytes(32);
    const newKey = randomBytes(32);
    await new DbInstallationStore({ db: db.database.sql, cipher: new TokenCipher(removedKey), log: silentLogger }).storeInstallation(workspace("T0LOST", "xoxb-lost-secret"));
    await new DbInstallationStore({ db: db.database.sql, cipher: new TokenCipher(oldKey), log: silentLogger }).storeInstallation(workspace("T0ONE", "xoxb-one-secret"));
    await new DbInstallationStore({ db: db.database.sql, cipher: new TokenCipher(oldKey), log: silentLogger }).storeInstallation(workspace("T0BROKEN", "xoxb-broken-secret"));
    await prismaOf(db.database).slackInstallation.update({ where: { installKey: "T:T0BROKEN" }, data: { botToken: "garbage" } });

    const lines: string[] = [];
    const store = new DbInstallationStore({
      db: db.database.sql,
      cipher: new TokenCipher(newKey, [oldKey]),
      log: createLogger("debug", (l) => lines.push(l)),
    });
    // At start: no throw; the readable workspace is re-sealed.
    expect(await store.resealStale()).toBe(1);
    expect((await store.botFor("T0ONE")).botToken).toBe("xoxb-one-secret");
    await expect(store.botFor("T0LOST")).rejects.toThrow(InstallationUnreadable);
    await expect(store.botFor("T0LOST")).rejects.toThrow(/workspace T0LOST cannot be opened: sealed with a key that is not configured/);
    await expect(store.fetchInstallation({ teamId: "T0BROKEN", enterpriseId: undefined, isEnterpriseInstall: false })).rejects.toThrow(/workspace T0BROKEN cannot be opened/);

    const errors = lines.filter((l) => /"level":"error"/.test(l));
    expect(errors).toHaveLength(2); // once per workspace, however often it is asked for
    expect(errors.join("\n")).toContain("T0LOST");
    expect(errors.join("\n")).toContain("T0BROKEN");
    expect(lines.join("\n")).not.toMatch(/xoxb-|xoxp-|xoxe-/);
    // A second start re-seals nothing more and still does not throw.
    expect(await store.resealStale()).toBe(0);
  });

  it("reads a workspace's row once per 10 s for the requests that ask for it; its own writes are seen at once", async () => {
    let now = new Date("2026-05-04T10:00:00.000Z");
    const store = new DbInstallationStore({ db: db.database.sql, cipher: new TokenCipher(randomBytes(32)), log: silentLogger, clock: { now: () => now } });
    const query = { teamId: "T0ONE", enterpriseId: undefined, isEnterpriseInstall: false };
    await store.storeInstallation(workspace("T0ONE", "xoxb-one"));
    expect((await store.fetchInstallation(query)).bot?.token).toBe("xoxb-one");
    // Written through the store: the next request sees it.
    await store.storeInstallation(workspace("T0ONE", "xoxb-one-again"));
    expect((await store.fetchInstallation(query)).bot?.token).toBe("xoxb-one-again");
    // Removed by another replica (here: straight from the database): seen once 10 s have passed.
    await prismaOf(db.database).slackInstallation.deleteMany({});
    now = new Date(now.getTime() + 9_999);
    expect((await store.fetchInstallation(query)).bot?.token).toBe("xoxb-one-again");
    now = new Date(now.getTime() + 1);
    await expect(store.fetchInstallation(query)).rejects.toThrow(InstallationNotFound);
  });

  it("refuses a token moved to another workspace's row or edited in the database", async () => {
    const store = new DbInstallationStore({ db: db.database.sql, cipher: new TokenCipher(randomBytes(32)), log: silentLogger });
    await store.storeInstallation(workspace("T0ONE", "xoxb-one-secret"));
    await store.storeInstallation(workspace("T0TWO", "xoxb-two-secret"));
    const one = await prismaOf(db.database).slackInstallation.findUniqueOrThrow({ where: { installKey: "T:T0ONE" } });
    await prismaOf(db.database).slackInstallation.update({ where: { installKey: "T:T0TWO" }, data: { botToken: one.botToken } });
    await expect(store.botFor("T0TWO")).rejects.toThrow(/integrity check/);
  });
});

describe("InstalledClients", () => {
  it("gives each workspace a client with its own token, cached, re-read after the TTL or when forgotten", async () => {
    const store = new DbInstallationStore({ db: db.database.sql, cipher: new TokenCipher(randomBytes(32)), log: silentLogger });
    await store.storeInstallation(workspace("T0ONE", "xoxb-one"));
    await store.storeInstallation(workspace("T0TWO", "xoxb-two"));
    let now = 0;
    const clients = new InstalledClients({ tokens: store, clientOptions: {}, ttlMs: 1000, now: () => now });
    const one = await clients.forTeam("T0ONE");
    expect(one.token).toBe("xoxb-one");
    expect((await clients.forTeam("T0TWO")).token).toBe("xoxb-two");
    expect(await clients.forTeam("T0ONE")).toBe(one);

    await store.deleteInstallation({ teamId: "T0ONE", enterpriseId: undefined, isEnterpriseInstall: false });
    expect(await clients.forTeam("T0ONE")).toBe(one); // cached until the TTL
    now = 1500;
    await expect(clients.forTeam("T0ONE")).rejects.toThrow(InstallationNotFound);
    await store.storeInstallation(workspace("T0ONE", "xoxb-one-again"));
    expect((await clients.forTeam("T0ONE")).token).toBe("xoxb-one-again");

    await store.deleteInstallation({ teamId: "T0TWO", enterpriseId: undefined, isEnterpriseInstall: false });
    clients.forget({ teamId: "T0TWO" });
    await expect(clients.forTeam("T0TWO")).rejects.toThrow(InstallationNotFound);
  });
});

describe("a new install and Slack's refusal of streaming", () => {
  it("an org-wide install forgets the refusals of the org's workspaces; a workspace's install its own", async () => {
    const p = prismaOf(db.database);
    const store = new DbInstallationStore({ db: db.database.sql, cipher: new TokenCipher(randomBytes(32)), log: silentLogger });
    await p.execution.create({
      data: { crewName: "c", teamId: "T0GRIDA", enterpriseId: "E0GRID", channelId: "C1", userId: "U1", inputs: {}, requestId: "r1", webhookSecret: "s" },
    });
    for (const teamId of ["T0GRIDA", "T0OTHER"]) await p.streamingRefusal.create({ data: { teamId, error: "missing_scope", refusedAt: new Date() } });
    await store.storeInstallation(orgWide("E0GRID", "xoxb-org"));
    expect((await p.streamingRefusal.findMany()).map((r) => r.teamId)).toEqual(["T0OTHER"]);
    await store.storeInstallation(workspace("T0OTHER", "xoxb-other"));
    expect(await p.streamingRefusal.count()).toBe(0);
  });
});
