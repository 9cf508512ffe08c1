// The Slack stand-in lives in src/playground/ (tests, the bench and `npm run playground` share it).
export * from "../../src/playground/slack-standin.js";
