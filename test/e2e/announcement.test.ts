// The run's announcement (the channel message its thread hangs off) says a review waits once that review
// has waited through a reminder, and goes back to Running after its decision. A review decided before
// any reminder costs the announcement no update.
import { afterEach, describe, expect, it } from "vitest";
import { STOP_ACTION } from "../../src/adapters/slack/blocks/index.js";
import { CHANNEL, eventually, type Harness, startHarness } from "../support/harness.js";
import { clickReview, offsetClock, pendingReview, startRunViaSlack } from "../support/reviews.js";

let h: Harness;
afterEach(async () => h?.close());

const WAITING = "Waiting for a review";

/** A crew that waits on its first task, then works a long while on the second. */
const crew = {
  tasks: [
    { id: "t1", name: "draft", agent: "A", humanInput: true, delayMs: 300, steps: 0 },
    { id: "t2", name: "polish", agent: "B", delayMs: 60_000, steps: 0 },
  ],
};

describe("the run's announcement while the run is live", () => {
  it("says a review waits once the review has waited through a reminder, keeps its Stop button, and says Running again after the decision", async () => {
    const clock = offsetClock();
    h = await startHarness({ crew, config: { reviewReminders: { afterMinutes: 1, max: 2 } }, crewline: { clock } });
    const run = await startRunViaSlack(h, "Tide pools");
    const announcementTs = run.announcementTs ?? run.threadTs!;
    const announcement = () => h.slack.messages(CHANNEL).find((m) => m.ts === announcementTs)!;
    const shows = (text: string) => JSON.stringify(announcement().blocks ?? []).includes(text);
    const review = await pendingReview(h);
    await h.settled({ crewRuns: false });
    // A fresh review: the announcement still says Running.
    expect(shows("Running")).toBe(true);
    expect(shows(WAITING)).toBe(false);

    // When nobody has decided it by its reminder.
    clock.offsetMs = 61_000;
    expect(await h.bot.reviewRequests.remindDue()).toBe(1);

    // Then the announcement says a review waits, with its Stop button.
    await eventually(() => shows(WAITING), { what: "the announcement saying a review waits" });
    expect(JSON.stringify(announcement().blocks)).toContain(STOP_ACTION);

    // When the reviewer approves, the crew goes on with the next task.
    expect((await clickReview(h, review, true)).status).toBe(200);

    // Then the announcement says Running again, its Stop button still there.
    await eventually(() => shows("Running") && !shows(WAITING), { what: "the announcement saying Running again" });
    expect(JSON.stringify(announcement().blocks)).toContain(STOP_ACTION);
  }, 30_000);

  it("costs nothing for a review decided before any reminder: no update of the announcement beyond its kickoff id", async () => {
    h = await startHarness({ crew });
    const run = await startRunViaSlack(h, "Tide pools");
    const announcementTs = run.announcementTs ?? run.threadTs!;
    const review = await pendingReview(h);
    await h.settled({ crewRuns: false });
    const updates = () => h.slack.callsTo("chat.update").filter((c) => c.args.ts === announcementTs);
    const before = updates().length;
    expect(JSON.stringify(updates().map((c) => c.args.blocks))).not.toContain(WAITING);

    expect((await clickReview(h, review, true)).status).toBe(200);
    await h.settled({ crewRuns: false });
    expect(updates()).toHaveLength(before);
  }, 30_000);
});
