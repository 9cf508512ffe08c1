// `/crew audit <id>`: a run's (or a flow feedback request's) audit trail, for someone who may see it
// (access.ts); everyone else gets what an unknown id gets. The Slack adapter shows it and uploads the
// export (adapters/slack/review/audit-export.ts).

import { type AccessPorts, type Asker, maySeeFlowRequest, visibleRun } from "./access.js";
import type { AuditRecord } from "./audit.js";
import type { Execution, FlowRequest } from "./ports.js";

export interface AuditForDeps {
  access: AccessPorts;
  runs: { findByKickoffId(kickoffId: string): Promise<Execution | null> };
  audit: { forExecution(executionId: string): Promise<AuditRecord[]>; forFlowRequest(flowRequestId: string): Promise<AuditRecord[]> };
  /** Flow feedback requests, if flows are configured. */
  flows?: { findByRequestId(requestId: string): Promise<FlowRequest | null> };
}

export type AuditTrail = { kind: "unknown" } | { kind: "run"; execution: Execution; rows: AuditRecord[] } | { kind: "flow"; request: FlowRequest; rows: AuditRecord[] };

export async function auditFor(deps: AuditForDeps, id: string, asker: Asker): Promise<AuditTrail> {
  if (deps.flows && !(await deps.runs.findByKickoffId(id))) {
    const request = await deps.flows.findByRequestId(id);
    if (request) {
      // Like runs: whoever may not see it gets the answer an unknown id gets.
      if (!(await maySeeFlowRequest(deps.access, request, asker))) return { kind: "unknown" };
      return { kind: "flow", request, rows: await deps.audit.forFlowRequest(request.id) };
    }
  }
  const execution = await visibleRun(deps.access, () => deps.runs.findByKickoffId(id), asker);
  if (!execution) return { kind: "unknown" };
  return { kind: "run", execution, rows: await deps.audit.forExecution(execution.id) };
}
