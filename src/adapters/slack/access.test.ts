// Which workspace and Grid org a Slack request's asker is of, read from payloads as Slack sends them;
// and people's facts as users.info answers them (the Slack stand-in).
import { WebClient } from "@slack/web-api";
import { describe, expect, it } from "vitest";
import { startFakeSlack } from "../../playground/slack-standin.js";
import { askerWorkspace, ofInstallation, slackPeople } from "./access.js";
import type { TokenWorkspace, Workspace } from "./deps.js";

const installation = { teamId: "T1", enterpriseId: "E1" };

describe("askerWorkspace", () => {
  it("a click or form names the clicker's own team and org (in a Slack Connect channel, not the app's)", () => {
    const own = { type: "block_actions", user: { id: "U1", team_id: "T1" }, team: { id: "T1" }, enterprise: { id: "E1" } };
    expect(askerWorkspace(installation, own)).toEqual({ teamId: "T1", enterpriseId: "E1" });
    const guest = { type: "block_actions", user: { id: "UG", team_id: "TPARTNER" }, team: { id: "TPARTNER" }, enterprise: null };
    expect(askerWorkspace(installation, guest)).toEqual({ teamId: "TPARTNER" });
    const otherOrg = { type: "view_submission", user: { id: "UG", team_id: "TPARTNER" }, team: { id: "TPARTNER" }, enterprise: { id: "E2" } };
    expect(askerWorkspace(installation, otherOrg)).toEqual({ teamId: "TPARTNER", enterpriseId: "E2" });
  });

  it("in an Enterprise Grid org, a user's team_id may be the org's: taken as their org, the team from the payload's team", () => {
    const gridUser = { type: "block_actions", user: { id: "U2", team_id: "E1" }, team: { id: "T2", enterprise_id: "E1" }, enterprise: null };
    expect(askerWorkspace(installation, gridUser)).toEqual({ teamId: "T2", enterpriseId: "E1" });
    expect(askerWorkspace({}, { ...gridUser, user: { id: "U2", team_id: "T2" } })).toEqual({ teamId: "T2", enterpriseId: "E1" });
  });

  it("a command names its user's team and org", () => {
    expect(askerWorkspace(installation, { command: "/crew", team_id: "TPARTNER", user_id: "UG" })).toEqual({ teamId: "TPARTNER" });
    expect(askerWorkspace({}, { command: "/crew", team_id: "T2", enterprise_id: "E1" })).toEqual({ teamId: "T2", enterpriseId: "E1" });
  });

  it("a message names its author's team; the envelope's org is the installation's, taken only for its own team", () => {
    const envelope = { type: "event_callback", team_id: "T1", enterprise_id: "E1" };
    expect(askerWorkspace(installation, { ...envelope, event: { type: "message", user: "UG", user_team: "TPARTNER" } })).toEqual({ teamId: "TPARTNER" });
    expect(askerWorkspace(installation, { ...envelope, event: { type: "message", user: "UG", team: "TPARTNER" } })).toEqual({ teamId: "TPARTNER" });
    expect(askerWorkspace(installation, { ...envelope, event: { type: "message", user: "U1", user_team: "T1" } })).toEqual({ teamId: "T1", enterpriseId: "E1" });
    // In a channel no other organisation shares, the author of another workspace is of the envelope's org (Grid).
    const orgOnly = { ...envelope, is_ext_shared_channel: false, event: { type: "message", user: "U2", user_team: "T2" } };
    expect(askerWorkspace(installation, orgOnly)).toEqual({ teamId: "T2", enterpriseId: "E1" });
    expect(askerWorkspace(installation, { ...orgOnly, is_ext_shared_channel: true })).toEqual({ teamId: "T2" });
  });

  it("without such parts (or with ones of the wrong shape), the installation's", () => {
    expect(askerWorkspace(installation, {})).toEqual(installation);
    expect(askerWorkspace(installation, { user: "U1", team: 5, event: "x" })).toEqual(installation);
    expect(askerWorkspace({}, undefined)).toEqual({});
  });
});

describe("ofInstallation", () => {
  const guest = { command: "/crew", team_id: "TPARTNER", user_id: "UG" };
  const token = (known: Workspace | undefined): TokenWorkspace => ({ known: () => known, within: async () => known });
  it("with one bot token: the asker is of the token's workspace or Grid org", async () => {
    const installation = token({ teamId: "T1", enterpriseId: "E1" });
    // The context names the asker's own team with one bot token: it does not stand for the installation.
    expect(await ofInstallation({ installation }, { teamId: "TPARTNER" }, guest)).toBe(false);
    expect(await ofInstallation({ installation }, { teamId: "T1" }, { command: "/crew", team_id: "T1" })).toBe(true);
    expect(await ofInstallation({ installation }, { teamId: "T2" }, { command: "/crew", team_id: "T2", enterprise_id: "E1" })).toBe(true);
    // Not known yet: not taken from the context either.
    expect(await ofInstallation({ installation: token(undefined) }, { teamId: "TPARTNER" }, guest)).toBeUndefined();
  });

  it("with OAuth: the installation the request was authorized with", async () => {
    expect(await ofInstallation({}, { teamId: "T1" }, guest)).toBe(false);
    expect(await ofInstallation({}, { teamId: "TPARTNER" }, guest)).toBe(true);
  });
});

describe("slackPeople", () => {
  it("reads users.info: a bot, a deactivated account, a guest's own team, a Grid org (also when team_id is the org's); throws when Slack says no", async () => {
    const slack = await startFakeSlack({ validateBlocks: false, teamId: "T1" });
    try {
      slack.setUser("UGONE", { deleted: true });
      slack.setUser("UAPP", { is_bot: true });
      slack.setUser("UGUEST", { team_id: "TPARTNER" });
      slack.setUser("UGRID", { team_id: "T2", enterprise_user: { enterprise_id: "E1", teams: ["T2"] } });
      slack.setUser("UORG", { team_id: "E1" });
      const people = slackPeople(new WebClient("xoxb-standin", { slackApiUrl: slack.url, retryConfig: { retries: 0 } }));
      expect(await people.about("U0ANNA")).toEqual({ isBot: false, deleted: false, teamId: "T1" });
      expect(await people.about(slack.botUserId)).toMatchObject({ isBot: true });
      expect(await people.about("UAPP")).toMatchObject({ isBot: true });
      expect(await people.about("UGONE")).toMatchObject({ deleted: true });
      expect(await people.about("UGUEST")).toEqual({ isBot: false, deleted: false, teamId: "TPARTNER" });
      expect(await people.about("UGRID")).toEqual({ isBot: false, deleted: false, teamId: "T2", enterpriseId: "E1" });
      expect(await people.about("UORG")).toEqual({ isBot: false, deleted: false, teamId: "E1", enterpriseId: "E1" });
      slack.failNext("users.info", "user_not_found");
      await expect(people.about("U0ANNA")).rejects.toThrow(/user_not_found/);
    } finally {
      await slack.close();
    }
  });
});
