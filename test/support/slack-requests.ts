// Signed Slack requests live in src/playground/ (the playground sends them too).
export * from "../../src/playground/slack-requests.js";
