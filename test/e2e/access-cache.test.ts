// Access checks from outside a run's channel read its members (conversations.members, up to 20
// pages): the member list is cached briefly, so a burst of checks costs Slack one read.
import { afterEach, describe, expect, it } from "vitest";
import { CHANNEL_MEMBERS_TTL_MS } from "../../src/adapters/slack/access.js";
import { CHANNEL, eventually, type Harness, startHarness, USER } from "../support/harness.js";
import { startRunViaSlack } from "../support/reviews.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const BOB = "U0BOB";
const MALLORY = "U0MALLORY";

describe("channel members for access checks", () => {
  it("two checks in a row read the run's channel members once; after the TTL, again", async () => {
    const clock = { offsetMs: 0, now: () => new Date(Date.now() + clock.offsetMs) };
    h = await startHarness({ crewline: { clock } });
    const execution = await startRunViaSlack(h);
    h.slack.setMembers(CHANNEL, [USER, BOB]);
    const status = async (user: string) => {
      const before = h!.slack.callsTo("response_url").length;
      await h!.requests.command({ text: `status ${execution.kickoffId}`, user_id: user, channel_id: "C0ELSEWHERE" });
      return String((await eventually(() => h!.slack.callsTo("response_url")[before], { what: `${user}'s status answer` })).args.text);
    };
    const reads = () => h!.slack.callsTo("conversations.members").filter((c) => c.args.channel === CHANNEL).length;
    const before = reads();

    expect(await status(BOB)).toContain(String(execution.kickoffId));
    expect(await status(BOB)).toContain(String(execution.kickoffId));
    expect(await status(MALLORY)).toMatch(/^I don't know a run/);
    expect(reads() - before).toBe(1);

    // After the TTL the list is read again: a stale yes answers at once while it is (as for user
    // groups), and a member who left is refused from then on.
    h.slack.setMembers(CHANNEL, [USER]);
    clock.offsetMs = CHANNEL_MEMBERS_TTL_MS + 1000;
    await status(BOB);
    await eventually(() => reads() - before === 2, { what: "the members read again" });
    expect(await status(BOB)).toMatch(/^I don't know a run/);
    expect(reads() - before).toBe(2);
  }, 60_000);
});
