// A flow's answer on the wire: POST {feedback, source: "slack"} to the callback URL its request
// carried, through undici like the crew client. The status decides; the body only words the outcome,
// and is read up to a limit (an endless answer is cut off). The URL is never logged or shown.
import { request } from "undici";
import { readBoundedText } from "../../text/bounded-body.js";
import { redactEchoes, sentSecrets } from "../../text/echoes.js";
import { truncatePlain } from "../../text/truncate.js";
import { answerReason, withoutTokens } from "../../usecases/flows.js";
import type { FlowCallback, FlowCallbackAnswer } from "../../usecases/ports.js";

/** Statuses about the request itself (gone, answered, expired, its token refused): no other answer will do. */
const REQUEST_REFUSED = new Set([401, 403, 404, 409, 410]);
/** A gateway that stopped waiting (504): the flow behind it may have taken the answer all the same. A 502 is one that could not reach it. */
const GATEWAY_TIMEOUT = 504;
/** A connection cut once the request was sent: the flow may have the answer. Any other error (refused, DNS, TLS) sent nothing. */
const CUT_MID_CALL = new Set(["UND_ERR_SOCKET", "ECONNRESET"]);

export function flowCallbackClient(opts: { timeoutMs?: number } = {}): FlowCallback {
  const timeoutMs = opts.timeoutMs ?? 15_000;
  return {
    timeoutMs,
    async answer(callbackUrl: string, feedback: string): Promise<FlowCallbackAnswer> {
      try {
        const res = await request(callbackUrl, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json" },
          body: JSON.stringify({ feedback, source: "slack" }),
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
          signal: AbortSignal.timeout(timeoutMs),
        });
        const text = ((await readBoundedText(res.body).catch(() => "")) ?? "").slice(0, 4000);
        const status = res.statusCode;
        // Whatever it answers, the flow may quote the URL it was called at, whose token answers the
        // request: never stored or shown.
        const secrets = sentSecrets(callbackUrl);
        if (status >= 200 && status < 300) {
          let message: string | null = null;
          const said = (words: string, max: number) => truncatePlain(withoutTokens(redactEchoes(words, secrets)), max);
          try {
            const json = JSON.parse(text) as Record<string, unknown>;
            message = typeof json.message === "string" ? said(json.message, 300) : typeof json.status === "string" ? said(json.status, 100) : null;
          } catch {
            /* an empty or non-JSON 2xx is fine */
          }
          return { kind: "ok", status, message };
        }
        // undici does not follow redirects: a 3xx is an answer that failed, like a 5xx.
        const reason = answerReason(status, redactEchoes(text, secrets));
        if (REQUEST_REFUSED.has(status)) return { kind: "refused", status, message: reason };
        // Any other 4xx is about the answer (400, 413, 422): its words tell the person what to change.
        if (status >= 400 && status < 500 && status !== 408 && status !== 429) return { kind: "failed", status, message: reason };
        return { kind: "failed", status, message: `the flow answered ${reason}`, ...(status === GATEWAY_TIMEOUT ? { maybeTaken: true } : {}) };
      } catch (err) {
        const code = (err as { code?: string }).code ?? "";
        const timedOut = (err as Error).name === "TimeoutError" || code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT";
        // Sent, then no answer (a time-out, a connection cut mid-call): the flow may have taken it.
        if (timedOut) return { kind: "failed", status: null, message: "the flow did not answer in time", maybeTaken: true };
        if (CUT_MID_CALL.has(code)) return { kind: "failed", status: null, message: "the connection to the flow broke before it answered", maybeTaken: true };
        return { kind: "failed", status: null, message: "the flow could not be reached" };
      }
    },
  };
}
