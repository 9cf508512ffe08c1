// A callback URL is bound to one run; a body that names another run (kickoff_id, execution_id,
// executionId) is refused. A body that names no run is fine.
import type { Execution } from "./ports.js";

const RUN_ID_FIELDS = ["kickoff_id", "kickoffId", "execution_id", "executionId"] as const;

/** The run ids a callback body names (strings or numbers, trimmed). */
export function namedRunIds(body: unknown): string[] {
  if (!body || typeof body !== "object" || Array.isArray(body)) return [];
  const b = body as Record<string, unknown>;
  const ids: string[] = [];
  for (const field of RUN_ID_FIELDS) {
    if (!Object.hasOwn(b, field)) continue;
    const v = b[field];
    if ((typeof v === "string" && v.trim() !== "") || typeof v === "number") ids.push(String(v).trim());
  }
  return ids;
}

/**
 * Whether the body names only this run (its kickoff id or our own execution id). While the kickoff id
 * is not stored yet (a fast crew calls back before its kickoff answer is recorded) nothing can be
 * compared, so the body is taken.
 */
export function namesOwnRun(execution: Pick<Execution, "id" | "kickoffId">, body: unknown): boolean {
  const ids = namedRunIds(body);
  if (ids.length === 0 || !execution.kickoffId) return true;
  return ids.every((id) => id === execution.kickoffId || id === execution.id);
}
