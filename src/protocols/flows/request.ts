// The body of a flow's human feedback request (docs/spec/crew-api-field-notes.md, last section), parsed
// tolerantly: unknown fields are ignored, numbers or strings are accepted for ids, sizes are bounded.
import { z } from "zod";
import { readableJson } from "../../text/bounded-json.js";

const MAX_TEXT = 200_000;
const idLike = z.union([z.string().max(200), z.number()]).transform((v) => String(v));
const text = (max: number) => z.string().max(max);

export const flowEnvelope = z.object({ event_type: z.string().max(100).optional() }).passthrough();

export const newFlowRequest = z
  .object({
    event_type: z.literal("new_request").optional(),
    id: idLike.refine((v) => v.trim().length > 0, "id must not be empty"),
    status: z.string().max(100).nullish(),
    flow_id: idLike.nullish(),
    method_name: text(300).nullish(),
    message: text(20_000).nullish(),
    output: z.union([text(MAX_TEXT), z.record(z.string(), z.unknown()), z.array(z.unknown())]).nullish(),
    emit: z.array(z.string().trim().min(1).max(100)).max(20).nullish(),
    callback_url: z
      .string()
      .max(4000)
      .url()
      .refine((u) => /^https?:\/\//i.test(u), "callback_url must be http(s)"),
    deployment_id: idLike.nullish(),
    deployment_name: text(300).nullish(),
    assigned_to_email: z.string().max(320).nullish(),
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

export type ParsedFlowBody = { kind: "request"; request: FlowRequestInput } | { kind: "ignored"; eventType: string } | { kind: "invalid"; problem: string };

/** Reads a verified body: a new request, an event to ignore, or why it is malformed (no values echoed). */
export function parseFlowBody(body: unknown): ParsedFlowBody {
  const envelope = flowEnvelope.safeParse(body);
  if (!envelope.success) return { kind: "invalid", problem: "the body must be a JSON object" };
  const eventType = envelope.data.event_type ?? "new_request";
  if (eventType !== "new_request") return { kind: "ignored", eventType: eventType.slice(0, 100) };
  const parsed = newFlowRequest.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { kind: "invalid", problem: `${issue?.path.join(".") || "body"}: ${issue?.message ?? "invalid"}` };
  }
  const r = parsed.data;
  const output = r.output == null ? "" : typeof r.output === "string" ? r.output : readableJson(r.output).slice(0, MAX_TEXT);
  const email = r.assigned_to_email?.trim();
  return {
    kind: "request",
    request: {
      requestId: r.id.trim(),
      methodName: r.method_name?.trim() || null,
      message: r.message?.trim() || null,
      output,
      emit: [...new Set(r.emit ?? [])],
      callbackUrl: r.callback_url,
      deploymentName: r.deployment_name?.trim() || null,
      flowId: r.flow_id ?? null,
      assignedEmail: email && /^[^\s@]+@[^\s@]+$/.test(email) ? email : null,
    },
  };
}
