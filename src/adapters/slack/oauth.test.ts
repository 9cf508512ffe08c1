import fs from "node:fs";
import { describe, expect, it } from "vitest";
import YAML from "yaml";
import { BOT_SCOPES, REDIRECT_PATH } from "./oauth.js";

describe("OAuth install settings", () => {
  it("asks for the bot scopes manifest.yml declares, and the manifest names the redirect URL", () => {
    const manifest = YAML.parse(fs.readFileSync(new URL("../../../manifest.yml", import.meta.url), "utf8"));
    expect([...BOT_SCOPES].sort()).toEqual([...manifest.oauth_config.scopes.bot].sort());
    expect(manifest.oauth_config.redirect_urls).toEqual([`https://crewline.example.com${REDIRECT_PATH}`]);
    expect(manifest.settings.event_subscriptions.bot_events).toEqual(expect.arrayContaining(["app_uninstalled", "tokens_revoked", "message.channels", "message.groups"]));
  });
});
