// Installations as Bolt hands them to the installation store: a workspace's (with user tokens and an
// incoming webhook, every secret a store must seal) and a Grid org's org-wide one.
import type { Installation } from "@slack/bolt";

/** A workspace's install, with its bot token `token`. */
export const workspace = (teamId: string, token: string, enterpriseId?: string): Installation<"v2", false> => ({
  team: { id: teamId, name: `Team ${teamId}` },
  enterprise: enterpriseId ? { id: enterpriseId, name: "Grid" } : undefined,
  user: { id: "U0INSTALLER", token: `xoxp-user-${teamId}`, refreshToken: `xoxe-user-refresh-${teamId}`, scopes: ["search:read"] },
  bot: { id: "B1", userId: "U0BOT", token, refreshToken: `xoxe-bot-refresh-${teamId}`, expiresAt: 1_900_000_000, scopes: ["chat:write"] },
  incomingWebhook: { url: `https://hooks.slack.com/services/secret-${teamId}`, channel: "#general" },
  appId: "A0APP",
  tokenType: "bot",
  isEnterpriseInstall: false,
  authVersion: "v2",
});

/** A Grid org's org-wide install, with its bot token `token`. */
export const orgWide = (enterpriseId: string, token: string): Installation<"v2", true> => ({
  team: undefined,
  enterprise: { id: enterpriseId, name: "Grid" },
  user: { id: "U0ADMIN", token: undefined, scopes: undefined },
  bot: { id: "B2", userId: "U0BOTE", token, scopes: ["chat:write"] },
  appId: "A0APP",
  tokenType: "bot",
  isEnterpriseInstall: true,
  enterpriseUrl: "https://grid.enterprise.slack.com/",
  authVersion: "v2",
});
