// What a service we called may echo back in an error text (a crew's 400, a flow's 401), taken out
// before the text is shown or logged: our credentials, the webhook URLs we gave it and their secret
// segments, however it spells them.
import { safeSlice } from "./truncate.js";

/** How much of an error text is read (and redacted): far more than the 300 characters shown. */
const ECHO_READ = 8192;

/**
 * A service's error text without `secrets` (as sent, or URL-encoded), bearer tokens and URLs. Only its
 * start is read (300 characters are shown), and a URL's scheme is at most 32 characters, not anchored
 * to a word start: an unbounded one made the pattern quadratic ("a-a-a-…" held the event loop 13 s at
 * 160 KB), and any URL is still caught.
 */
export function redactEchoes(text: string, secrets: readonly string[]): string {
  let out = safeSlice(text, ECHO_READ)
    .replace(/Bearer\s+\S+/gi, "Bearer [redacted]")
    .replace(/[a-z][a-z0-9+.-]{0,31}:\/\/[^\s"'<>]+/gi, "[url]");
  // Each as sent, and as an echo may spell it (URL-encoded).
  const spelled = new Set(secrets.filter((s) => s).flatMap((s) => [s, encodeURIComponent(s)]));
  for (const secret of [...spelled].sort((a, b) => b.length - a.length)) out = out.split(secret).join("[redacted]");
  return out;
}

const decoded = (text: string): string => {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
};

/** Fields of a request body that carry no secret (a run's inputs, the reviewer's feedback, ids). */
const PLAIN_FIELDS = new Set(["inputs", "human_feedback", "humanFeedback", "execution_id", "executionId", "task_id", "taskId", "is_approve", "isApprove"]);
/** Shorter strings are not taken for secrets (a strategy name, a header name). */
const SECRET_MIN = 16;

/**
 * What a request body sent that a service must not be quoted repeating: the webhook URLs, each of
 * their path segments and query values (a URL's secret is one of them, and an echo may quote the path
 * alone), and the human-input webhook's credentials.
 */
export function sentSecrets(body: unknown): string[] {
  const found: string[] = [];
  const walk = (value: unknown, key?: string): void => {
    if (key !== undefined && PLAIN_FIELDS.has(key)) return;
    if (typeof value === "string") {
      if (value.length < SECRET_MIN) return;
      found.push(value);
      if (!URL.canParse(value)) return;
      const url = new URL(value);
      for (const part of [...url.pathname.split("/"), ...url.searchParams.values()]) if (part.length >= SECRET_MIN) found.push(part, decoded(part));
    } else if (Array.isArray(value)) for (const item of value) walk(item);
    else if (value && typeof value === "object") for (const [k, v] of Object.entries(value)) walk(v, k);
  };
  walk(body);
  return found;
}
