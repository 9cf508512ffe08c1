// The signature of a flow's human feedback request: `X-CrewAI-Signature: sha256=<hex>`, HMAC-SHA256
// with the webhook's secret over "{X-CrewAI-Timestamp}.{raw body}", and a timestamp within 5 minutes.
import crypto from "node:crypto";

export const SIGNATURE_HEADER = "x-crewai-signature";
export const TIMESTAMP_HEADER = "x-crewai-timestamp";
export const MAX_SKEW_SECONDS = 5 * 60;

export type SignatureVerdict = { ok: true } | { ok: false; reason: "missing" | "malformed" | "stale" | "mismatch" };

export function signFlowBody(secret: string, timestamp: string | number, rawBody: Buffer | string): string {
  return `sha256=${crypto.createHmac("sha256", secret).update(`${timestamp}.`).update(rawBody).digest("hex")}`;
}

/** Checks a delivery's signature in constant time; nothing about the body or secret is returned. */
export function verifyFlowSignature(p: {
  secret: string;
  timestamp: string | string[] | undefined;
  signature: string | string[] | undefined;
  rawBody: Buffer;
  nowMs?: number;
}): SignatureVerdict {
  const timestamp = Array.isArray(p.timestamp) ? p.timestamp[0] : p.timestamp;
  const signature = Array.isArray(p.signature) ? p.signature[0] : p.signature;
  if (!timestamp || !signature) return { ok: false, reason: "missing" };
  if (!/^\d{1,12}$/.test(timestamp.trim())) return { ok: false, reason: "malformed" };
  const m = /^sha256=([0-9a-fA-F]{64})$/.exec(signature.trim());
  if (!m) return { ok: false, reason: "malformed" };
  const now = Math.floor((p.nowMs ?? Date.now()) / 1000);
  if (Math.abs(now - Number(timestamp.trim())) > MAX_SKEW_SECONDS) return { ok: false, reason: "stale" };
  const expected = crypto.createHmac("sha256", p.secret).update(`${timestamp.trim()}.`).update(p.rawBody).digest();
  const given = Buffer.from(m[1]!, "hex");
  return given.length === expected.length && crypto.timingSafeEqual(given, expected) ? { ok: true } : { ok: false, reason: "mismatch" };
}
