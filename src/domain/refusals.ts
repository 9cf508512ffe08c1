// When Slack refuses a channel for good: which of its errors say so, and where a run's messages go
// then (the direct message it moved to). The outbox moves a run (or a flow request) when one of its
// effects is given up with such an error (src/outbox/refused.ts); the Slack side words the reason.

/**
 * Slack errors that refuse the channel itself, not the message or the token: no retry mends them,
 * and the same message would reach a person directly. (Token errors, scope errors and malformed
 * messages would fail in a direct message too; uninstalls are handled apart.)
 */
export const CHANNEL_REFUSALS = ["is_archived", "not_in_channel", "channel_not_found", "restricted_action", "team_access_not_granted"] as const;

export type ChannelRefusal = (typeof CHANNEL_REFUSALS)[number];

export function isChannelRefusal(code: string): code is ChannelRefusal {
  return (CHANNEL_REFUSALS as readonly string[]).includes(code);
}

/** The run facts that say where its messages go. */
export type RunPlaceFacts = { channelId: string; threadTs: string | null; movedTo: string | null };

/**
 * Where a run's messages are posted: its thread in its channel, or, once Slack refused that channel,
 * the direct message it moved to (top level there: each message stands on its own).
 */
export function runPlace(run: RunPlaceFacts): { channel: string; threadTs: string | null; moved: boolean } {
  return run.movedTo ? { channel: run.movedTo, threadTs: null, moved: true } : { channel: run.channelId, threadTs: run.threadTs, moved: false };
}

/** The channel a review's message is in: its own (the direct message the run moved to) or its run's. */
export function reviewChannel(review: { channelId?: string | null }, run: { channelId: string }): string {
  return review.channelId ?? run.channelId;
}
