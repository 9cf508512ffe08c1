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
