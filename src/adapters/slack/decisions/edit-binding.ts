// An "Edit and approve" modal belongs to the person who clicked Edit, on the review message they
// clicked. Slack hands private_metadata back as it was sent, but a signed request can carry any
// metadata, so these facts are sealed with an HMAC (keyed like kickoff forms, adapters/slack/kickoff/form-binding.ts)
// and checked on submission. A replayed submission is harmless: the decision's claim is exactly-once.
import crypto from "node:crypto";
import { z } from "zod";

export interface EditFacts {
  /** Review id. */
  r: string;
  /** The user who opened the modal. */
  u: string;
  /** Channel and ts of the review message the Edit button was on. */
  c: string;
  m: string;
  /** Length of the output's first part offered for editing (the rest is appended unchanged). */
  h: number;
}

const sealed = z.object({ r: z.string().max(64), u: z.string().max(64), c: z.string().max(64), m: z.string().max(64), h: z.number().int().min(0), s: z.string().max(100) });

/** Used when no key is configured (unit tests): modals then only hold within this process. */
const processKey = crypto.randomBytes(32).toString("hex");

function signature(key: string, f: EditFacts): string {
  return crypto
    .createHmac("sha256", `crewline-review-edit:${key}`)
    .update(JSON.stringify([f.r, f.u, f.c, f.m, f.h]))
    .digest("base64url");
}

export function sealEdit(key: string | undefined, facts: EditFacts): string {
  return JSON.stringify({ ...facts, s: signature(key ?? processKey, facts) });
}

/** The facts, when sealed by us and submitted by the user who opened the modal; undefined otherwise. */
export function openEdit(key: string | undefined, metadata: string, userId: string): EditFacts | undefined {
  let parsed: z.infer<typeof sealed>;
  try {
    const result = sealed.safeParse(JSON.parse(metadata));
    if (!result.success) return undefined;
    parsed = result.data;
  } catch {
    return undefined;
  }
  const { s, ...facts } = parsed;
  if (facts.u !== userId) return undefined;
  const expected = Buffer.from(signature(key ?? processKey, facts));
  const given = Buffer.from(s);
  return expected.length === given.length && crypto.timingSafeEqual(expected, given) ? facts : undefined;
}
