import { describe, expect, it } from "vitest";
import { createLogger, sampledLog } from "./log.js";

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

  it("never writes a client secret, a secret field, a Basic credential or a URL's password (a Web API client's debug log of the OAuth exchange, a proxy URL)", () => {
    const lines: string[] = [];
    const log = createLogger("debug", (line) => lines.push(line));
    log.debug('http request body: {"code":"1.2.3","client_id":"1111.2222","client_secret":"cs-0123456789abcdef"}');
    log.debug("http request body: client_id=1111.2222&client_secret=cs-0123456789abcdef&refresh_token=xoxe-1-abcdef");
    log.warn("http request failed", { url: "https://proxyuser:proxy-password-42@proxy.example/api/auth.test", header: "Authorization: Basic dXNlcjpwYXNzd29yZA==" });
    log.warn("echo", { body: { authentication: { strategy: "bearer", token: "hi-token-abcdefghijkl" } } });
    const out = lines.join("\n");
    for (const leaked of ["cs-0123456789abcdef", "xoxe-1-abcdef", "proxy-password-42", "dXNlcjpwYXNzd29yZA", "hi-token-abcdefghijkl"]) expect(out).not.toContain(leaked);
    expect(out).toContain("proxyuser:[redacted]@proxy.example");
  });

  it("redacts callback paths whatever their shape (case, double slashes, escapes)", () => {
    const lines: string[] = [];
    const log = createLogger("debug", (line) => lines.push(line));
    const secret = "SeCrEt_value-123456789";
    const id = "0b6c2a9e-4f0e-4c55-9d8e-1c1a2b3c4d5e";
    const paths = [`/hooks/${id}/TASK/${secret}`, `//hooks//${id}/task/${secret}`, `/HOOKS/${id}/task/${secret}`, `/hooks/${id}/task/%E0%A4${secret}`, `/hooks/${secret}`];
    // A long run of slashes before the path (Bolt logs any unknown request's path), and one with no hooks in it.
    paths.push(`${"/".repeat(16_000)}hooks/${secret}`, `${"/".repeat(16_000)}x`);
    for (const path of paths) log.warn(`unhandled request ${path}`, { path });
    const out = lines.join("\n");
    expect(out).not.toContain("SeCrEt");
    expect(lines).toHaveLength(7);
    expect(lines[6]).toContain(`${"/".repeat(16_000)}x`);
  });

  it("drops lines below its level", () => {
    const lines: string[] = [];
    const log = createLogger("warn", (line) => lines.push(line));
    log.info("chatty");
    log.warn("worth knowing");
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: "warn", msg: "worth knowing" });
  });

  it("writes a flood of forged-request lines once per reason per interval, counting the ones left out", () => {
    const lines: string[] = [];
    let t = 0;
    const sampled = sampledLog(
      createLogger("debug", (line) => lines.push(line)),
      60_000,
      () => t,
    );
    for (let i = 0; i < 500; i++) sampled.warn("forged request refused", i % 2 ? "signature mismatch" : "no signature", { reason: i % 2 ? "signature mismatch" : "no signature" });
    expect(lines).toHaveLength(2);
    t = 59_000;
    sampled.warn("forged request refused", "no signature", { reason: "no signature" });
    expect(lines).toHaveLength(2);
    t = 61_000;
    sampled.warn("forged request refused", "no signature", { reason: "no signature" });
    expect(lines).toHaveLength(3);
    expect(JSON.parse(lines[2]!)).toMatchObject({ msg: "forged request refused", reason: "no signature", suppressed: 250, suppressedOverS: 61 });
    // Once quiet, the next one is written with no count.
    t = 200_000;
    sampled.warn("forged request refused", "no signature", { reason: "no signature" });
    expect(JSON.parse(lines[3]!).suppressed).toBeUndefined();
  });
});
