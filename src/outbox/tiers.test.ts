import { describe, expect, it } from "vitest";
import { budgetFor, reserveFor } from "./budget.js";
import { bucketKey, METHOD_TIERS, pauseKey, TIERS, takeCell, tierOf } from "./tiers.js";

/** Drives takeCell like a bucket kept between calls, at the times given (an injected clock). */
function bucket(rate: { perMinute: number; burst: number }, reserve = 0) {
  let tat: number | undefined;
  return (now: number) => {
    const r = takeCell(tat, now, rate, reserve);
    if (r.ok) tat = r.tat;
    return r;
  };
}

describe("Slack tiers", () => {
  it("are one table: every method Crewline's effects call has a tier, chat.postMessage is paced per channel", () => {
    for (const method of ["chat.postMessage", "chat.update", "chat.getPermalink", "files.getUploadURLExternal", "files.completeUploadExternal", "users.lookupByEmail"])
      expect(tierOf(method), method).toBeDefined();
    expect(tierOf("chat.update")).toEqual(TIERS.tier3);
    expect(TIERS.tier3.perMinute).toBe(50);
    expect(tierOf("chat.postMessage")?.scope).toBe("channel");
    expect(tierOf("no.such.method")).toBeUndefined();
    expect(Object.values(METHOD_TIERS).every((t) => t in TIERS)).toBe(true);
  });

  it("keys a bucket per workspace and method, per channel for a channel-paced one; a pause covers the method in the workspace", () => {
    expect(bucketKey({ team: "T1", method: "chat.update", channel: "C1" }, TIERS.tier3)).toBe("T1|chat.update");
    expect(bucketKey({ team: "T1", method: "chat.postMessage", channel: "C1" }, TIERS.post)).toBe("T1|chat.postMessage|C1");
    expect(pauseKey({ team: "T1", method: "chat.postMessage" })).toBe("T1|chat.postMessage");
  });

  it("lets a burst go at once, then one call per interval, and says when the next may go", () => {
    const take = bucket({ perMinute: 60, burst: 3 });
    const t0 = 1_000_000;
    expect([take(t0), take(t0), take(t0)].every((r) => r.ok)).toBe(true);
    expect(take(t0)).toEqual({ ok: false, retryAt: t0 + 1000 });
    expect(take(t0 + 999).ok).toBe(false);
    expect(take(t0 + 1000).ok).toBe(true);
    expect(take(t0 + 1000).ok).toBe(false);
    // A quiet spell refills the bucket, up to its burst and no further.
    expect([take(t0 + 60_000), take(t0 + 60_000), take(t0 + 60_000)].every((r) => r.ok)).toBe(true);
    expect(take(t0 + 60_000).ok).toBe(false);
  });

  it("sustains the tier's rate: 50 a minute for chat.update, whatever the callers ask", () => {
    const take = bucket(TIERS.tier3);
    let went = 0;
    for (let t = 0; t < 60_000; t += 100) if (take(t).ok) went++;
    // The burst, then one every 1.2 s.
    expect(went).toBe(TIERS.tier3.burst + Math.floor((60_000 - 100) / 1200));
  });

  it("a reserve leaves the last tokens to the calls above it", () => {
    const t0 = 5_000_000;
    let tat: number | undefined;
    const take = (reserve: number) => {
      const r = takeCell(tat, t0, { perMinute: 60, burst: 4 }, reserve);
      if (r.ok) tat = r.tat;
      return r.ok;
    };
    expect(take(2)).toBe(true); // 4 → 3
    expect(take(2)).toBe(true); // 3 → 2
    expect(take(2)).toBe(false); // progress leaves 2
    expect(take(1)).toBe(true); // 2 → 1: a notice leaves 1
    expect(take(1)).toBe(false);
    expect(take(0)).toBe(true); // what a person waits on takes the last one
    expect(take(0)).toBe(false);
  });

  it("reserves by priority: none for what a person waits on, one for notices, half the bucket for progress, all but two when Slack is idle", () => {
    expect([reserveFor(0, 7), reserveFor(1, 7), reserveFor(2, 7), reserveFor(3, 7)]).toEqual([0, 1, 3, 5]);
    expect([reserveFor(2, 1), reserveFor(3, 1)]).toEqual([0, 0]);
    expect(reserveFor(3, 3)).toBe(1);
    // The outbox keeps one token of headroom below Slack's bucket: Tier 3's 8 become 7 it may spend.
    const update = budgetFor({ team: "T1", method: "chat.update" }, 0)!;
    expect(update).toMatchObject({ key: "T1|chat.update", pauseKey: "T1|chat.update", intervalMs: 1200, toleranceMs: 6 * 1200 });
    expect(budgetFor({ team: "T1", method: "chat.update" }, 2)!.toleranceMs).toBe(3 * 1200);
    expect(budgetFor({ team: "T1", method: "chat.postMessage", channel: "C9" }, 0)).toMatchObject({ key: "T1|chat.postMessage|C9", pauseKey: "T1|chat.postMessage" });
    expect(budgetFor({ team: "T1", method: "no.such.method" }, 0)).toBeUndefined();
  });

  it("a modal call a person waits on may go one burst past the outbox's bucket before it waits", () => {
    // Tier 4: 15 a burst, 14 spendable, one each 600 ms: the outbox's calls go 14 at once (a tolerance of
    // 13 intervals), a form's 28 (27).
    const outbox = budgetFor({ team: "T1", method: "views.update" }, 0)!;
    const modal = budgetFor({ team: "T1", method: "views.update", burstTolerated: true }, 0)!;
    expect(outbox).toMatchObject({ intervalMs: 600, toleranceMs: 13 * 600 });
    expect(modal).toMatchObject({ key: outbox.key, intervalMs: 600, toleranceMs: 27 * 600 });
  });

  it("a live plan's stop yields the Tier 2 token to starts: it goes only with one more token left than a start needs", () => {
    // Tier 2: 4 a burst, 3 spendable, progress leaves 1: a start goes with 2 left (tolerance one interval of 3 s), a stop only with all 3.
    expect(budgetFor({ team: "T1", method: "chat.startStream" }, 2)).toMatchObject({ intervalMs: 3000, toleranceMs: 3000 });
    expect(budgetFor({ team: "T1", method: "chat.stopStream", yields: true }, 2)).toMatchObject({ intervalMs: 3000, toleranceMs: 0 });
    expect(budgetFor({ team: "T1", method: "chat.stopStream" }, 2)!.toleranceMs).toBe(3000);
    // Plans starting one every 3 s keep the bucket from filling: the stop waits until they are done.
    const rate = { perMinute: 20, burst: 3 };
    let tat: number | undefined;
    const take = (now: number, reserve: number) => {
      const r = takeCell(tat, now, rate, reserve);
      if (r.ok) tat = r.tat;
      return r.ok;
    };
    const t0 = 9_000_000;
    expect([take(t0, 1), take(t0, 1)]).toEqual([true, true]);
    for (let t = t0; t < t0 + 12_000; t += 3000) {
      expect(take(t, 2), `stop at +${t - t0}`).toBe(false);
      expect(take(t, 1), `start at +${t - t0}`).toBe(t > t0);
    }
    // No start left waiting: the bucket fills and the stop goes.
    expect(take(t0 + 18_000, 2)).toBe(true);
  });
});
