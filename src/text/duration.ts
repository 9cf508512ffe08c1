// Durations people write in configuration ("90s", "30m", "24h", "1h30m", "2d") and how they read
// back in messages ("30 minutes", "2 hours").

const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PATTERN = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/;

/** Milliseconds of "90s", "30m", "24h", "2d" or a combination in that order ("1h30m"); undefined when malformed or zero. */
export function parseDuration(text: string): number | undefined {
  const compact = text.trim().toLowerCase().replace(/\s+/g, "");
  const match = compact ? PATTERN.exec(compact) : null;
  if (!match) return undefined;
  const [d, h, m, s] = match.slice(1).map((v) => Number(v ?? 0)) as [number, number, number, number];
  const ms = d * UNIT_MS.d! + h * UNIT_MS.h! + m * UNIT_MS.m! + s * UNIT_MS.s!;
  return ms > 0 && Number.isSafeInteger(ms) ? ms : undefined;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

/** A configured duration in words, in its largest whole unit: "30 minutes", "2 hours", "90 seconds", "24 hours", "3 days". */
export function describeDuration(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  // "24 hours" reads as configured; whole days from two on.
  if (seconds >= 2 * 86_400 && seconds % 86_400 === 0) return plural(seconds / 86_400, "day");
  if (seconds > 0 && seconds % 3_600 === 0) return plural(seconds / 3_600, "hour");
  if (seconds > 0 && seconds % 60 === 0) return plural(seconds / 60, "minute");
  return plural(seconds, "second");
}

/** A time still to come, roughly, for "in …": "2 hours", "45 minutes", "1 day 3 hours", "a few seconds". */
export function describeRemaining(ms: number): string {
  const minutes = Math.round(ms / 60_000);
  if (ms < 45_000) return ms <= 0 ? "moments" : plural(Math.max(1, Math.round(ms / 1000)), "second");
  if (minutes < 60) return plural(Math.max(1, minutes), "minute");
  const hours = Math.floor(minutes / 60);
  const rest = minutes % 60;
  if (hours < 24) return rest && hours < 10 ? `${plural(hours, "hour")} ${plural(rest, "minute")}` : plural(Math.round(minutes / 60), "hour");
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${plural(days, "day")} ${plural(hours % 24, "hour")}` : plural(days, "day");
}
