import { describe, expect, it } from "vitest";
import { MembershipCache } from "./membership-cache.js";

function setup(members: Record<string, string[]>, maxEntries = 10) {
  const clock = { t: 0, now: () => new Date(clock.t) };
  const lookups: string[] = [];
  const errors: string[] = [];
  const cache = new MembershipCache<string>(
    async (key, context) => {
      lookups.push(`${key}@${context}`);
      if (!members[key]) throw new Error("channel_not_found");
      return members[key]!;
    },
    { ttlMs: 1000, maxEntries, clock, onError: (key) => errors.push(key) },
  );
  return { cache, clock, lookups, errors };
}

describe("MembershipCache", () => {
  it("answers from a fresh entry without a lookup, and looks up again once it is stale", async () => {
    const { cache, clock, lookups } = setup({ C1: ["U1"] });
    expect(await cache.has("C1", "U1", "T1")).toBe(true);
    expect(await cache.has("C1", "U2", "T1")).toBe(false);
    expect(lookups).toEqual(["C1@T1"]);
    clock.t = 1500;
    expect(await cache.has("C1", "U2", "T1")).toBe(false); // a stale no is looked up again
    expect(lookups).toHaveLength(2);
  });

  it("one lookup per key at a time", async () => {
    const { cache, lookups } = setup({ C1: ["U1"] });
    expect(await Promise.all([cache.has("C1", "U1", "T1"), cache.has("C1", "U2", "T1"), cache.has("C1", "U1", "T1")])).toEqual([true, false, true]);
    expect(lookups).toHaveLength(1);
  });

  it("a failed lookup throws without an entry, keeps the old entry with one, and is told", async () => {
    const members: Record<string, string[]> = { C1: ["U1"] };
    const { cache, clock, errors } = setup(members);
    await expect(cache.has("C9", "U1", "T1")).rejects.toThrow("channel_not_found");
    expect(await cache.has("C1", "U1", "T1")).toBe(true);
    delete members.C1;
    clock.t = 5000;
    expect(await cache.has("C1", "U2", "T1")).toBe(false);
    expect(await cache.has("C1", "U1", "T1")).toBe(true);
    expect(errors).toContain("C9");
    expect(errors).toContain("C1");
  });

  it("keeps at most maxEntries keys, dropping the least recently fetched", async () => {
    const members = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`C${i}`, ["U1"]]));
    const { cache, lookups } = setup(members, 3);
    for (let i = 0; i < 5; i++) await cache.has(`C${i}`, "U1", "T1");
    expect(lookups).toHaveLength(5);
    await cache.has("C4", "U1", "T1");
    await cache.has("C2", "U1", "T1");
    expect(lookups).toHaveLength(5);
    await cache.has("C0", "U1", "T1"); // dropped: looked up again
    expect(lookups).toHaveLength(6);
  });
});
