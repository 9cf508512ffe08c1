import { describe, expect, it } from "vitest";
import { bindForm, formIsFor } from "./form-binding.js";
import { decodeMetadata, encodeMetadata } from "./metadata.js";

const facts = { crew: "research", channel: "C1", team: "T1", user: "U1" };
const inputs = [
  { name: "topic", required: true },
  { name: "audience", required: false },
];

describe("kickoff form metadata", () => {
  it("carries the inputs as names and required flags, and reads them back sealed as they were", () => {
    const text = encodeMetadata(bindForm("key", { ...facts, inputs }));
    expect(JSON.parse(text)).toMatchObject({ in: ["topic", "audience"], req: "10" });
    const read = decodeMetadata(text);
    expect(read.success && read.data.inputs).toEqual(inputs);
    expect(read.success && formIsFor("key", read.data, "U1")).toBe(true);
  });

  it("reads a form opened before, its inputs as objects", () => {
    const sealed = bindForm("key", { ...facts, inputs });
    const read = decodeMetadata(JSON.stringify(sealed));
    expect(read.success && read.data.inputs).toEqual(inputs);
    expect(read.success && formIsFor("key", read.data, "U1")).toBe(true);
  });

  it("holds 80 inputs in Slack's 3,000 characters, and refuses flags that are not 0 or 1", () => {
    const many = Array.from({ length: 80 }, (_, i) => ({ name: `input_name_${i}`, required: i % 2 === 0 }));
    expect(encodeMetadata(bindForm("key", { ...facts, inputs: many })).length).toBeLessThanOrEqual(3000);
    expect(decodeMetadata(JSON.stringify({ ...facts, in: ["topic"], req: "x" })).success).toBe(false);
  });
});
