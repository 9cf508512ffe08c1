// How the outbox worker judges a failed Slack call: retry (with backoff, or after Retry-After), or
// give the effect up at once when no retry can mend it.

/**
 * Slack errors no retry can mend: the effect is given up at once (and logged). Everything else
 * (5xx, network, time-outs, rate limits, message_not_found right after a post) is retried.
 */
const PERMANENT_SLACK_ERRORS = new Set([
  "account_inactive",
  "channel_not_found",
  "invalid_auth",
  "invalid_blocks",
  "invalid_blocks_format",
  "invalid_chunks",
  "is_archived",
  "msg_blocks_too_long",
  "msg_too_long",
  "no_text",
  "not_authed",
  "not_in_channel",
  "restricted_action",
  "token_revoked",
  "cant_update_message",
  "edit_window_closed",
  "invalid_arguments",
  "missing_scope",
  "team_access_not_granted",
]);

/**
 * Slack's own words for being down for a while: like a 5xx or no answer, the call may go through later,
 * and, as Slack documents for these, may have partly succeeded already (a post made, its answer lost).
 */
const OUTAGE_SLACK_ERRORS = new Set(["internal_error", "fatal_error", "service_unavailable", "request_timeout"]);

/**
 * `ambiguous`: Slack may have done it anyway (no answer, a 5xx, or Slack saying it is down), unlike
 * an error answer refusing the call or a rate limit. `outage`: Slack (or the way to it) is down, not
 * refusing this call: a 5xx, no answer, or Slack saying so; what a person waits on is never given up
 * for that (src/outbox/worker.ts).
 */
export type FailureVerdict = { kind: "retry"; afterMs?: number; reason: string; ambiguous: boolean; outage?: boolean } | { kind: "give_up"; reason: string };

/** What to do about an error thrown while performing an effect (a Web API error, or anything else). */
export function judgeFailure(err: unknown): FailureVerdict {
  const e = err as { code?: string; data?: { error?: string }; retryAfter?: number; message?: string; statusCode?: number };
  if (e?.code === "slack_webapi_rate_limited_error") return { kind: "retry", afterMs: Math.max(1, e.retryAfter ?? 1) * 1000, reason: "rate limited", ambiguous: false };
  if (e?.code === "slack_webapi_platform_error") {
    const code = String(e.data?.error ?? "unknown_error");
    if (PERMANENT_SLACK_ERRORS.has(code)) return { kind: "give_up", reason: code };
    // An outage answer may follow a post Slack made: the next attempt looks for it before posting again.
    if (OUTAGE_SLACK_ERRORS.has(code)) return { kind: "retry", reason: code, ambiguous: true, outage: true };
    return { kind: "retry", reason: code, ambiguous: false };
  }
  // A 4xx is Slack refusing this request (a wrong SLACK_API_URL, a body too large), not Slack being down.
  if (e?.code === "slack_webapi_http_error")
    return { kind: "retry", reason: `HTTP ${e.statusCode ?? "error"}`, ambiguous: true, ...(e.statusCode === undefined || e.statusCode >= 500 ? { outage: true } : {}) };
  if (e?.code === "slack_webapi_request_error") return { kind: "retry", reason: "request failed", ambiguous: true, outage: true };
  if (err instanceof GiveUp) return { kind: "give_up", reason: err.message };
  if (err instanceof NothingSent) {
    const verdict = judgeFailure(err.cause);
    return verdict.kind === "retry" ? { ...verdict, ambiguous: false } : verdict;
  }
  return { kind: "retry", reason: String(e?.message ?? err).slice(0, 200), ambiguous: true };
}

/** Thrown by a performer for an effect that can never be done (its subject is gone, say). */
export class GiveUp extends Error {}

/** A call that failed before the effect's own (a look-up before a post): judged as `cause` is, but nothing of the effect may have reached Slack. */
export class NothingSent extends Error {
  constructor(override readonly cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause));
  }
}
