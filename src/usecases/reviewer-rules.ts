// Who may decide a crew's reviews: the crew's `reviewers` (CREW_REVIEWERS / crews file) name users
// and Slack user groups. Group members come from usergroups.users.list, cached per group so that a
// click rarely waits on Slack (membership-cache.ts): fresh entries answer at once; a stale entry that
// already contains the user answers at once and is refreshed in the background; a refusal is only
// ever given on fresh data.

import type { ReviewerRules as RulesConfig } from "../config/config.js";
import type { Logger } from "../log/log.js";
import { MembershipCache } from "./membership-cache.js";
import { type Clock, type Execution, type Review, systemClock, type TeamRef } from "./ports.js";
import type { ReviewerGate } from "./reviews.js";

const USERGROUP_TTL_MS = 5 * 60_000;
/** At most this many user groups are kept in the cache. */
const USERGROUP_CACHE_MAX = 1000;

/** Fetches the user ids of a Slack user group (usergroups.users.list), in the workspace given when known. */
export type UsergroupLookup = (usergroupId: string, team?: TeamRef) => Promise<string[]>;

export interface RulesSource {
  config(crewName: string): { reviewers?: RulesConfig } | undefined;
  all(): { reviewers?: RulesConfig }[];
}

/** "<@U1>, <!subteam^S1>": who may decide, as Slack renders it. */
export function describeReviewers(rules: RulesConfig): string {
  return [...rules.users.map((u) => `<@${u}>`), ...rules.usergroups.map((g) => `<!subteam^${g}>`)].join(", ");
}

/**
 * Who is still waited for, for reminders: the named users who have not approved yet, and every group
 * (its members cannot be told apart here). When every named user approved and there is no group, all
 * of them (someone must still be told).
 */
export function describeWaitingReviewers(rules: RulesConfig, approvedBy: Iterable<string>): string {
  const done = new Set(approvedBy);
  const users = rules.users.filter((u) => !done.has(u));
  return describeReviewers(users.length + rules.usergroups.length > 0 ? { users, usergroups: rules.usergroups } : rules);
}

/** Who may decide one review beyond its crew's rules: its reassignee, and its escalation list once it was escalated. */
export function reviewGrants(review: Pick<Review, "reassignedTo" | "escalatedAt" | "escalatedTo">): RulesConfig {
  const escalated = review.escalatedAt && review.escalatedTo ? review.escalatedTo.split(",").filter(Boolean) : [];
  return {
    users: [...(review.reassignedTo ? [review.reassignedTo] : []), ...escalated.filter((id) => !id.startsWith("S"))],
    usergroups: escalated.filter((id) => id.startsWith("S")),
  };
}

export interface ReviewerRulesDeps {
  /** Each crew's (or flow's) `reviewers`. */
  crews: RulesSource;
  /** Reads a user group's members (cached here). */
  lookup: UsergroupLookup;
  log: Logger;
  clock?: Clock;
  /** How long a group's members are fresh (default USERGROUP_TTL_MS). */
  ttlMs?: number;
}

export class ReviewerRules {
  private readonly groups: MembershipCache<TeamRef | undefined>;
  private readonly crews: RulesSource;
  private readonly log: Logger;

  constructor(deps: ReviewerRulesDeps) {
    this.crews = deps.crews;
    this.log = deps.log;
    this.groups = new MembershipCache(deps.lookup, {
      ttlMs: deps.ttlMs ?? USERGROUP_TTL_MS,
      maxEntries: USERGROUP_CACHE_MAX,
      clock: deps.clock ?? systemClock,
      onError: (usergroup, err) => this.log.warn("could not read user group members", { usergroup, err }),
    });
  }

  /** The crew's rules, or undefined when anyone may decide. */
  rulesFor(crewName: string): RulesConfig | undefined {
    const rules = this.crews.config(crewName)?.reviewers;
    return rules && (rules.users.length > 0 || rules.usergroups.length > 0) ? rules : undefined;
  }

  /** The lifecycle's ReviewerGate: the crew's rules, plus whoever the review was reassigned or escalated to. */
  readonly gate: ReviewerGate = async (execution: Execution, userId: string, review?: Review) => {
    const rules = this.rulesFor(execution.crewName);
    const team = { teamId: execution.teamId, enterpriseId: execution.enterpriseId };
    if (!rules || (review && (await this.isGranted(review, userId, team))) || (await this.allows(rules, userId, team))) return { allowed: true };
    return { allowed: false, who: describeReviewers(rules) };
  };

  /** Whether this one review lets the user decide beyond the crew's rules (reassigned to them, or escalated to them or their group); `team`: the run's workspace. */
  async isGranted(review: Pick<Review, "reassignedTo" | "escalatedAt" | "escalatedTo">, userId: string, team?: TeamRef): Promise<boolean> {
    const grants = reviewGrants(review);
    return grants.users.length + grants.usergroups.length > 0 && this.allows(grants, userId, team);
  }

  /** Whether the user may decide this crew's reviews (true when the crew has no rules); `team`: the run's workspace. */
  async mayDecide(crewName: string, userId: string, team?: TeamRef): Promise<boolean> {
    const rules = this.rulesFor(crewName);
    return !rules || this.allows(rules, userId, team);
  }

  /** Loads every configured group in the background (at start-up), so first clicks do not wait. */
  prefetch(): void {
    const groups = new Set(this.crews.all().flatMap((c) => c.reviewers?.usergroups ?? []));
    for (const group of groups) void this.refresh(group);
  }

  private async allows(rules: RulesConfig, userId: string, team?: TeamRef): Promise<boolean> {
    if (rules.users.includes(userId)) return true;
    if (rules.usergroups.length === 0) return false;
    // Cached answers first: a yes from any cached group (fresh or stale) needs no Slack call.
    const toCheck: string[] = [];
    for (const group of rules.usergroups) {
      const known = this.groups.known(group, userId, team);
      if (known) return true;
      if (known === undefined) toCheck.push(group);
    }
    // A no is only given on fresh data: look up the groups that are missing or stale.
    const results = await Promise.all(toCheck.map((group) => this.refresh(group, team)));
    return results.some((users) => users?.has(userId));
  }

  /** One lookup per group at a time; a failed lookup keeps the old entry (if any) and is logged. */
  private refresh(group: string, team?: TeamRef): Promise<Set<string> | undefined> {
    return this.groups.refresh(group, team).catch(() => undefined);
  }
}
