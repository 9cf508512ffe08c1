import { describe, expect, it } from "vitest";
import { describeDuration, describeRemaining, parseDuration } from "./duration.js";

describe("parseDuration", () => {
  it("reads seconds, minutes, hours, days and combinations in that order", () => {
    expect(parseDuration("90s")).toBe(90_000);
    expect(parseDuration("30m")).toBe(30 * 60_000);
    expect(parseDuration("24h")).toBe(24 * 3_600_000);
    expect(parseDuration("2d")).toBe(2 * 86_400_000);
    expect(parseDuration("1h30m")).toBe(90 * 60_000);
    expect(parseDuration(" 1h 30m ")).toBe(90 * 60_000);
    expect(parseDuration("1D2H")).toBe(26 * 3_600_000);
  });

  it("refuses what it cannot read, zero and wrong order", () => {
    for (const bad of ["", "30", "30 minutes", "m30", "1.5h", "-5m", "30m1h", "0s", "0h0m", "abc", "1w"]) expect(parseDuration(bad), bad).toBeUndefined();
  });
});

describe("describeDuration", () => {
  it("says a configured duration in its largest whole unit", () => {
    expect(describeDuration(30 * 60_000)).toBe("30 minutes");
    expect(describeDuration(60_000)).toBe("1 minute");
    expect(describeDuration(2 * 3_600_000)).toBe("2 hours");
    expect(describeDuration(90_000)).toBe("90 seconds");
    expect(describeDuration(90 * 60_000)).toBe("90 minutes");
    expect(describeDuration(86_400_000)).toBe("24 hours");
    expect(describeDuration(3 * 86_400_000)).toBe("3 days");
  });
});

describe("describeRemaining", () => {
  it("rounds what is left to what a reader needs", () => {
    expect(describeRemaining(2 * 3_600_000 - 3_000)).toBe("2 hours");
    expect(describeRemaining(30 * 60_000 - 2_000)).toBe("30 minutes");
    expect(describeRemaining(90 * 60_000)).toBe("1 hour 30 minutes");
    expect(describeRemaining(20_000)).toBe("20 seconds");
    expect(describeRemaining(0)).toBe("moments");
    expect(describeRemaining(27 * 3_600_000)).toBe("1 day 3 hours");
    expect(describeRemaining(12 * 3_600_000 + 20 * 60_000)).toBe("12 hours");
  });
});
