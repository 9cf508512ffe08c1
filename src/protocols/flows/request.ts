// The body of a flow's human feedback request (docs/spec/crew-api-field-notes.md, last section), parsed
// tolerantly, like the crew's wire shapes (protocols/crew/parse.ts): unknown fields are ignored, numbers
// or strings are accepted for ids and names, long text is cut, a shown-only field of the wrong type is
// dropped. Only what the answer cannot do without refuses a body: its id, its callback URL, and outcomes
// the flow routes on that cannot all be offered as they are.
import { z } from "zod";
import { readableJson } from "../../text/bounded-json.js";
import { ELLIPSIS, safeSlice } from "../../text/truncate.js";

/**
 * Longest output kept: as much as a body can carry (the intake reads at most 1 MiB), so an output is
 * kept whole, as a crew's is (the Slack side shows a long one as a file). A cut one would reach the flow
 * through Edit and approve, which appends the rest unchanged, as the reviewer's version.
 */
export const OUTPUT_MAX = 1024 * 1024;
/** Longest message kept (Slack shows its first 2,000 characters). */
export const MESSAGE_MAX = 20_000;
/** Longest step or deployment name kept. */
export const NAME_MAX = 300;
/** Longest outcome: one is answered with exactly as the flow named it, so a longer one is refused, never cut. */
export const OUTCOME_MAX = 100;
/** Most outcomes offered: one button each beside Edit and approve and Reassign (Slack allows 25 per actions block). */
export const OUTCOMES_MAX = 20;
const ID_MAX = 200;

/** An optional field of the wrong type is dropped instead of failing the whole body. */
const lenient = <T extends z.ZodType>(schema: T) => schema.optional().catch(undefined);
const idLike = z
  .union([z.string(), z.number()])
  .transform((v) => String(v).trim())
  .pipe(z.string().min(1, "must not be empty").max(ID_MAX));
/** Names are shown only: a number is shown as written. */
const nameLike = z.union([z.string(), z.number()]).transform((v) => String(v));

export const flowEnvelope = z.object({ event_type: z.unknown().optional() }).passthrough();

export const newFlowRequest = z
  .object({
    id: idLike,
    callback_url: z
      .string()
      .max(4000)
      .url()
      .refine((u) => /^https?:\/\//i.test(u), "callback_url must be http(s)"),
    // Outcomes are what the flow routes on: a list of another shape is refused, not guessed at.
    emit: z.array(z.union([z.string(), z.number()])).nullish(),
    output: z.unknown().optional(),
    flow_id: lenient(idLike),
    method_name: lenient(nameLike),
    message: lenient(z.string()),
    deployment_name: lenient(nameLike),
    assigned_to_email: lenient(z.string().max(320)),
  })
  .passthrough();

export interface FlowRequestInput {
  requestId: string;
  methodName: string | null;
  message: string | null;
  output: string;
  emit: string[];
  callbackUrl: string;
  deploymentName: string | null;
  flowId: string | null;
  assignedEmail: string | null;
}

/** `field`: where the body is malformed (a path such as `emit.3`, or `body`), safe to log: it holds no value. */
export type ParsedFlowBody = { kind: "request"; request: FlowRequestInput } | { kind: "ignored"; eventType: string } | { kind: "invalid"; field: string; problem: string };

/** Text cut to `max` characters (never inside a surrogate pair), ending in "…" when it was cut. */
function bounded(text: string, max: number): string {
  return text.length <= max ? text : safeSlice(text, max - 1).trimEnd() + ELLIPSIS;
}

/** Trimmed and bounded; blank → null. */
function shown(text: string | undefined, max: number): string | null {
  const trimmed = text?.trim();
  return trimmed ? bounded(trimmed, max) : null;
}

/** Strings as they are, numbers and booleans as written, anything else as JSON. */
function outputText(value: unknown): string {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return bounded(value, OUTPUT_MAX);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return bounded(readableJson(value), OUTPUT_MAX);
}

/**
 * The outcomes offered, trimmed, in order, each once; blank ones are no outcome and are left out. One
 * too long, or more than can be offered, refuses the body: a flow answered only from some of its routes,
 * with nothing telling the reviewer which are missing, could be sent down the wrong one.
 */
function outcomes(emit: readonly (string | number)[]): { emit: string[] } | { field: string; problem: string } {
  const kept = new Set<string>();
  for (const [index, raw] of emit.entries()) {
    const outcome = String(raw).trim();
    if (!outcome) continue;
    if (outcome.length > OUTCOME_MAX) return { field: `emit.${index}`, problem: `an outcome is longer than ${OUTCOME_MAX} characters` };
    kept.add(outcome);
  }
  if (kept.size > OUTCOMES_MAX) return { field: "emit", problem: `${kept.size} distinct outcomes, at most ${OUTCOMES_MAX} can be offered` };
  return { emit: [...kept] };
}

/** Reads a verified body: a new request, an event to ignore, or why it is malformed (no values echoed). */
export function parseFlowBody(body: unknown): ParsedFlowBody {
  const envelope = flowEnvelope.safeParse(body);
  if (!envelope.success) return { kind: "invalid", field: "body", problem: "the body must be a JSON object" };
  const eventType = envelope.data.event_type ?? "new_request";
  // Unknown events are acknowledged and ignored (field notes), whatever their type.
  if (eventType !== "new_request") return { kind: "ignored", eventType: typeof eventType === "string" ? safeSlice(eventType, 100) : `(${typeof eventType})` };
  const parsed = newFlowRequest.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.join(".") || "body";
    return { kind: "invalid", field, problem: `${field}: ${issue?.message ?? "invalid"}` };
  }
  const r = parsed.data;
  const offered = outcomes(r.emit ?? []);
  if ("field" in offered) return { kind: "invalid", field: offered.field, problem: `${offered.field}: ${offered.problem}` };
  const email = r.assigned_to_email?.trim();
  return {
    kind: "request",
    request: {
      requestId: r.id,
      methodName: shown(r.method_name, NAME_MAX),
      message: shown(r.message, MESSAGE_MAX),
      output: outputText(r.output),
      emit: offered.emit,
      callbackUrl: r.callback_url,
      deploymentName: shown(r.deployment_name, NAME_MAX),
      flowId: r.flow_id ?? null,
      assignedEmail: email && /^[^\s@]+@[^\s@]+$/.test(email) ? email : null,
    },
  };
}
