// The callback fast path must route exactly the URLs Bolt's router would route to CALLBACK_PATH,
// with the same parameters (path-to-regexp is what Bolt uses for custom routes).
import { match } from "path-to-regexp";
import { describe, expect, it } from "vitest";
import { CALLBACK_PATH, matchCallbackUrl } from "./routes.js";

const bolt = (url: string) => {
  const { pathname } = new URL(url, "http://localhost");
  const m = match(CALLBACK_PATH, { decode: decodeURIComponent })(pathname);
  return m ? m.params : undefined;
};

describe("callback URL matching", () => {
  it.each([
    "/hooks/1b4e28ba-2fa1-11d2-883f-0016d3cca427/step/AbC-_09xyz",
    "/hooks/1b4e28ba-2fa1-11d2-883f-0016d3cca427/crew/AbC-_09xyz?attempt=2",
    "/hooks/1b4e28ba-2fa1-11d2-883f-0016d3cca427/task/a%2Db",
    "/hooks/x/y/z/",
  ])("routes %s with the parameters Bolt's router gives", (url) => {
    expect(matchCallbackUrl(url)).toEqual({ ...bolt(url) });
  });

  it.each(["/hooks/a/b", "/hooks/a/b/c/d", "/slack/events", "/hooks//step/s", "/healthz", "/hooks/a/b/%E0%A4%A"])("leaves %s to the router", (url) => {
    expect(matchCallbackUrl(url)).toBeUndefined();
  });
});
