// Who is in a set that Slack keeps (a user group's members, a channel's members), cached briefly so
// that an access check rarely waits on Slack: a fresh entry answers at once; a stale entry that
// already contains the user answers at once and is refreshed in the background; a no is only ever
// given on fresh data. One lookup per key at a time; a failed lookup keeps the old entry. At most
// `maxEntries` keys are kept (the least recently fetched goes first).

import { type Clock, systemClock } from "./ports.js";

/** Reads the members of one key; `context` says where (the workspace, the client). */
export type MembersLookup<C> = (key: string, context: C) => Promise<Iterable<string>>;

export interface MembershipCacheOptions {
  ttlMs: number;
  maxEntries: number;
  clock?: Clock;
  /** Told of every failed lookup (the background ones too). */
  onError?: (key: string, err: unknown) => void;
}

interface Entry {
  users: Set<string>;
  fetchedAt: number;
}

export class MembershipCache<C> {
  private readonly entries = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<Set<string>>>();
  private readonly clock: Clock;

  constructor(
    private readonly lookup: MembersLookup<C>,
    private readonly options: MembershipCacheOptions,
  ) {
    this.clock = options.clock ?? systemClock;
  }

  /**
   * What the cache knows without asking: true (the user is in a fresh or stale entry; a stale one is
   * refreshed in the background), false (not in a fresh entry), undefined (no fresh entry: look it up).
   */
  known(key: string, userId: string, context: C): boolean | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    const fresh = this.clock.now().getTime() - entry.fetchedAt < this.options.ttlMs;
    if (entry.users.has(userId)) {
      if (!fresh) this.refresh(key, context).catch(() => undefined);
      return true;
    }
    return fresh ? false : undefined;
  }

  /** Whether the user is in the key's set: the cached answer, else a lookup (which may throw when nothing is cached). */
  async has(key: string, userId: string, context: C): Promise<boolean> {
    return this.known(key, userId, context) ?? (await this.refresh(key, context)).has(userId);
  }

  /** The key's members read again (one lookup per key at a time); a failure keeps the old entry and answers with it, or throws without one. */
  refresh(key: string, context: C): Promise<Set<string>> {
    const running = this.inflight.get(key);
    if (running) return running;
    const promise = this.lookup(key, context)
      .then((ids) => {
        const users = new Set(ids);
        this.store(key, users);
        return users;
      })
      .catch((err: unknown) => {
        this.options.onError?.(key, err);
        const old = this.entries.get(key);
        if (old) return old.users;
        throw err;
      })
      .finally(() => this.inflight.delete(key));
    this.inflight.set(key, promise);
    return promise;
  }

  private store(key: string, users: Set<string>): void {
    this.entries.delete(key);
    this.entries.set(key, { users, fetchedAt: this.clock.now().getTime() });
    while (this.entries.size > this.options.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }
}
