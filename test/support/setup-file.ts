// Runs in every test file: the databases a file kept for reuse are closed when it ends (test-database.ts).
// It loads the database code only when a database was kept, so that pure tests never pay for it.
import { afterAll } from "vitest";

afterAll(async () => {
  const kept = (globalThis as { __crewlineIdleDatabases?: unknown[] }).__crewlineIdleDatabases;
  if (!kept?.length) return;
  const { closeIdleDatabases } = await import("./test-database.js");
  await closeIdleDatabases();
});
