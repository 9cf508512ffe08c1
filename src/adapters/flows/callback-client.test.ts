import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { flowCallbackClient } from "./callback-client.js";

let server: http.Server | undefined;
afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

/** A flow's callback endpoint answering `status` with `body(url)`, the URL it was called at. */
async function flowAnswering(status: number, body: (url: string) => string): Promise<string> {
  server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(status, { "content-type": "application/json" }).end(body(`http://${req.headers.host}${req.url}`)));
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("a flow's callback", () => {
  const token = "resp-token-0123456789abcdefghijklmnop";

  it("never shows the token of the URL it was called at, however the flow quotes it back, in an error or an answer it took", async () => {
    for (const [status, quote] of [
      [401, (_url: string) => JSON.stringify({ message: `Invalid response token '${token}'` })],
      [503, (url: string) => JSON.stringify({ error: `upstream refused ${url}` })],
      [400, (url: string) => JSON.stringify({ detail: `bad request to ${encodeURIComponent(url)}` })],
      // An answer the flow took is stored and shown too.
      [200, (url: string) => JSON.stringify({ message: `Feedback stored for ${url}` })],
      [201, (_url: string) => JSON.stringify({ message: `Stored under response token ${token}` })],
      [200, (url: string) => JSON.stringify({ status: `received at ${encodeURIComponent(url)}` })],
    ] as const) {
      const base = await flowAnswering(status, quote);
      const answer = await flowCallbackClient({ timeoutMs: 2000 }).answer(`${base}/respond/abc?token=${token}`, "ok");
      if (status < 300) expect(answer).toMatchObject({ kind: "ok", message: expect.stringMatching(/^(Feedback stored for|Stored under|received at) /) });
      else expect(answer.message).toContain(String(status));
      expect(answer.message).not.toContain(token);
      await new Promise<void>((resolve) => server!.close(() => resolve()));
      server = undefined;
    }
  });

  it("closes only on what describes the request; a refusal of the answer itself can be answered again; a gateway's time-out or the flow's may have reached it", async () => {
    for (const [status, kind, maybeTaken] of [
      [401, "refused", undefined],
      [403, "refused", undefined],
      [404, "refused", undefined],
      [409, "refused", undefined],
      [410, "refused", undefined],
      [400, "failed", undefined],
      [413, "failed", undefined],
      [422, "failed", undefined],
      [429, "failed", undefined],
      [503, "failed", undefined],
      // A 502 is a gateway that could not reach the flow; a 504 one that stopped waiting for it.
      [502, "failed", undefined],
      [504, "failed", true],
    ] as const) {
      const base = await flowAnswering(status, () => JSON.stringify({ message: "feedback too long" }));
      const answer = await flowCallbackClient({ timeoutMs: 2000 }).answer(`${base}/respond`, "ok");
      expect({ status, kind: answer.kind, maybeTaken: answer.maybeTaken }).toEqual({ status, kind, maybeTaken });
      await new Promise<void>((resolve) => server!.close(() => resolve()));
      server = undefined;
    }
    // Nothing listens, or TLS fails before anything is sent: it cannot have the answer. Listening but silent: it may.
    expect((await flowCallbackClient({ timeoutMs: 2000 }).answer("http://127.0.0.1:1/respond", "ok")).maybeTaken).toBeUndefined();
    const plain = await flowAnswering(200, () => "{}");
    const tls = await flowCallbackClient({ timeoutMs: 2000 }).answer(`${plain.replace("http:", "https:")}/respond`, "ok");
    expect(tls).toMatchObject({ kind: "failed", message: "the flow could not be reached" });
    expect(tls.maybeTaken).toBeUndefined();
    await new Promise<void>((resolve) => server!.close(() => resolve()));
    server = http.createServer((req) => req.resume());
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    const silent = await flowCallbackClient({ timeoutMs: 300 }).answer(`http://127.0.0.1:${(server.address() as AddressInfo).port}/respond`, "ok");
    expect(silent).toMatchObject({ kind: "failed", status: null, message: "the flow did not answer in time", maybeTaken: true });
    server.closeAllConnections();
  });
});
