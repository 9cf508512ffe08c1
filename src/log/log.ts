// Line-oriented logger. Everything passes through redact(): Slack tokens, bearer tokens and the
// secret segment of webhook URLs never reach a log line, whatever a caller hands in.
export type LogLevel = "debug" | "info" | "warn" | "error";
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

const SECRET_PATTERNS: [RegExp, string][] = [
  [/xox[a-z]-[A-Za-z0-9-]+/g, "xox?-[redacted]"],
  [/xapp-[A-Za-z0-9-]+/g, "xapp-[redacted]"],
  [/(Bearer\s+)[^\s"',]+/gi, "$1[redacted]"],
  // Whatever its shape (case, repeated slashes, escapes): everything after a run id and kind goes,
  // and any other path under /hooks/ goes whole, but for a flow's own URL (/hooks/flows/<name>, no
  // secret in it: admins paste it into the flow's dashboard).
  [/(\/hooks\/[0-9a-f-]{36}\/[a-z]+\/)[^\s"'<>]+/g, "$1[redacted]"],
  [/(\/+hooks)(?!\/[0-9a-f-]{36}\/[a-z]+\/\[redacted\])(?!\/flows\/[A-Za-z0-9_-]{1,64}(?=[\s"'<>]|$))[/%][^\s"'<>]*/gi, "$1/[redacted]"],
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
