import { afterEach, describe, expect, it } from "vitest";
import { type WebSocket, WebSocketServer } from "ws";
import { type Crewline, createCrewline } from "../../src/app.js";
import { silentLogger } from "../../src/log/log.js";
import { type SimCrewService, startCrewService } from "../../src/sim/crew-service.js";
import { type FakeSlack, startFakeSlack } from "../support/fake-slack.js";
import { BOT_TOKEN, CHANNEL, CREW_TOKEN, eventually, freePort, USER } from "../support/harness.js";
import { scrape } from "../support/metrics.js";
import { createTestDatabase, type TestDatabase } from "../support/test-database.js";

// Socket Mode through a real WebSocket: the fake Slack's apps.connections.open hands out the URL of
// a local server that plays Slack's side (hello, envelopes, acks).
let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step().catch(() => {});
  cleanup = [];
});

describe("Socket Mode", () => {
  it("connects with the app token, receives /crew over the socket, acks it and opens the modal; /healthz still serves", async () => {
    const slack: FakeSlack = await startFakeSlack();
    const crew: SimCrewService = await startCrewService({ token: CREW_TOKEN, inputs: ["topic"] });
    const db: TestDatabase = await createTestDatabase();
    const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
    await new Promise<void>((resolve) => wss.once("listening", () => resolve()));
    cleanup.push(
      () => slack.close(),
      () => crew.close(),
      () => db.drop(),
      () => new Promise<void>((r) => wss.close(() => r())),
    );
    slack.socketModeUrl = `ws://127.0.0.1:${(wss.address() as { port: number }).port}/`;

    const acks: any[] = [];
    const connected = new Promise<WebSocket>((resolve) =>
      wss.on("connection", (socket) => {
        socket.on("message", (data) => acks.push(JSON.parse(String(data))));
        socket.send(JSON.stringify({ type: "hello", num_connections: 1, debug_info: { host: "test" }, connection_info: { app_id: "A0APP" } }));
        resolve(socket);
      }),
    );

    const port = await freePort();
    const bot: Crewline = createCrewline(
      {
        slack: { botToken: BOT_TOKEN, appToken: "xapp-1-test-app-token", apiUrl: slack.url },
        port,
        // Behind a proxy that passes PUBLIC_URL's path through: its /hooks/ are the bot's too.
        publicUrl: `http://127.0.0.1:${port}/crew(line)`,
        dataDir: "unused",
        crews: [{ name: "research", baseUrl: crew.url, token: CREW_TOKEN }],
        metricsToken: "metrics-token-0123456789abcdef",
      },
      { log: silentLogger, database: db.database },
    );
    cleanup.push(() => bot.stop());
    await bot.start();
    const socket = await connected;
    expect(slack.callsTo("apps.connections.open")[0]!.token).toBe("xapp-1-test-app-token");

    socket.send(
      JSON.stringify({
        envelope_id: "env-1",
        type: "slash_commands",
        accepts_response_payload: true,
        payload: { command: "/crew", text: "", user_id: USER, channel_id: CHANNEL, team_id: "T0TEAM", trigger_id: "trig-socket-1", response_url: slack.responseUrl(CHANNEL) },
      }),
    );
    await eventually(() => acks.find((a) => a.envelope_id === "env-1"), { what: "the envelope ack" });
    const [open] = await slack.waitForCalls("views.open", 1);
    expect(open!.args.trigger_id).toBe("trig-socket-1");
    const form = await eventually(() =>
      slack
        .callsTo("views.update")
        .map((c) => c.args.view as any)
        .find((v) => v?.submit),
    );
    expect(form.blocks.filter((b: any) => b.type === "input").map((b: any) => b.label.text)).toEqual(["Topic"]);

    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(health.status).toBe(200);
    // The callback route answers for itself (Socket Mode's server would say only "not found").
    for (const path of ["/hooks", "/crew(line)/hooks"]) {
      const callback = await fetch(`http://127.0.0.1:${port}${path}/1b4e28ba-2fa1-11d2-883f-0016d3cca427/task/secret-0123456789`, { method: "POST", body: "{}" });
      expect({ path, status: callback.status, body: await callback.json() }).toEqual({ path, status: 404, body: { error: "unknown execution" } });
    }
    // /metrics on the same side server; the Socket Mode client's and the listeners' Web API calls are counted.
    const metrics = await scrape(`http://127.0.0.1:${port}`, "Bearer metrics-token-0123456789abcdef");
    expect(metrics.status).toBe(200);
    expect(metrics.value("crewline_slack_api_calls_total", { method: "views.open" })).toBe(1);
    expect(metrics.value("crewline_slack_api_calls_total", { method: "apps.connections.open" })).toBe(slack.callsTo("apps.connections.open").length);
    expect(metrics.value("crewline_crew_api_calls_total", { crew: "research", operation: "inputs" })).toBe(1);
  });
});
