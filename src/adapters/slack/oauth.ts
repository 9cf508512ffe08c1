// Distribution (OAuth) set-up for Bolt's built-in installer: GET /slack/install renders the "Add to
// Slack" page (with the state cookie), GET /slack/oauth_redirect exchanges the code (oauth.v2.access)
// and stores the installation (src/adapters/slack/installations.ts).
import type { HTTPReceiverOptions } from "@slack/bolt";
import type { WebClientOptions } from "@slack/web-api";
import type { OAuthConfig } from "../../config/config.js";
import type { DbInstallationStore } from "./installations.js";

/** The bot scopes the install asks for; the same list as manifest.yml (a test keeps them equal). */
export const BOT_SCOPES = [
  "commands",
  "chat:write",
  "channels:read",
  "groups:read",
  "im:read",
  "mpim:read",
  "im:write",
  "mpim:write",
  "channels:join",
  // Replies in a review's thread decide it (message.channels / message.groups events).
  "channels:history",
  "groups:history",
  "files:write",
  "usergroups:read",
  "users:read",
  "users:read.email",
];

export const INSTALL_PATH = "/slack/install";
export const REDIRECT_PATH = "/slack/oauth_redirect";

/**
 * Where the "Add to Slack" link sends the browser: Slack's authorize page on the host that serves the
 * Web API (SLACK_API_URL `https://slack-gov.com/api/` for GovSlack: `https://slack-gov.com/oauth/v2/authorize`).
 * Undefined (Bolt's default, slack.com) for the default API, or one not served at `/api/` over https.
 */
export function authorizeUrlFor(apiUrl: string | undefined): string | undefined {
  if (!apiUrl) return undefined;
  const url = new URL(apiUrl);
  return url.protocol === "https:" && /^\/api\/?$/.test(url.pathname) ? `${url.origin}/oauth/v2/authorize` : undefined;
}

/** The receiver options that turn the installer on. */
export function installerReceiverOptions(
  oauth: OAuthConfig,
  installationStore: DbInstallationStore,
  clientOptions: WebClientOptions,
  publicUrl: string | undefined,
): Pick<HTTPReceiverOptions, "clientId" | "clientSecret" | "stateSecret" | "scopes" | "installationStore" | "installerOptions" | "redirectUri"> {
  const authorizationUrl = authorizeUrlFor(clientOptions.slackApiUrl);
  return {
    clientId: oauth.clientId,
    clientSecret: oauth.clientSecret,
    stateSecret: oauth.stateSecret,
    scopes: BOT_SCOPES,
    installationStore,
    // With PUBLIC_URL the redirect URL is sent explicitly (it must match the app's settings);
    // without it, Slack uses the one configured there.
    ...(publicUrl ? { redirectUri: `${publicUrl}${REDIRECT_PATH}` } : {}),
    installerOptions: {
      installPath: INSTALL_PATH,
      ...(authorizationUrl ? { authorizationUrl } : {}),
      redirectUriPath: REDIRECT_PATH,
      // oauth.v2.access and auth.test go to the same Web API (SLACK_API_URL) and are counted.
      clientOptions,
      stateVerification: true,
    },
  };
}
