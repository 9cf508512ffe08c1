// Slack's rate limits as data: which tier each Web API method is in, and what each tier allows. The
// outbox's budget (budget.ts) spends from these, and the Slack stand-in (src/playground/slack-standin.ts)
// enforces the same table when asked, so a new method gets its tier here, in one place.
//
// Slack's limits are per method, per workspace, per app (Tier 2 about 20 a minute, Tier 3 about 50,
// Tier 4 about 100, bursts tolerated); chat.postMessage is paced per channel instead (about one message
// a second, short bursts). docs/slack-budget.md says how the outbox spends them.

export type TierName = "tier2" | "tier3" | "tier4" | "post";

export interface TierRate {
  /** Calls a minute, sustained. */
  perMinute: number;
  /** Calls that may go at once after a quiet spell (the bucket's size). */
  burst: number;
  /** What one bucket covers: the method in a workspace, or the method in one channel of a workspace. */
  scope: "workspace" | "channel";
}

export const TIERS: Record<TierName, TierRate> = {
  tier2: { perMinute: 20, burst: 4, scope: "workspace" },
  tier3: { perMinute: 50, burst: 8, scope: "workspace" },
  tier4: { perMinute: 100, burst: 15, scope: "workspace" },
  post: { perMinute: 60, burst: 4, scope: "channel" },
};

/** The tier of every Web API method Crewline calls. A method not listed here is not limited. */
export const METHOD_TIERS: Readonly<Record<string, TierName>> = {
  "chat.postMessage": "post",
  "chat.update": "tier3",
  "chat.delete": "tier3",
  "chat.postEphemeral": "tier4",
  "chat.getPermalink": "tier4",
  // Message streaming (a run's live plan): starting and stopping a stream is Tier 2, appending Tier 4.
  "chat.startStream": "tier2",
  "chat.appendStream": "tier4",
  "chat.stopStream": "tier2",
  "conversations.replies": "tier3",
  "conversations.history": "tier3",
  "conversations.info": "tier3",
  "conversations.members": "tier4",
  "conversations.join": "tier3",
  "conversations.open": "tier3",
  "users.info": "tier4",
  "users.lookupByEmail": "tier3",
  "usergroups.users.list": "tier2",
  "files.getUploadURLExternal": "tier4",
  "files.completeUploadExternal": "tier4",
  "views.open": "tier4",
  "views.update": "tier4",
  "views.publish": "tier4",
};

export function tierOf(method: string, tiers: Record<TierName, TierRate> = TIERS): TierRate | undefined {
  const name = METHOD_TIERS[method];
  return name ? tiers[name] : undefined;
}

/** One bucket per method and workspace, or per method, workspace and channel for a channel-paced method. */
export function bucketKey(call: { team: string; method: string; channel?: string }, rate: TierRate): string {
  return rate.scope === "channel" ? `${call.team}|${call.method}|${call.channel ?? ""}` : `${call.team}|${call.method}`;
}

/** A Retry-After pauses the whole method in the workspace, whichever channel the call went to. */
export function pauseKey(call: { team: string; method: string }): string {
  return `${call.team}|${call.method}`;
}

/**
 * The token bucket as a generic cell rate algorithm: one number per bucket, the theoretical arrival
 * time (tat) of the next call at the sustained rate. A call at `now` goes if the bucket still has
 * `reserve + 1` tokens, that is if tat is at most (burst − 1 − reserve) intervals ahead of now; it
 * then moves tat one interval on. Refused, it may go at `retryAt`. The database keeps tat per bucket
 * (src/store/slack-budget.ts does the same arithmetic in one conditional statement) and the stand-in
 * keeps it in memory.
 */
export function cellRate(rate: Pick<TierRate, "perMinute" | "burst">, reserve = 0): { intervalMs: number; toleranceMs: number } {
  const intervalMs = 60_000 / rate.perMinute;
  return { intervalMs, toleranceMs: Math.max(0, rate.burst - 1 - reserve) * intervalMs };
}

export function takeCell(
  tat: number | undefined,
  now: number,
  rate: Pick<TierRate, "perMinute" | "burst">,
  reserve = 0,
): { ok: true; tat: number } | { ok: false; retryAt: number } {
  const { intervalMs, toleranceMs } = cellRate(rate, reserve);
  const start = Math.max(tat ?? now, now);
  if (start - now <= toleranceMs) return { ok: true, tat: start + intervalMs };
  return { ok: false, retryAt: start - toleranceMs };
}
