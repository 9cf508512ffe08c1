import { describe, expect, it } from "vitest";
import { cutReply, flowReplyChoices, flowReplyIntent, REPLY_TEXT_MAX, replyIntent } from "./reply-intent.js";

describe("replyIntent", () => {
  it("approves with an approve word or a thumbs up alone, whatever the case and the punctuation around it", () => {
    for (const text of [
      "approve",
      "Approved",
      "LGTM",
      "lgtm!",
      " ship it ",
      "Ship   it.",
      "*approved*",
      "(LGTM)",
      "👍",
      "👍🏽",
      ":+1:",
      ":thumbsup:",
      ":+1::skin-tone-3:",
      "“approve”",
    ])
      expect(replyIntent(text), text).toEqual({ kind: "approve" });
  });

  it("does not guess: other words, approve words among others, a plain +1, emoji codes cut short", () => {
    for (const text of [
      "",
      "   ",
      "looks good to me",
      "lgtm but fix the intro",
      "I approve of nothing",
      "+1",
      ":+1",
      "thumbsup",
      "approve approve",
      "👍👍",
      "not approved",
      "ship",
      // A question asks, it does not decide.
      "lgtm?",
      "Approved?",
      "ship it??",
      "¿approve?",
      "approve…?",
      "👍?",
    ])
      expect(replyIntent(text), text).toEqual({ kind: "other" });
  });

  it("rejects with a prefix and a colon, the rest being the feedback", () => {
    expect(replyIntent("changes: shorter intro")).toEqual({ kind: "reject", feedback: "shorter intro" });
    expect(replyIntent("Reject: the numbers are wrong\nsee line 2")).toEqual({ kind: "reject", feedback: "the numbers are wrong\nsee line 2" });
    expect(replyIntent("  REDO :  again, with sources ")).toEqual({ kind: "reject", feedback: "again, with sources" });
    expect(replyIntent("*reject*: too long")).toEqual({ kind: "reject", feedback: "too long" });
    // No feedback: still a rejection (the replier is told feedback is needed).
    expect(replyIntent("reject:")).toEqual({ kind: "reject", feedback: "" });
  });

  it("needs the colon and the whole word", () => {
    for (const text of ["reject this please", "rejected: no", "changes needed", "redone: yes", "reject"]) expect(replyIntent(text), text).toEqual({ kind: "other" });
  });

  it("reads a reply of the largest size allowed in linear time", () => {
    const long = cutReply(`changes: ${"a ".repeat(600_000)}`).text;
    const started = performance.now();
    expect(replyIntent(long).kind).toBe("reject");
    expect(replyIntent(cutReply(" ".repeat(1_000_000) + "lgtm").text).kind).toBe("other");
    expect(replyIntent(cutReply(`${"!".repeat(REPLY_TEXT_MAX - 4)}lgtm`).text).kind).toBe("other");
    expect(performance.now() - started).toBeLessThan(200);
  });
});

describe("cutReply", () => {
  it("cuts to the limit, never inside a surrogate pair", () => {
    expect(cutReply("short")).toEqual({ text: "short", cut: false });
    const cut = cutReply(`${"a".repeat(REPLY_TEXT_MAX - 1)}😀tail`);
    expect(cut).toEqual({ text: "a".repeat(REPLY_TEXT_MAX - 1), cut: true });
    expect(cutReply("x".repeat(REPLY_TEXT_MAX + 10)).text).toHaveLength(REPLY_TEXT_MAX);
  });
});

describe("flowReplyIntent", () => {
  const emit = ["approved", "needs_revision", "rejected"];

  it("takes an outcome named alone or as a prefix, with the comment after it", () => {
    expect(flowReplyIntent("Approved!", emit)).toEqual({ kind: "outcome", index: 0, comment: "" });
    expect(flowReplyIntent("needs revision", emit)).toEqual({ kind: "outcome", index: 1, comment: "" });
    expect(flowReplyIntent("needs_revision: cite the_sources - all", emit)).toEqual({ kind: "outcome", index: 1, comment: "cite the_sources - all" });
    expect(flowReplyIntent("Rejected: off topic", emit)).toEqual({ kind: "outcome", index: 2, comment: "off topic" });
  });

  it("maps approve and reject replies to the flow's approve- and reject-like outcomes", () => {
    expect(flowReplyIntent("lgtm", emit)).toEqual({ kind: "outcome", index: 0, comment: "" });
    expect(flowReplyIntent("changes: shorter", emit)).toEqual({ kind: "outcome", index: 2, comment: "shorter" });
    expect(flowReplyIntent("lgtm", ["publish", "hold"])).toEqual({ kind: "outcome", index: 0, comment: "" });
  });

  it("asks otherwise: other text, no outcome of that kind, a flow taking free feedback", () => {
    expect(flowReplyIntent("please look again", emit)).toEqual({ kind: "other" });
    expect(flowReplyIntent("lgtm", ["hold", "later"])).toEqual({ kind: "other" });
    expect(flowReplyIntent("reject:", emit)).toEqual({ kind: "other" });
    expect(flowReplyIntent("approved", [])).toEqual({ kind: "other" });
    for (const question of ["rejected?", "Approved?", "needs revision?", "lgtm?"]) expect(flowReplyIntent(question, emit), question).toEqual({ kind: "other" });
  });

  it("offers the first approve-like and reject-like outcomes in the question", () => {
    expect(flowReplyChoices(emit)).toEqual({ approve: 0, reject: 2 });
    expect(flowReplyChoices(["hold"])).toEqual({});
  });
});
