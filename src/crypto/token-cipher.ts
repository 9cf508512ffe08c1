// Slack tokens at rest: AES-256-GCM (node:crypto) with a random 96-bit IV per value and the
// authentication tag checked on every read. A value names the key that sealed it by a short
// fingerprint, so rotation is a matter of adding the new key and keeping the old one for reading
// (ENCRYPTION_KEY, ENCRYPTION_KEY_PREVIOUS). The caller binds each value to where it is stored
// (associated data), so a value copied into another row or field does not decrypt.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

const PREFIX = "v1";
const IV_BYTES = 12;
const TAG_BYTES = 16;
export const KEY_BYTES = 32;

/** Why a key text is unusable, or the key's 32 bytes. Never echoes the text. */
export function parseEncryptionKey(text: string): { key: Buffer } | { problem: string } {
  const value = text.trim();
  let key: Buffer | undefined;
  if (/^[0-9a-fA-F]{64}$/.test(value)) key = Buffer.from(value, "hex");
  else if (/^[A-Za-z0-9+/_-]{43}={0,1}$/.test(value)) key = Buffer.from(value.replace(/-/g, "+").replace(/_/g, "/"), "base64");
  if (!key || key.length !== KEY_BYTES) {
    return { problem: `must be ${KEY_BYTES} random bytes, written as 64 hex digits or 44 base64 characters (generate one with: openssl rand -base64 32)` };
  }
  const weakness = lowEntropy(key);
  if (weakness) return { problem: `looks like a weak key (${weakness}); generate a random one with: openssl rand -base64 32` };
  return { key };
}

/** A plain reason when the bytes are obviously not random (repeats, counting up or down), else undefined. */
function lowEntropy(key: Buffer): string | undefined {
  const distinct = new Set(key).size;
  // 32 random bytes have about 30 distinct values; fewer than 16 happens with odds far below 1e-20.
  if (distinct < 16) return `only ${distinct} distinct byte value${distinct === 1 ? "" : "s"}`;
  const step = (key[1]! - key[0]! + 256) % 256;
  if (key.every((b, i) => i === 0 || (b - key[i - 1]! + 256) % 256 === step)) return "its bytes form a simple sequence";
  return undefined;
}

/** A short, non-secret name for a key (first 8 hex digits of its SHA-256). */
export function keyFingerprint(key: Buffer): string {
  return createHash("sha256").update(key).digest("hex").slice(0, 8);
}

export class DecryptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DecryptError";
  }
}

export class TokenCipher {
  private readonly current: { id: string; key: Buffer };
  private readonly byId = new Map<string, Buffer>();

  /** Seals with `current`; opens with `current` or any of `previous` (rotation). */
  constructor(current: Buffer, previous: Buffer[] = []) {
    for (const key of [current, ...previous]) if (key.length !== KEY_BYTES) throw new Error(`encryption keys are ${KEY_BYTES} bytes`);
    this.current = { id: keyFingerprint(current), key: current };
    for (const key of [current, ...previous]) if (!this.byId.has(keyFingerprint(key))) this.byId.set(keyFingerprint(key), key);
  }

  get currentKeyId(): string {
    return this.current.id;
  }

  /** `v1.<key id>.<iv>.<tag>.<ciphertext>` (base64url parts). `context` must be given again to open it. */
  seal(plain: string, context: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.current.key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(context, "utf8"));
    const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
    return [PREFIX, this.current.id, iv.toString("base64url"), cipher.getAuthTag().toString("base64url"), body.toString("base64url")].join(".");
  }

  open(sealed: string, context: string): string {
    const parts = sealed.split(".");
    if (parts.length !== 5 || parts[0] !== PREFIX) throw new DecryptError("not a sealed value");
    const [, keyId, iv, tag, body] = parts as [string, string, string, string, string];
    const key = this.byId.get(keyId);
    if (!key) throw new DecryptError(`sealed with a key that is not configured (key id ${keyId}); set it in ENCRYPTION_KEY_PREVIOUS`);
    const tagBytes = Buffer.from(tag, "base64url");
    const ivBytes = Buffer.from(iv, "base64url");
    if (tagBytes.length !== TAG_BYTES || ivBytes.length !== IV_BYTES) throw new DecryptError("malformed sealed value");
    try {
      const decipher = createDecipheriv("aes-256-gcm", key, ivBytes, { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(context, "utf8"));
      decipher.setAuthTag(tagBytes);
      return Buffer.concat([decipher.update(Buffer.from(body, "base64url")), decipher.final()]).toString("utf8");
    } catch {
      throw new DecryptError("sealed value failed its integrity check (tampered, moved, or a different key with the same id)");
    }
  }

  /** Whether a sealed value was sealed with an older key (re-seal it with the current one). */
  isStale(sealed: string): boolean {
    return sealed.split(".")[1] !== this.current.id;
  }
}
