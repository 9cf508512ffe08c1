// `/crew status <kickoff id>`: a run's status for someone who may see it (access.ts); everyone else
// gets what an unknown id gets. A run still going is asked for the crew's own status.

import { isFinished } from "../domain/states.js";
import { isCrewError } from "../protocols/crew/errors.js";
import type { CrewApi, ExecutionStatus } from "../protocols/crew/types.js";
import { type AccessPorts, type Asker, visibleRun } from "./access.js";
import type { Execution } from "./ports.js";

export interface StatusForDeps {
  access: AccessPorts;
  runs: { findByKickoffId(kickoffId: string): Promise<Execution | null> };
  crews: { get(name: string): Pick<CrewApi, "status"> | undefined };
}

export type RunStatus =
  | { kind: "unknown" }
  | {
      kind: "run";
      execution: Execution;
      /** What the crew reports, for a run still going: its status, or why it could not be read. */
      crew?: { status: ExecutionStatus } | { unreadable: string };
    };

export async function statusFor(deps: StatusForDeps, kickoffId: string, asker: Asker): Promise<RunStatus> {
  const execution = await visibleRun(deps.access, () => deps.runs.findByKickoffId(kickoffId), asker);
  if (!execution) return { kind: "unknown" };
  const crew = deps.crews.get(execution.crewName);
  if (!crew || isFinished(execution.state)) return { kind: "run", execution };
  try {
    return { kind: "run", execution, crew: { status: await crew.status(kickoffId) } };
  } catch (err) {
    return { kind: "run", execution, crew: { unreadable: isCrewError(err) ? err.userMessage() : "The crew's status could not be read." } };
  }
}
