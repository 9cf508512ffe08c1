// GET /metrics: Prometheus text format. On the public port only behind a bearer token (METRICS_TOKEN);
// without one the figures are served only on METRICS_PORT (bound to loopback by default), or not at all.
import crypto from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../../log/log.js";

/** The figures served (src/metrics/ provides them; this route does not import it). */
export interface Scrapable {
  contentType: string;
  scrape(): Promise<string>;
}

const digest = (text: string) => crypto.createHash("sha256").update(text).digest();

/** Whether an Authorization header carries the token; constant time in the header's content. */
export function bearerMatches(header: string | undefined, expected: Buffer): boolean {
  const given = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? "")?.[1] ?? "";
  // Hash both sides: equal lengths for timingSafeEqual, and the comparison reveals nothing of the token.
  return crypto.timingSafeEqual(digest(given), expected);
}

/**
 * `token`: the bearer token requests must carry; `"off"`: the figures are not served here (404);
 * undefined: open (the loopback metrics port).
 */
export function metricsHandler(metrics: Scrapable, token: string | "off" | undefined, log: Logger) {
  const expected = token && token !== "off" ? digest(token) : undefined;
  return async (req: IncomingMessage, res: ServerResponse) => {
    if (token === "off") {
      const text = "metrics are not served on this port: set METRICS_TOKEN (then send Authorization: Bearer <token>) or METRICS_PORT\n";
      res.writeHead(404, { "content-type": "text/plain; charset=utf-8", "content-length": Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    if (expected && !bearerMatches(req.headers.authorization, expected)) {
      const text = "unauthorized: send Authorization: Bearer <METRICS_TOKEN>\n";
      res.writeHead(401, { "content-type": "text/plain; charset=utf-8", "www-authenticate": 'Bearer realm="metrics"', "content-length": Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    try {
      const text = await metrics.scrape();
      res.writeHead(200, { "content-type": metrics.contentType, "cache-control": "no-store", "content-length": Buffer.byteLength(text) });
      res.end(text);
    } catch (err) {
      log.error("metrics scrape failed", { err });
      if (!res.headersSent) {
        res.writeHead(500, { "content-type": "text/plain; charset=utf-8" });
        res.end("metrics unavailable\n");
      }
    }
  };
}
