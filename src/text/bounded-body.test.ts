import { describe, expect, it } from "vitest";
import { readBoundedText } from "./bounded-body.js";

describe("readBoundedText", () => {
  it("reads a body within the limit whole, multi-byte characters split across chunks included", async () => {
    const bytes = Buffer.from("héllo ✓ wörld");
    async function* chunks() {
      for (let i = 0; i < bytes.length; i += 3) yield bytes.subarray(i, i + 3);
    }
    expect(await readBoundedText(chunks(), 100)).toBe("héllo ✓ wörld");
    expect(await readBoundedText(null)).toBe("");
  });

  it("stops an endless body past the limit and closes it", async () => {
    let produced = 0;
    let closed = false;
    async function* endless() {
      try {
        for (;;) {
          produced += 1024;
          yield new Uint8Array(1024);
        }
      } finally {
        closed = true;
      }
    }
    expect(await readBoundedText(endless(), 10 * 1024)).toBeUndefined();
    expect(produced).toBe(11 * 1024);
    expect(closed).toBe(true);
  });
});
