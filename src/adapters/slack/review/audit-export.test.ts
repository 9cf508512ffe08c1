import { describe, expect, it } from "vitest";
import type { AuditRecord } from "../../../usecases/audit.js";
import { auditLine } from "./audit-export.js";

const row = (over: Partial<AuditRecord>): AuditRecord => ({
  id: "a",
  executionId: "e",
  flowRequestId: null,
  kind: "decision",
  taskKey: "research_task",
  round: 1,
  actor: "U1",
  decision: "reject",
  feedback: null,
  outputHash: null,
  msToDecision: 1_800_000,
  resumeStatus: null,
  resumeMessage: null,
  detail: { outcome: "decided" },
  createdAt: new Date("2026-11-23T12:00:00Z"),
  ...over,
});

describe("auditLine for deadlines, escalation and reassignment", () => {
  it("says a decision was taken by the deadline, not by a user", () => {
    const line = auditLine(row({ actor: "crewline:deadline", detail: { outcome: "decided", byDeadline: true }, feedback: "No decision within 30 minutes" }));
    expect(line).toContain("the deadline rejected *research_task* round 1 after 30 min");
    expect(line).not.toContain("<@crewline");
  });

  it("lists reminders at the deadline, escalations and reassignments", () => {
    expect(auditLine(row({ kind: "deadline", detail: { action: "remind" } }))).toContain("deadline passed on *research_task* round 1: reminder posted");
    expect(auditLine(row({ kind: "escalation", detail: { escalatedTo: ["U0BOSS", "S0LEADS", "<!channel>"] } }))).toContain(
      "escalated to <@U0BOSS>, <!subteam^S0LEADS> after its last reminder",
    );
    expect(auditLine(row({ kind: "reassignment", actor: "U0BOB", feedback: "on leave", detail: { reassignedTo: "U0DAN" } }))).toContain(
      "<@U0BOB> reassigned *research_task* round 1 to <@U0DAN>: “on leave”",
    );
  });
});

describe("auditLine for a flow answer's delivery", () => {
  const flow = (detail: Record<string, unknown>, resumeMessage: string | null = null) =>
    auditLine(row({ kind: "flow_decision", executionId: null, flowRequestId: "f", taskKey: null, round: null, decision: "approved", resumeMessage, detail }));
  it("tells an answer refused for itself, one that may have reached the flow, and one the flow had taken from one that did", () => {
    expect(flow({ outcome: "failed", notTaken: true }, "413 feedback too long")).toContain("the flow did not take this answer (413 feedback too long); the request opened again");
    expect(flow({ outcome: "failed", maybeTaken: true })).toContain("may have reached the flow (no answer came)");
    expect(flow({ outcome: "answered", takenEarlier: true })).toContain("the flow had taken it, though its delivery was not confirmed");
    expect(flow({ outcome: "failed" })).toContain("did not reach the flow");
  });
});
