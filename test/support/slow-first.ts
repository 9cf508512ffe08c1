// Test files in an order that ends a run sooner: the slowest first, so that no long file starts last
// while the other forks sit idle. Vitest orders by the durations it cached from an earlier run, which
// a fresh clone (CI) does not have; it then starts the largest files first, and the slowest files are
// not the largest (they wait on real time: Slack's tiers, leases, restarts). These are the slowest
// files as measured (`--reporter=json`), slowest first: the unit project's two that start PGlite
// databases of their own; in the PostgreSQL pass, the replica files and recovery's kill -9 cases
// (skipped on the embedded database); then the end-to-end pass's. The rest keep vitest's own order
// after them.
import { BaseSequencer, type TestSpecification } from "vitest/node";

const SLOWEST = [
  "src/store/db/pglite-convert.test.ts",
  "src/store/db/pglite-thread.test.ts",
  "test/e2e/replicas.test.ts",
  "test/e2e/recovery.test.ts",
  "test/e2e/flow-replicas.test.ts",
  "test/e2e/slack-budget.test.ts",
  "test/e2e/deadlines.test.ts",
  "test/e2e/stop.test.ts",
  "test/e2e/decisions.test.ts",
  "test/e2e/reply-decisions.test.ts",
  // The slowest of the end-to-end pass, but not in its first wave: it bounds how stale a step may be
  // shown (10 s), and the first wave shares the machine with every fork's start and recovery's kill -9s.
  "test/e2e/plan-waits.test.ts",
  "test/e2e/review-loop.test.ts",
  "test/e2e/startup.test.ts",
  "test/e2e/oauth.test.ts",
  "test/e2e/live-plan.test.ts",
  "test/e2e/outbox.test.ts",
  "test/e2e/identical-rounds.test.ts",
  "test/db/migrate.test.ts",
  "test/e2e/real-deployments.test.ts",
  "test/e2e/hostile-slack.test.ts",
];

export class SlowestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (file: TestSpecification) => {
      const at = SLOWEST.findIndex((name) => file.moduleId.endsWith(`/${name}`));
      return at < 0 ? SLOWEST.length : at;
    };
    const ordered = await super.sort(files);
    return ordered
      .map((file, i) => ({ file, i }))
      .sort((a, b) => rank(a.file) - rank(b.file) || a.i - b.i)
      .map(({ file }) => file);
  }
}
