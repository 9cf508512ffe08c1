// Who is told a reply was not taken while the database is down: the rule alone, no Slack, no database.
import { describe, expect, it } from "vitest";
import { toldWhenUnrecorded } from "./reply-decisions.js";

const BOT = "U0BOT";

describe("toldWhenUnrecorded: who hears a reply was not taken while the database is down", () => {
  it("an approve or reject under the bot's message is told; under anyone else's, not", () => {
    expect(toldWhenUnrecorded({ text: "lgtm", parentUserId: BOT }, BOT)).toBe(true);
    expect(toldWhenUnrecorded({ text: "changes: shorter intro", parentUserId: BOT }, BOT)).toBe(true);
    expect(toldWhenUnrecorded({ text: "lgtm", parentUserId: "U0BOB" }, BOT)).toBe(false);
  });

  it("other talk is never told, wherever it is", () => {
    expect(toldWhenUnrecorded({ text: "what do you all think?", parentUserId: BOT }, BOT)).toBe(false);
  });

  it("a thread that cannot be told apart (no parent named, the bot's id unknown) is told, as before", () => {
    expect(toldWhenUnrecorded({ text: "approve" }, BOT)).toBe(true);
    expect(toldWhenUnrecorded({ text: "approve", parentUserId: "U0BOB" }, undefined)).toBe(true);
  });
});
