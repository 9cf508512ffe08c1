// A flow's feedback request as a decision request (the core's port, core.ts): table FlowRequest,
// audited under the request with its method, shown by flow.show, its notices replies under its message.
import type { FlowConfig } from "../../config/config.js";
import type { FlowRequestRow } from "../../store/flow-requests.js";
import type { FlowNotice } from "../ports.js";
import { type DecisionTarget, hashOutput } from "./core.js";

export function flowRequestTarget(flowOf: (name: string) => FlowConfig | undefined): DecisionTarget<FlowRequestRow> {
  const notice = (r: FlowRequestRow, notice: FlowNotice, part: string | number) => ({ kind: "flow.reminder", subjectId: r.id, part, payload: { notice } }) as const;
  return {
    table: "FlowRequest",
    audited: (r) => ({ executionId: null, flowRequestId: r.id, taskKey: r.methodName, outputHash: hashOutput(r.output), ref: { flow: r.flowName, requestId: r.requestId } }),
    show: (r) => ({ kind: "flow.show", subjectId: r.id }),
    edited: (r) => ({ kind: "flow.edited", subjectId: r.id }),
    notice,
    reminder: (r, count, facts) => notice(r, { kind: "reminder", ...facts }, count),
    deadlineNotice: (r, facts) => notice(r, { kind: "deadline_passed", ...facts }, `deadline:${r.decideBy?.getTime() ?? 0}`),
    escalateTo: (r) => flowOf(r.flowName)?.escalateTo,
  };
}
