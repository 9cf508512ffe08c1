// The local flow deployment: signed requests as the platform sends them, and a callback that records
// one answer per request and refuses repeated, late, or unauthenticated ones.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { verifyFlowSignature } from "../protocols/flows/signature.js";
import { type SimFlowService, startFlowService } from "./flow-service.js";

let flow: SimFlowService | undefined;
let receiver: http.Server | undefined;
afterEach(async () => {
  await flow?.close();
  await new Promise((r) => (receiver ? receiver.close(r) : r(undefined)));
  flow = receiver = undefined;
});

async function startReceiver(): Promise<{ url: string; got: { headers: http.IncomingHttpHeaders; raw: Buffer }[] }> {
  const got: { headers: http.IncomingHttpHeaders; raw: Buffer }[] = [];
  receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      got.push({ headers: req.headers, raw: Buffer.concat(chunks) });
      res.writeHead(202).end("{}");
    });
  });
  await new Promise<void>((r) => receiver!.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks/flows/flow`, got };
}

const post = (url: string, body: unknown) => fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

describe("local flow service", () => {
  it("sends requests signed over '{timestamp}.{raw body}' and accepts one answer per request", async () => {
    const target = await startReceiver();
    flow = await startFlowService({ secret: "s3cret", targetUrl: target.url });
    const { body } = await flow.send({ emit: ["yes", "no"] });
    const [delivery] = target.got;
    expect(
      verifyFlowSignature({ secret: "s3cret", timestamp: delivery!.headers["x-crewai-timestamp"], signature: delivery!.headers["x-crewai-signature"], rawBody: delivery!.raw }).ok,
    ).toBe(true);
    expect(JSON.parse(delivery!.raw.toString())).toMatchObject({ event_type: "new_request", emit: ["yes", "no"] });

    const callback = String(body.callback_url);
    expect((await post(callback, { feedback: "yes", source: "slack" })).status).toBe(200);
    expect((await post(callback, { feedback: "no", source: "slack" })).status).toBe(409);
    expect((await post(callback.replace(/token=[^&]+/, "token=wrong"), { feedback: "no" })).status).toBe(401);
    expect(flow.answers).toEqual([expect.objectContaining({ requestId: body.id, feedback: "yes", source: "slack" })]);
    expect(flow.calls.map((c) => c.status)).toEqual([200, 409, 401]);
  });

  it("refuses answers after the answer window with 410", async () => {
    const target = await startReceiver();
    flow = await startFlowService({ secret: "s", targetUrl: target.url, answerWindowMs: 1 });
    const { body } = await flow.send({ emit: null });
    expect(JSON.parse(target.got[0]!.raw.toString()).emit).toBeUndefined();
    // Fixed wait: real time must pass the 1 ms answer window (the service reads the system clock).
    await new Promise((r) => setTimeout(r, 20));
    expect((await post(String(body.callback_url), { feedback: "late" })).status).toBe(410);
    expect(flow.answers).toHaveLength(0);
  });
});
