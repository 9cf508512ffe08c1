import { describe, expect, it } from "vitest";
import {
  APPROVE_ACTION,
  CREW_PICKER_VIEW_CALLBACK,
  CREW_SELECT_ACTION,
  crewNameFromOptionValue,
  crewOptionValue,
  FEEDBACK_ACTION,
  FEEDBACK_BLOCK,
  INPUT_BLOCK_PREFIX,
  inputBlockId,
  inputNameFromBlockId,
  KICKOFF_VIEW_CALLBACK,
  REJECT_ACTION,
} from "./ids.js";

describe("ids", () => {
  it("keeps the agreed constant values", () => {
    expect([KICKOFF_VIEW_CALLBACK, CREW_PICKER_VIEW_CALLBACK, CREW_SELECT_ACTION, INPUT_BLOCK_PREFIX]).toEqual(["crew_kickoff", "crew_pick", "crew_select", "in:"]);
    expect([APPROVE_ACTION, REJECT_ACTION, FEEDBACK_BLOCK, FEEDBACK_ACTION]).toEqual(["review_approve", "review_reject", "review_feedback", "feedback"]);
  });

  it("uses the prefix plus the name for ordinary input names", () => {
    expect(inputBlockId("topic")).toBe("in:topic");
  });

  it("maps long input names to distinct ids of at most 255 chars, and back", () => {
    const base = "x".repeat(400);
    const names = [`${base}a`, `${base}b`, "😀".repeat(300), "short"];
    const ids = names.map(inputBlockId);
    expect(new Set(ids).size).toBe(names.length);
    for (const id of ids) expect(id.length).toBeLessThanOrEqual(255);
    for (const name of names) expect(inputNameFromBlockId(inputBlockId(name), names)).toBe(name);
    expect(inputNameFromBlockId("in:unknown", names)).toBeUndefined();
  });

  it("maps crew names to option values of at most 150 chars, and back", () => {
    const names = ["Research crew", `${"c".repeat(200)}1`, `${"c".repeat(200)}2`];
    const values = names.map(crewOptionValue);
    expect(values[0]).toBe("Research crew");
    expect(new Set(values).size).toBe(3);
    for (const v of values) expect(v.length).toBeLessThanOrEqual(150);
    for (const name of names) expect(crewNameFromOptionValue(crewOptionValue(name), names)).toBe(name);
  });
});
