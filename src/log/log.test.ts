import { describe, expect, it } from "vitest";
import { createLogger } from "./log.js";

describe("logger", () => {
  it("never writes Slack tokens, bearer tokens or webhook secrets, whatever it is handed", () => {
    const lines: string[] = [];
    const log = createLogger("debug", (line) => lines.push(line));
    const secret = "q7Xk2_f9PZ-abcdefghijklmnopqrstuvwxyz012345";
    log.error("request failed", {
      url: `https://bot.example.com/hooks/0b6c2a9e-4f0e-4c55-9d8e-1c1a2b3c4d5e/task/${secret}`,
      headers: { authorization: "Bearer crew-org-token-123" },
      err: new Error("invalid_auth for xoxb-1234-5678-abcdefSECRET and xapp-1-A0-999-SECRET"),
    });
    const out = lines.join("\n");
    expect(out).toContain("request failed");
    for (const leaked of [secret, "crew-org-token-123", "abcdefSECRET", "999-SECRET"]) expect(out).not.toContain(leaked);
    expect(out).toContain("/hooks/0b6c2a9e-4f0e-4c55-9d8e-1c1a2b3c4d5e/task/[redacted]");
  });

  it("redacts callback paths whatever their shape (case, double slashes, escapes)", () => {
    const lines: string[] = [];
    const log = createLogger("debug", (line) => lines.push(line));
    const secret = "SeCrEt_value-123456789";
    const id = "0b6c2a9e-4f0e-4c55-9d8e-1c1a2b3c4d5e";
    for (const path of [`/hooks/${id}/TASK/${secret}`, `//hooks//${id}/task/${secret}`, `/HOOKS/${id}/task/${secret}`, `/hooks/${id}/task/%E0%A4${secret}`, `/hooks/${secret}`]) {
      log.warn(`unhandled request ${path}`, { path });
    }
    const out = lines.join("\n");
    expect(out).not.toContain("SeCrEt");
    expect(lines).toHaveLength(5);
  });

  it("drops lines below its level", () => {
    const lines: string[] = [];
    const log = createLogger("warn", (line) => lines.push(line));
    log.info("chatty");
    log.warn("worth knowing");
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: "warn", msg: "worth knowing" });
  });
});
