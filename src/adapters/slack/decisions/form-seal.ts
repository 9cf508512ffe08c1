// A form opened from a decision message ("Edit and approve", "Reassign") belongs to the person who
// clicked, on the message they clicked. Slack hands private_metadata back as it was sent, but a signed
// request can carry any metadata, so these facts are sealed with an HMAC (keyed like kickoff forms,
// adapters/slack/kickoff/form-binding.ts) and checked on submission. A replayed submission is
// harmless: a decision's claim is exactly-once, and a reassignment to the same person changes nothing.
import crypto from "node:crypto";
import { z } from "zod";

export interface DecisionFormFacts {
  /** The review's or flow request's id. */
  r: string;
  /** The user who opened the modal. */
  u: string;
  /** Channel and ts of the message the button was on. */
  c: string;
  m: string;
  /** Edit: length of the output's first part offered for editing (the rest is appended unchanged); reassign: 0. */
  h: number;
}

const sealed = z.object({ r: z.string().max(64), u: z.string().max(64), c: z.string().max(64), m: z.string().max(64), h: z.number().int().min(0), s: z.string().max(100) });

/** Used when no key is configured (unit tests): modals then only hold within this process. */
const processKey = crypto.randomBytes(32).toString("hex");

function signature(key: string, f: DecisionFormFacts): string {
  return crypto
    .createHmac("sha256", `crewline-review-edit:${key}`)
    .update(JSON.stringify([f.r, f.u, f.c, f.m, f.h]))
    .digest("base64url");
}

export function sealDecisionForm(key: string | undefined, facts: DecisionFormFacts): string {
  return JSON.stringify({ ...facts, s: signature(key ?? processKey, facts) });
}

/** The facts, when sealed by us and submitted by the user who opened the modal; undefined otherwise. */
export function openDecisionForm(key: string | undefined, metadata: string, userId: string): DecisionFormFacts | undefined {
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
