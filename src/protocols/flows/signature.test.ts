import crypto from "node:crypto";
import { describe, expect, it } from "vitest";
import { signFlowBody, verifyFlowSignature } from "./signature.js";

const secret = "whsec-test";
const body = Buffer.from(JSON.stringify({ event_type: "new_request", id: "r1", note: "ünïcødé ✓" }));
const now = 1_800_000_000_000;
const ts = String(now / 1000);

describe("verifyFlowSignature", () => {
  it("accepts the platform's signature: sha256= HMAC-SHA256 of '{timestamp}.{raw body}'", () => {
    const expected = `sha256=${crypto
      .createHmac("sha256", secret)
      .update(`${ts}.${body.toString("utf8")}`)
      .digest("hex")}`;
    expect(signFlowBody(secret, ts, body)).toBe(expected);
    expect(verifyFlowSignature({ secret, timestamp: ts, signature: expected, rawBody: body, nowMs: now })).toEqual({ ok: true });
    expect(verifyFlowSignature({ secret, timestamp: ts, signature: expected.toUpperCase().replace("SHA256=", "sha256="), rawBody: body, nowMs: now }).ok).toBe(true);
  });

  it("refuses another secret, another body, another timestamp", () => {
    const sig = signFlowBody(secret, ts, body);
    expect(verifyFlowSignature({ secret: "other", timestamp: ts, signature: sig, rawBody: body, nowMs: now })).toEqual({ ok: false, reason: "mismatch" });
    expect(verifyFlowSignature({ secret, timestamp: ts, signature: sig, rawBody: Buffer.concat([body, Buffer.from(" ")]), nowMs: now })).toEqual({ ok: false, reason: "mismatch" });
    expect(verifyFlowSignature({ secret, timestamp: String(Number(ts) + 1), signature: sig, rawBody: body, nowMs: now })).toEqual({ ok: false, reason: "mismatch" });
  });

  it("refuses missing and malformed headers", () => {
    const sig = signFlowBody(secret, ts, body);
    expect(verifyFlowSignature({ secret, timestamp: undefined, signature: sig, rawBody: body, nowMs: now }).ok).toBe(false);
    expect(verifyFlowSignature({ secret, timestamp: ts, signature: undefined, rawBody: body, nowMs: now })).toEqual({ ok: false, reason: "missing" });
    expect(verifyFlowSignature({ secret, timestamp: ts, signature: sig.slice("sha256=".length), rawBody: body, nowMs: now })).toEqual({ ok: false, reason: "malformed" });
    expect(verifyFlowSignature({ secret, timestamp: ts, signature: "sha256=abc", rawBody: body, nowMs: now })).toEqual({ ok: false, reason: "malformed" });
    expect(verifyFlowSignature({ secret, timestamp: "yesterday", signature: sig, rawBody: body, nowMs: now })).toEqual({ ok: false, reason: "malformed" });
  });

  it("accepts timestamps within 5 minutes either way and refuses older or newer ones", () => {
    for (const skew of [-300, 300, 0]) {
      const t = String(now / 1000 + skew);
      expect(verifyFlowSignature({ secret, timestamp: t, signature: signFlowBody(secret, t, body), rawBody: body, nowMs: now }).ok).toBe(true);
    }
    for (const skew of [-301, 301]) {
      const t = String(now / 1000 + skew);
      expect(verifyFlowSignature({ secret, timestamp: t, signature: signFlowBody(secret, t, body), rawBody: body, nowMs: now })).toEqual({ ok: false, reason: "stale" });
    }
  });
});
