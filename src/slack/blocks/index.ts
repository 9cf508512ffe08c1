export * from "./deadline.js";
export * from "./flow.js";
export * from "./help.js";
export * from "./ids.js";
export * from "./kickoff.js";
export * from "./limits.js";
export * from "./run.js";
export * from "./text.js";
