// A kickoff form belongs to the person who opened it, in the channel it was opened for. Slack hands
// private_metadata back as it was sent, but a signed request can carry any metadata, so the form's
// facts (crew, channel, team, user, inputs, nonce, and the thread of a form opened from a message) are sealed with an HMAC when the form is built and
// checked on submission. The nonce becomes the run's requestId (unique), so one form starts one run
// however often its submission is replayed.
import crypto from "node:crypto";
import type { KickoffMetadata } from "./metadata.js";

/** Used when no key is configured (unit tests): forms then only hold within this process. */
const processKey = crypto.randomBytes(32).toString("hex");

function signature(key: string, meta: KickoffMetadata): string {
  const base = [meta.crew ?? "", meta.channel, meta.team, meta.user ?? "", meta.nonce ?? "", meta.inputs.map((i) => [i.name, i.required])];
  // A form opened from a message also seals where its run is announced (forms without one keep their old seal).
  const facts = JSON.stringify(meta.thread || meta.permalink ? [...base, meta.thread ?? "", meta.permalink ?? ""] : base);
  return crypto.createHmac("sha256", `crewline-kickoff-form:${key}`).update(facts).digest("base64url");
}

/** The metadata bound to its user, with a fresh nonce and its seal. */
export function bindForm(key: string | undefined, meta: Omit<KickoffMetadata, "nonce" | "sig"> & { user: string }): KickoffMetadata {
  const bound = { ...meta, nonce: crypto.randomUUID() };
  return { ...bound, sig: signature(key ?? processKey, bound) };
}

/** Whether the metadata is sealed by us and was opened by this user. */
export function formIsFor(key: string | undefined, meta: KickoffMetadata, userId: string): boolean {
  if (!meta.sig || !meta.nonce || meta.user !== userId) return false;
  const expected = Buffer.from(signature(key ?? processKey, meta));
  const given = Buffer.from(meta.sig);
  return expected.length === given.length && crypto.timingSafeEqual(expected, given);
}
