// The outbox's vocabulary: which Slack effects exist, how each is keyed, which thread each posts
// into, and how far apart retries are. The SQL that enqueues, claims and completes them is the
// store's (src/store/effects.ts); enqueuing is a plain INSERT on whatever connection the caller
// holds, so the state change that calls for an effect and the effect itself commit together. The
// worker that performs them is src/outbox/; how it judges a failure is src/outbox/failures.ts.

/**
 * Every Slack effect Crewline performs outside a Slack request's own answer. A one-time effect (a
 * post) is enqueued once per key, whoever asks again; a repeatable one (a message update) is re-armed,
 * and the worker renders it from the row as it is when it runs, so any number of state changes in a
 * row end in one update showing the last.
 *
 * `thread` says which Slack thread a one-time message posts into, so that the messages of one thread
 * appear in the order they were enqueued (the store claims them so): "review" (the subject is a
 * Review: its run's thread), "run" (the subject is the Execution: its thread), "flow" (the subject is
 * the FlowRequest: the thread under its message, which flow.post starts). null: not ordered — the
 * repeatable updates (they render the row as it is whenever they run, so running them early shows
 * nothing out of order) and the completion notice (posted in the channel, not in the thread).
 *
 * `priority` says who goes first when Slack's budget is short (src/outbox/budget.ts; the worker claims
 * in this order too): 0, what a person waits on (a review becoming decidable, a decision shown, a
 * completion notice, a flow request and its answer); 1, announcements, files and notices; 2, progress;
 * 3, what only tidies a message when Slack has tokens to spare (the announcement's kickoff id).
 * `calls` are the Web API methods it makes, in order (src/outbox/tiers.ts gives each its tier), so the
 * budget is asked before any call; run.progress posts (chat.postMessage) the first time, then updates.
 */
export const EFFECT_KINDS = {
  /** A task message or review into the run's thread; chains review.file (long output) and review.show (changed meanwhile). */
  "review.post": { repeatable: false, thread: "review", priority: 0, calls: ["chat.postMessage"] },
  /** The whole output of a long task message as a file in the thread. */
  "review.file": { repeatable: false, thread: "review", priority: 1, calls: ["files.getUploadURLExternal", "files.completeUploadExternal"] },
  /** Round 2 and later: the whole diff from the previous round as a file, when long. */
  "review.diff": { repeatable: false, thread: "review", priority: 1, calls: ["files.getUploadURLExternal", "files.completeUploadExternal"] },
  /** After an edit and approve: the edited version as a file, when too long to read in the message. */
  "review.edited": { repeatable: false, thread: "review", priority: 1, calls: ["files.getUploadURLExternal", "files.completeUploadExternal"] },
  /** The review message re-rendered from its row (decision, closing, gaining its controls). */
  "review.show": { repeatable: true, thread: null, priority: 0, calls: ["chat.update"] },
  /** A reminder under a review nobody has decided (keyed per reminder number). */
  "review.reminder": { repeatable: false, thread: "review", priority: 1, calls: ["chat.postMessage", "chat.getPermalink"] },
  /** About a review's deadline: the reminder it posts, or an automatic decision that did not reach the crew. */
  "review.deadline": { repeatable: false, thread: "review", priority: 1, calls: ["chat.postMessage"] },
  /** A reply in the run's thread as written: an escalation, a reassignment. */
  "run.message": { repeatable: false, thread: "run", priority: 1, calls: ["chat.postMessage"] },
  /** The completion (or failure) notice in the channel; chains run.file and run.announcement. */
  "run.completion": { repeatable: false, thread: null, priority: 0, calls: ["chat.postMessage", "chat.getPermalink"] },
  /** The final output as a file when it is long. */
  "run.file": { repeatable: false, thread: "run", priority: 1, calls: ["files.getUploadURLExternal", "files.completeUploadExternal"] },
  /** The run's announcement (thread parent) re-rendered with its final state. */
  "run.announcement": { repeatable: true, thread: null, priority: 1, calls: ["chat.update"] },
  /**
   * The announcement once the crew has answered the kickoff (Running, its kickoff id): nobody waits on
   * it (the Stop button is there from the first post), so it goes when Slack is idle, after progress.
   */
  "run.started": { repeatable: true, thread: null, priority: 3, calls: ["chat.update"] },
  /**
   * The live announcement once a review has waited through a reminder ("Waiting for a review") and
   * once that review is decided ("Running" again): a notice, like the reminder that brings it.
   */
  "run.state": { repeatable: true, thread: null, priority: 1, calls: ["chat.update"] },
  /**
   * The run's progress: its live plan streamed (chat.startStream once, chat.appendStream, chat.stopStream at
   * its end; while the start waits for Slack's Tier 2, its latest step in one message of the thread, posted
   * and refreshed), or, where Slack refuses streaming, one message posted once and then updated (at most about once a second).
   */
  "run.progress": { repeatable: true, thread: null, priority: 2, calls: ["chat.appendStream"] },
  /** A flow feedback request's message in its channel; chains flow.file and flow.show. */
  "flow.post": { repeatable: false, thread: "flow", priority: 0, calls: ["chat.postMessage"] },
  "flow.file": { repeatable: false, thread: "flow", priority: 1, calls: ["files.getUploadURLExternal", "files.completeUploadExternal"] },
  /** After an edit and approve of a flow request: the edited version as a file, when long. */
  "flow.edited": { repeatable: false, thread: "flow", priority: 1, calls: ["files.getUploadURLExternal", "files.completeUploadExternal"] },
  "flow.show": { repeatable: true, thread: null, priority: 0, calls: ["chat.update"] },
  "flow.reminder": { repeatable: false, thread: "flow", priority: 1, calls: ["chat.postMessage"] },
  /**
   * Slack refused the run's channel for good (src/outbox/refused.ts): open a direct message with the
   * run's starter, record it as the run's place, and post there again what the channel refused.
   */
  "run.move": { repeatable: false, thread: null, priority: 0, calls: ["conversations.open"] },
  /** The same for a flow request: a direct message with its assignee, else its reviewers. */
  "flow.move": { repeatable: false, thread: null, priority: 0, calls: ["conversations.open"] },
} as const satisfies Record<string, { repeatable: boolean; thread: EffectThread | null; priority: EffectPriority; calls: readonly string[] }>;

/** 0: a person waits on it; 1: announcements, files and notices; 2: progress; 3: when Slack is idle. */
export type EffectPriority = 0 | 1 | 2 | 3;

/** How the thread of an ordered effect is found from its subject (see EFFECT_KINDS). */
export type EffectThread = "review" | "run" | "flow";

export type EffectKind = keyof typeof EFFECT_KINDS;

export function isEffectKind(kind: string): kind is EffectKind {
  return Object.hasOwn(EFFECT_KINDS, kind);
}

export interface NewEffect {
  kind: EffectKind;
  /** The Review, Execution or FlowRequest the effect is about. */
  subjectId: string;
  /** Distinguishes several one-time effects of one kind on one subject (reminder 1, 2…). */
  part?: string | number;
  payload?: Record<string, unknown>;
  /** Not before this time (default now). */
  runAt?: Date;
}

export function effectKey(effect: Pick<NewEffect, "kind" | "subjectId" | "part">): string {
  return `${effect.kind}:${effect.subjectId}${effect.part !== undefined ? `:${effect.part}` : ""}`;
}

/** How far apart two progress updates of one run are kept, whichever replica received the steps. */
export const PROGRESS_SPACING_MS = 1000;

/** A claimed effect, as the worker hands it to its performer. */
export interface EffectJob {
  id: string;
  kind: EffectKind;
  subjectId: string;
  key: string;
  payload: Record<string, unknown> | null;
  attempts: number;
  generation: number;
  /**
   * The previous attempt may have reached Slack without our hearing its answer (its replica died or
   * its lease ran out mid-call, or the call failed with a time-out, a network error or a 5xx): a post
   * looks for the message it may have left before posting again.
   */
  interrupted: boolean;
  /**
   * When the effect was enqueued: whatever it posts is no older, so the look-up after an interrupted
   * attempt reads the conversation from about then on (findPostedMessage's `oldest`), not from its start.
   */
  createdAt: Date;
}

/** Waits before the next attempt after `attempts` failures: doubling from min to max, with up to 20% jitter. */
export function retryDelay(attempts: number, minMs: number, maxMs: number, random: () => number = Math.random): number {
  const base = Math.min(maxMs, minMs * 2 ** Math.max(0, attempts - 1));
  return Math.round(base * (1 + 0.2 * random()));
}
