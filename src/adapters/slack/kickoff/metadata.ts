// What the kickoff modal carries between Slack round trips (private_metadata), and its size limit.
import { z } from "zod";
import { LIMITS } from "../blocks/index.js";

/**
 * What the modal carries between Slack round trips (private_metadata). The inputs travel as their names
 * (`in`) and a string of required flags (`req`, "1" or "0" each): an object per input held a crew of
 * about 60 inputs in Slack's 3,000 characters. `inputs` as objects is read too (a form opened before).
 */
export const kickoffMetadata = z
  .object({
    crew: z.string().optional(),
    channel: z.string(),
    /** The workspace the run is for: never empty (a form without one is refused, not started in workspace ""). */
    team: z.string().min(1).max(255),
    inputs: z.array(z.object({ name: z.string(), required: z.boolean() })).optional(),
    in: z.array(z.string()).optional(),
    req: z
      .string()
      .regex(/^[01]*$/)
      .optional(),
    /** A form opened from a message (the message shortcut): the thread the run is announced in, and the message's permalink. */
    thread: z.string().max(40).optional(),
    permalink: z.string().max(500).optional(),
    /** Who the form was opened for, its one-time nonce and seal (form-binding.ts). */
    user: z.string().optional(),
    nonce: z.string().max(100).optional(),
    sig: z.string().max(100).optional(),
  })
  .transform(({ in: names, req, inputs, ...facts }) => ({ ...facts, inputs: names ? names.map((name, i) => ({ name, required: req?.[i] === "1" })) : (inputs ?? []) }));
export type KickoffMetadata = z.output<typeof kickoffMetadata>;

/** The metadata Slack handed back, parsed (JSON that is not ours fails like the shape check). */
export function decodeMetadata(text: string) {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return kickoffMetadata.safeParse(json);
}

export function encodeMetadata(meta: KickoffMetadata): string {
  const { inputs, ...facts } = meta;
  const text = JSON.stringify({ ...facts, in: inputs.map((i) => i.name), req: inputs.map((i) => (i.required ? "1" : "0")).join("") });
  if (text.length > LIMITS.privateMetadata) throw new Error("too many inputs to carry in a Slack modal");
  return text;
}
