// A stand-in in front of a local service that holds the POSTs a predicate picks (never answered, never
// passed on: the bot that sent one dies mid-call) until release(); everything else goes through.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { cleanups } from "./replicas.js";

export interface HoldingProxy {
  url: string;
  /** How many requests were held. */
  held(): number;
  /** Lets every later request through. */
  release(): void;
}

export async function holdingProxy(target: string, hold: (path: string) => boolean): Promise<HoldingProxy> {
  let holding = true;
  let heldCount = 0;
  const proxy = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (req.method === "POST" && holding && hold(req.url ?? "")) {
      heldCount++;
      return;
    }
    const answer = await fetch(`${target}${req.url}`, {
      method: req.method,
      headers: { authorization: req.headers.authorization ?? "", "content-type": req.headers["content-type"] ?? "application/json" },
      ...(chunks.length ? { body: Buffer.concat(chunks) } : {}),
    });
    res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" });
    res.end(Buffer.from(await answer.arrayBuffer()));
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise((resolve) => proxy.close(resolve)));
  return {
    url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
    held: () => heldCount,
    release: () => {
      holding = false;
    },
  };
}
