import { describe, expect, it } from "vitest";
import {
  EXECUTION_STATES,
  type ExecutionEvent,
  FLOW_REQUEST_STATES,
  type FlowRequestEvent,
  isFinished,
  LIVE_STATES,
  nextExecutionState,
  nextFlowRequestState,
  nextReviewState,
  nextRound,
  REVIEW_STATES,
  type ReviewEvent,
} from "./states.js";

// Every (state, event) pair of each table: what may follow what, and nothing else.
describe("execution transitions", () => {
  const table: Record<ExecutionEvent, Partial<Record<(typeof EXECUTION_STATES)[number], string>>> = {
    kicked_off: { starting: "running" },
    kickoff_failed: { starting: "kickoff_failed" },
    review_opened: { starting: "waiting", running: "waiting", waiting: "waiting" },
    review_decided: { running: "running", waiting: "running" },
    succeeded: { starting: "completed", running: "completed", waiting: "completed" },
    failed: { starting: "failed", running: "failed", waiting: "failed" },
    lost: { running: "lost", waiting: "lost" },
    uninstalled: { starting: "uninstalled", running: "uninstalled", waiting: "uninstalled" },
    stopped: { starting: "stopped", running: "stopped", waiting: "stopped" },
    abandoned: { starting: "abandoned", running: "abandoned", waiting: "abandoned" },
  };
  for (const [event, allowed] of Object.entries(table) as [ExecutionEvent, Record<string, string>][]) {
    it(`${event}: ${Object.keys(allowed).join(", ")} only`, () => {
      for (const state of EXECUTION_STATES) expect(nextExecutionState(state, event)).toBe(allowed[state]);
    });
  }
  it("a finished run never moves again", () => {
    for (const state of EXECUTION_STATES.filter(isFinished)) for (const event of Object.keys(table) as ExecutionEvent[]) expect(nextExecutionState(state, event)).toBeUndefined();
  });
});

describe("review transitions", () => {
  const table: Record<ReviewEvent, Partial<Record<(typeof REVIEW_STATES)[number], string>>> = {
    wait_confirmed: { posted: "pending" },
    claimed: { pending: "deciding" },
    resume_ok_approve: { deciding: "approved" },
    resume_ok_reject: { deciding: "rejected" },
    resume_failed: { deciding: "pending" },
    not_waiting: { deciding: "closed" },
    run_finished: { pending: "closed" },
    run_stopped: { pending: "closed" },
    workspace_removed: { posted: "closed", pending: "closed" },
    superseded: { pending: "closed" },
  };
  for (const [event, allowed] of Object.entries(table) as [ReviewEvent, Record<string, string>][]) {
    it(`${event}: ${Object.keys(allowed).join(", ")} only`, () => {
      for (const state of REVIEW_STATES) expect(nextReviewState(state, event)).toBe(allowed[state]);
    });
  }
});

describe("flow request transitions", () => {
  const table: Record<FlowRequestEvent, Partial<Record<(typeof FLOW_REQUEST_STATES)[number], string>>> = {
    claimed: { pending: "deciding" },
    answered: { deciding: "answered" },
    taken_earlier: { deciding: "answered" },
    refused: { deciding: "closed" },
    not_taken: { deciding: "pending" },
    answer_failed: { deciding: "pending" },
    abandoned: { deciding: "pending" },
    workspace_removed: { pending: "closed" },
  };
  for (const [event, allowed] of Object.entries(table) as [FlowRequestEvent, Record<string, string>][]) {
    it(`${event}: ${Object.keys(allowed).join(", ")} only`, () => {
      for (const state of FLOW_REQUEST_STATES) expect(nextFlowRequestState(state, event)).toBe(allowed[state]);
    });
  }
});

describe("named state sets", () => {
  it("a run is live or finished, never both, and every state is one of them", () => {
    for (const state of EXECUTION_STATES) expect(LIVE_STATES.includes(state)).toBe(!isFinished(state));
  });
});

describe("rounds", () => {
  it("opens round 1, a new round after a rejection or a new output, and nothing for the same output again", () => {
    expect(nextRound(undefined, "h1")).toBe(1);
    expect(nextRound({ round: 1, state: "rejected", outputHash: "h1" }, "h1")).toBe(2);
    expect(nextRound({ round: 1, state: "pending", outputHash: "h1" }, "h1")).toBeUndefined();
    expect(nextRound({ round: 2, state: "approved", outputHash: "h1" }, "h2")).toBe(3);
  });
});
