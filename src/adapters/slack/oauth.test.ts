import fs from "node:fs";
import { describe, expect, it } from "vitest";
import YAML from "yaml";
import type { DbInstallationStore } from "./installations.js";
import { authorizeUrlFor, BOT_SCOPES, installerReceiverOptions, REDIRECT_PATH } from "./oauth.js";

describe("OAuth install settings", () => {
  it("asks for the bot scopes manifest.yml declares, and the manifest names the redirect URL", () => {
    const manifest = YAML.parse(fs.readFileSync(new URL("../../../manifest.yml", import.meta.url), "utf8"));
    expect([...BOT_SCOPES].sort()).toEqual([...manifest.oauth_config.scopes.bot].sort());
    expect(manifest.oauth_config.redirect_urls).toEqual([`https://crewline.example.com${REDIRECT_PATH}`]);
    expect(manifest.settings.event_subscriptions.bot_events).toEqual(expect.arrayContaining(["app_uninstalled", "tokens_revoked", "message.channels", "message.groups"]));
  });
});

describe("the Add to Slack link", () => {
  const oauth = { clientId: "1111.2222", clientSecret: "secret", stateSecret: "state" };
  const linkWith = (slackApiUrl?: string) =>
    installerReceiverOptions(oauth, {} as DbInstallationStore, slackApiUrl ? { slackApiUrl } : {}, undefined).installerOptions?.authorizationUrl;

  it("sends the browser to the authorize page of the Slack that serves the Web API (GovSlack), and to Bolt's default otherwise", () => {
    expect(linkWith("https://slack-gov.com/api/")).toBe("https://slack-gov.com/oauth/v2/authorize");
    expect(authorizeUrlFor("https://slack-gov.com/api")).toBe("https://slack-gov.com/oauth/v2/authorize");
    expect(linkWith()).toBeUndefined();
    // A stand-in or a proxy that is not a Slack host at /api/ over https: Slack's own page.
    expect(linkWith("http://127.0.0.1:4000/api/")).toBeUndefined();
    expect(linkWith("https://proxy.example.com/slack/api/")).toBeUndefined();
  });
});
