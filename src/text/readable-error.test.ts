import { describe, expect, it } from "vitest";
import { readableError } from "./readable-error.js";

const middle = "  frame\n".repeat(2 ** 18);

describe("readableError", () => {
  it.each([
    ["a JS stack: its first line", "Error: boom\n    at a (b.js:1:1)", "Error: boom"],
    ["a Python traceback: its last line", 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n    f()\nValueError: bad input\n', "ValueError: bad input"],
    ["text with no stack: as it is", "Line one\nLine two", "Line one\nLine two"],
    ["a traceback after text on its first line", "Task failed: Traceback (most recent call last):\n  File \"x.py\", line 3\nKeyError: 'topic'", "Task failed: KeyError: 'topic'"],
    ["a traceback written with \\n in a JSON string", 'Traceback (most recent call last):\\n  File \\"/app/main.py\\", line 9\\nRuntimeError: no model', "RuntimeError: no model"],
    [
      "a Go panic: the lines before its goroutines",
      "panic: runtime error: index out of range\n\ngoroutine 1 [running]:\nmain.main()\n\t/app/main.go:12 +0x1d",
      "panic: runtime error: index out of range",
    ],
    ["a 2 MiB traceback: its last line", `Traceback (most recent call last):\n${middle}KeyError: 'x'`, "KeyError: 'x'"],
    ["a 2 MiB JS stack: its first line", `Error: first\n${"    at f (a.js:1:1)\n".repeat(100_000)}`, "Error: first"],
  ])("%s", (_what, error, shown) => {
    expect(readableError(error)).toBe(shown);
  });
});
