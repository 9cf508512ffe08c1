import { describe, expect, it } from "vitest";
import { unprefixed } from "./slack-app.js";

describe("unprefixed (PUBLIC_URL's path taken off our own paths)", () => {
  it("takes the path off what it leads to, whether or not the proxy kept it", () => {
    expect(unprefixed("/crewline/slack/events", "/crewline")).toBe("/slack/events");
    expect(unprefixed("/crewline/hooks/r1/step/s3cret?x=1", "/crewline")).toBe("/hooks/r1/step/s3cret?x=1");
    expect(unprefixed("/crewline/slack/oauth_redirect?code=c&state=s", "/crewline")).toBe("/slack/oauth_redirect?code=c&state=s");
    expect(unprefixed("/slack/events", "/crewline")).toBe("/slack/events");
    expect(unprefixed("/crewline/elsewhere", "/crewline")).toBe("/crewline/elsewhere");
  });
  it("judges by what is left, so a path that is itself one of ours still works both ways", () => {
    expect(unprefixed("/hooks/hooks/r1/step/s3cret", "/hooks")).toBe("/hooks/r1/step/s3cret");
    expect(unprefixed("/hooks/r1/step/s3cret", "/hooks")).toBe("/hooks/r1/step/s3cret");
    expect(unprefixed("/slack/slack/events", "/slack")).toBe("/slack/slack/events".slice("/slack".length));
    expect(unprefixed("/slack/events", "/slack")).toBe("/slack/events");
  });
});
