// An error from outside (a crew's failure, a service's error answer) as people read it: stack frames
// are dropped, never shown in Slack.
import { safeSlice } from "./truncate.js";

/** Of a longer error, this much of its start and of its end is read. */
const ERROR_READ = 16_384;
const PYTHON_TRACEBACK = "Traceback (most recent call last):";

/**
 * One readable line or paragraph: a Python traceback's last line (with what came before it on its
 * first line), a JavaScript or Java stack's first line, a Go panic's lines before its goroutines.
 * Newlines written as `\n` (a traceback inside a JSON string) count as newlines.
 */
export function readableError(error: string): string {
  // Only the start and the end of a long error can show (its first line, or a traceback's last).
  const read = error.length > 2 * ERROR_READ ? `${safeSlice(error, ERROR_READ)}\n${error.slice(-ERROR_READ)}` : error;
  let text = read.replace(/\r\n?/g, "\n").trim();
  if (!text.includes("\n") && text.includes("\\n")) text = text.split("\\n").join("\n");
  const lines = text.split("\n").filter((l) => l.trim());
  const traceback = text.indexOf(PYTHON_TRACEBACK);
  if (traceback >= 0) {
    const before = text.slice(0, traceback).trim();
    const last = (lines.at(-1) ?? "").trim();
    return before && !before.includes("\n") ? `${before} ${last}` : last;
  }
  if (lines.some((l) => /^\s+at\s/.test(l))) return (lines[0] ?? "").trim();
  const goroutine = lines.findIndex((l) => /^goroutine \d+ \[/.test(l));
  if (goroutine > 0) return lines.slice(0, goroutine).join("\n").trim();
  return text;
}
