export * from "./ids.js";
export * from "./text.js";
export * from "./limits.js";
export * from "./kickoff.js";
export * from "./run.js";
export * from "./help.js";
export * from "./flow.js";
