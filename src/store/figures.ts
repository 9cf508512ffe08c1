// Counts over the shared database that /metrics reports (read at scrape time, never per event), so
// any replica tells the same numbers. Each is a count on indexed columns.
import type { Sql } from "./sql.js";

export interface DatabaseFigures {
  /** Crew reviews with decision controls, waiting for a person. */
  reviewsWaiting: number;
  /** Decisions claimed and being sent to the crew (a replica that died mid-/resume leaves one until it is taken over). */
  decisionsInFlight: number;
  /** Flow feedback requests waiting for an answer. */
  flowRequestsWaiting: number;
  /** Status-poll leases currently held by any replica. */
  pollLeasesHeld: number;
  /** Recorded crew callbacks not processed yet (queued: will be retried; givenUp: five attempts failed). */
  callbacksQueued: number;
  callbacksGivenUp: number;
}

/** The figures as of `now` (poll leases expiring after it are held). */
export async function databaseFigures(db: Sql, now: Date): Promise<DatabaseFigures> {
  const sql = db;
  const row = await sql
    .selectNoFrom((eb) => [
      eb
        .selectFrom("Review")
        .select((s) => s.fn.countAll<number>().as("n"))
        .where("state", "=", "pending")
        .as("reviewsWaiting"),
      eb
        .selectFrom("Review")
        .select((s) => s.fn.countAll<number>().as("n"))
        .where("state", "=", "deciding")
        .as("decisionsInFlight"),
      eb
        .selectFrom("FlowRequest")
        .select((s) => s.fn.countAll<number>().as("n"))
        .where("state", "=", "pending")
        .as("flowRequestsWaiting"),
      eb
        .selectFrom("Execution")
        .select((s) => s.fn.countAll<number>().as("n"))
        .where("leaseOwner", "is not", null)
        .where("leaseExpiresAt", ">", now)
        .as("pollLeasesHeld"),
      eb
        .selectFrom("WebhookEvent")
        .select((s) => s.fn.countAll<number>().as("n"))
        .where("processedAt", "is", null)
        .where("attempts", "<", 5)
        .as("callbacksQueued"),
      eb
        .selectFrom("WebhookEvent")
        .select((s) => s.fn.countAll<number>().as("n"))
        .where("processedAt", "is", null)
        .where("attempts", ">=", 5)
        .as("callbacksGivenUp"),
    ])
    .executeTakeFirst();
  return {
    reviewsWaiting: Number(row?.reviewsWaiting ?? 0),
    decisionsInFlight: Number(row?.decisionsInFlight ?? 0),
    flowRequestsWaiting: Number(row?.flowRequestsWaiting ?? 0),
    pollLeasesHeld: Number(row?.pollLeasesHeld ?? 0),
    callbacksQueued: Number(row?.callbacksQueued ?? 0),
    callbacksGivenUp: Number(row?.callbacksGivenUp ?? 0),
  };
}
