// The run's announcement (the channel message its thread hangs off) follows the run while it is live:
// it says a review waits while one does, and goes back to Running after the decision.
import { afterEach, describe, expect, it } from "vitest";
import { STOP_ACTION } from "../../src/adapters/slack/blocks/index.js";
import { CHANNEL, eventually, type Harness, startHarness } from "../support/harness.js";
import { clickReview, pendingReview, startRunViaSlack } from "../support/reviews.js";

let h: Harness;
afterEach(async () => h?.close());

const WAITING = "Waiting for a review";

describe("the run's announcement while the run is live", () => {
  it("says a review waits while one does, keeps its Stop button, and says Running again after the decision", async () => {
    // Given a crew that waits on its first task, then works a long while on the second.
    h = await startHarness({
      crew: {
        tasks: [
          { id: "t1", name: "draft", agent: "A", humanInput: true, delayMs: 300, steps: 0 },
          { id: "t2", name: "polish", agent: "B", delayMs: 60_000, steps: 0 },
        ],
      },
    });
    const run = await startRunViaSlack(h, "Tide pools");
    const announcementTs = run.announcementTs ?? run.threadTs!;
    const announcement = () => h.slack.messages(CHANNEL).find((m) => m.ts === announcementTs)!;
    const shows = (text: string) => JSON.stringify(announcement().blocks ?? []).includes(text);
    // The kickoff's own update first.
    await eventually(() => shows("Kickoff"), { what: "the announcement with its kickoff id" });
    expect(shows("Running")).toBe(true);

    // When the crew waits on the draft.
    const review = await pendingReview(h);

    // Then the announcement says a review waits, with its Stop button.
    await eventually(() => shows(WAITING), { what: "the announcement saying a review waits" });
    expect(JSON.stringify(announcement().blocks)).toContain(STOP_ACTION);

    // When the reviewer approves, the crew goes on with the next task.
    expect((await clickReview(h, review, true)).status).toBe(200);

    // Then the announcement says Running again, its Stop button still there.
    await eventually(() => shows("Running") && !shows(WAITING), { what: "the announcement saying Running again" });
    expect(JSON.stringify(announcement().blocks)).toContain(STOP_ACTION);
  }, 30_000);
});
