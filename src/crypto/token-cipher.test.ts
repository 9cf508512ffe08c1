import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { DecryptError, parseEncryptionKey, TokenCipher } from "./token-cipher.js";

describe("parseEncryptionKey", () => {
  it("takes 32 random bytes as hex or base64 (standard or url-safe)", () => {
    const bytes = randomBytes(32);
    for (const text of [bytes.toString("hex"), bytes.toString("base64"), bytes.toString("base64url")]) {
      const parsed = parseEncryptionKey(text);
      expect("key" in parsed && parsed.key.equals(bytes)).toBe(true);
    }
  });

  it("refuses the wrong length and obviously weak keys, without echoing them", () => {
    const cases = [
      randomBytes(16).toString("base64"),
      randomBytes(31).toString("hex"),
      "correct horse battery staple",
      Buffer.alloc(32).toString("base64"),
      Buffer.alloc(32, 0x61).toString("hex"),
      Buffer.from(Array.from({ length: 32 }, (_, i) => i)).toString("base64"),
      Buffer.from(Array.from({ length: 32 }, (_, i) => i % 4)).toString("hex"),
    ];
    for (const text of cases) {
      const parsed = parseEncryptionKey(text);
      expect("problem" in parsed, text).toBe(true);
      if ("problem" in parsed) expect(parsed.problem).not.toContain(text);
    }
    expect((parseEncryptionKey(Buffer.alloc(32).toString("base64")) as { problem: string }).problem).toMatch(/weak key \(only 1 distinct byte value\)/);
  });
});

describe("TokenCipher", () => {
  const key = randomBytes(32);

  it("round-trips, with a fresh IV per value, and never shows the plain text", () => {
    const cipher = new TokenCipher(key);
    const a = cipher.seal("xoxb-secret-token", "T1:bot");
    const b = cipher.seal("xoxb-secret-token", "T1:bot");
    expect(a).not.toBe(b);
    expect(a).not.toContain("xoxb");
    expect(cipher.open(a, "T1:bot")).toBe("xoxb-secret-token");
    expect(cipher.open(b, "T1:bot")).toBe("xoxb-secret-token");
  });

  it("checks the tag: a changed byte, another context or another key does not open", () => {
    const cipher = new TokenCipher(key);
    const sealed = cipher.seal("xoxb-secret-token", "T1:bot");
    const parts = sealed.split(".");
    const body = Buffer.from(parts[4]!, "base64url");
    body[0] = body[0]! ^ 1;
    const tampered = [...parts.slice(0, 4), body.toString("base64url")].join(".");
    expect(() => cipher.open(tampered, "T1:bot")).toThrow(DecryptError);
    expect(() => cipher.open(sealed, "T2:bot")).toThrow(DecryptError);
    expect(() => new TokenCipher(randomBytes(32)).open(sealed, "T1:bot")).toThrow(/not configured/);
  });

  it("rotates: opens with a previous key, seals with the current one, and says which values are stale", () => {
    const old = new TokenCipher(key);
    const sealedOld = old.seal("xoxb-old", "T1:bot");
    const rotated = new TokenCipher(randomBytes(32), [key]);
    expect(rotated.open(sealedOld, "T1:bot")).toBe("xoxb-old");
    expect(rotated.isStale(sealedOld)).toBe(true);
    const resealed = rotated.seal("xoxb-old", "T1:bot");
    expect(rotated.isStale(resealed)).toBe(false);
    expect(() => old.open(resealed, "T1:bot")).toThrow(DecryptError);
  });
});
