// A workspace's cached client after a reinstall elsewhere: through a local Slack Web API that refuses
// the old token as Slack does (token_revoked) and takes the new one.
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { workspace } from "../../../test/support/installations.js";
import { createTestDatabase } from "../../../test/support/test-database.js";
import { TokenCipher } from "../../crypto/token-cipher.js";
import { silentLogger } from "../../log/log.js";
import { InstalledClients } from "./clients.js";
import { DbInstallationStore } from "./installations.js";

let server: http.Server;
let url: string;
let calls: string[];
let revoked: Set<string>;

beforeEach(async () => {
  calls = [];
  revoked = new Set();
  server = http.createServer((req, res) => {
    const token = (req.headers.authorization ?? "").replace(/^Bearer /, "");
    req.resume().on("end", () => {
      calls.push(token);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(revoked.has(token) ? { ok: false, error: "token_revoked" } : { ok: true, channel: "C1", ts: "1.1" }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/`;
});
afterEach(() => new Promise((resolve) => server.close(resolve)));

describe("InstalledClients", () => {
  it("a call refused for a token a reinstall replaced is made once more with the store's new token; later calls use it", async () => {
    let stored = "xoxb-old";
    let lookups = 0;
    const clients = new InstalledClients({
      tokens: {
        botFor: async () => {
          lookups++;
          return { teamId: "T1", enterpriseId: null, botToken: stored };
        },
      },
      clientOptions: { slackApiUrl: url, retryConfig: { retries: 0 } },
    });
    const client = await clients.forTeam("T1");
    await client.chat.postMessage({ channel: "C1", text: "hi" });
    // Another replica's uninstall and reinstall: Slack revokes the old token, the store holds a new one.
    revoked.add("xoxb-old");
    stored = "xoxb-new";
    await expect(client.chat.postMessage({ channel: "C1", text: "again" })).resolves.toMatchObject({ ok: true });
    expect(calls).toEqual(["xoxb-old", "xoxb-old", "xoxb-new"]);
    // The cache took the new token: the next caller gets a client that uses it at once.
    await (await clients.forTeam("T1")).chat.postMessage({ channel: "C1", text: "third" });
    expect(calls.at(-1)).toBe("xoxb-new");
    expect(lookups).toBe(2);
  });

  it("a token the store still holds is refused as Slack said: no second call", async () => {
    const clients = new InstalledClients({
      tokens: { botFor: async () => ({ teamId: "T1", enterpriseId: null, botToken: "xoxb-gone" }) },
      clientOptions: { slackApiUrl: url, retryConfig: { retries: 0 } },
    });
    revoked.add("xoxb-gone");
    await expect((await clients.forTeam("T1")).chat.postMessage({ channel: "C1", text: "hi" })).rejects.toMatchObject({ data: { error: "token_revoked" } });
    expect(calls).toEqual(["xoxb-gone"]);
  });

  it("after a reinstall through another replica, the new token is read past the store's recent rows", async () => {
    const db = await createTestDatabase();
    try {
      let now = Date.parse("2026-05-04T10:00:00Z");
      const clock = { now: () => new Date(now) };
      const key = randomBytes(32);
      const replica = () => new DbInstallationStore({ db: db.database.sql, cipher: new TokenCipher(key), log: silentLogger, clock });
      const [a, b] = [replica(), replica()];
      await a.storeInstallation(workspace("T0ONE", "xoxb-old"));
      const client = await new InstalledClients({ tokens: b, clientOptions: { slackApiUrl: url, retryConfig: { retries: 0 } }, now: () => now }).forTeam("T0ONE");
      await client.chat.postMessage({ channel: "C1", text: "hi" });
      // Replica b served a Slack request of the workspace (Bolt's authorize reads the same rows), then
      // the workspace removed and added the app again through replica a: Slack revoked the old token.
      now += 5_000;
      await b.fetchInstallation({ teamId: "T0ONE", enterpriseId: undefined, isEnterpriseInstall: false });
      now += 2_000;
      revoked.add("xoxb-old");
      await a.storeInstallation(workspace("T0ONE", "xoxb-new"));
      now += 1_000;
      await expect(client.chat.postMessage({ channel: "C1", text: "again" })).resolves.toMatchObject({ ok: true });
      expect(calls).toEqual(["xoxb-old", "xoxb-old", "xoxb-new"]);
    } finally {
      await db.drop();
    }
  });
});
