// Line-oriented logger. Everything passes through redact(): Slack tokens, bearer tokens and the
// secret segment of webhook URLs never reach a log line, whatever a caller hands in.
export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

const SECRET_PATTERNS: [RegExp, string][] = [
  [/xox[a-z]-[A-Za-z0-9-]+/g, "xox?-[redacted]"],
  [/xapp-[A-Za-z0-9-]+/g, "xapp-[redacted]"],
  [/(Bearer\s+)[^\s"',]+/gi, "$1[redacted]"],
  [/(Basic\s+)[A-Za-z0-9+/=]{8,}/g, "$1[redacted]"],
  // Secrets by name, in JSON and in form bodies (the OAuth exchange's client_secret, a Web API client's debug log).
  // (The line is JSON, so a quoted message's quotes come escaped: \".)
  [/(\\?"(?:client_secret|token|access_token|refresh_token|password|secret)\\?"\s*:\s*\\?")[^"\\]*/gi, "$1[redacted]"],
  [/\b((?:client_secret|refresh_token)=)[^&\s"']+/gi, "$1[redacted]"],
  // A URL's user name and password (https://user:pass@host).
  [/(\/\/[^/\s:@]+:)[^@/\s]+@/g, "$1[redacted]@"],
  // Whatever its shape (case, repeated slashes, escapes): everything after a run id and kind goes,
  // and any other path under /hooks/ goes whole, but for a flow's own URL (/hooks/flows/<name>, no
  // secret in it: admins paste it into the flow's dashboard).
  [/(\/hooks\/[0-9a-f-]{36}\/[a-z]+\/)[^\s"'<>]+/g, "$1[redacted]"],
  // (?<!\/): one attempt per run of slashes; without it a long run of them was quadratic (16,000 in an
  // unknown request's path, which Bolt logs, held the event loop a second).
  [/(?<!\/)(\/+hooks)(?!\/[0-9a-f-]{36}\/[a-z]+\/\[redacted\])(?!\/flows\/[A-Za-z0-9_-]{1,64}(?=[\s"'<>]|$))[/%][^\s"'<>]*/gi, "$1/[redacted]"],
];

export function redact(text: string): string {
  return SECRET_PATTERNS.reduce((out, [pattern, replacement]) => out.replace(pattern, replacement), text);
}

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

function serialize(value: unknown): unknown {
  if (value instanceof Error) return { name: value.name, message: value.message };
  return value;
}

export function createLogger(level: LogLevel = "info", write: (line: string) => void = (l) => process.stderr.write(l + "\n")): Logger {
  const emit = (at: LogLevel) => (msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[at] < ORDER[level]) return;
    const entries = Object.entries(fields ?? {}).map(([k, v]) => [k, serialize(v)]);
    write(redact(JSON.stringify({ t: new Date().toISOString(), level: at, msg, ...Object.fromEntries(entries) })));
  };
  return { debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error") };
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** A log line that anyone can cause (an unsigned or forged request): written at most once per key per interval. */
export interface SampledLog {
  warn(msg: string, key: string, fields?: Record<string, unknown>): void;
}

/**
 * Writes the first line of each key (message and reason), then at most one per `intervalMs`, which
 * says how many were left out since the last one (`suppressed`). A flood of forged requests costs a
 * line a minute per reason, not one per request. Keys are bounded (oldest forgotten first).
 */
export function sampledLog(log: Logger, intervalMs = 60_000, now: () => number = Date.now, maxKeys = 1000): SampledLog {
  const seen = new Map<string, { at: number; suppressed: number }>();
  return {
    warn(msg, key, fields) {
      const id = `${msg}\0${key}`;
      const t = now();
      const entry = seen.get(id);
      if (entry && t - entry.at < intervalMs) {
        entry.suppressed++;
        return;
      }
      if (!entry && seen.size >= maxKeys) seen.delete(seen.keys().next().value!);
      seen.set(id, { at: t, suppressed: 0 });
      log.warn(msg, { ...fields, ...(entry?.suppressed ? { suppressed: entry.suppressed, suppressedOverS: Math.round((t - entry.at) / 1000) } : {}) });
    },
  };
}
