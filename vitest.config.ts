import { defineConfig } from "vitest/config";
import { SlowestFirst } from "./test/support/slow-first.js";

// End-to-end files mostly wait on real time rather than compute (timers, child replicas, heartbeats,
// leases, Slack's pacing): five at once, even on two cores. Measured with .ci/run on a fresh clone on
// 2 cores: the e2e pass took 151 s with four forks and 138 s with five, the PostgreSQL pass 146 s and
// 132 s (earlier, with fewer tests: 85 s with four forks against 127 s with two).
const forks = 5;

// Three projects: `npm test` runs them all; `npm run test:unit`, `test:e2e` and `test:browser` one each.
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // End-to-end suites start servers and databases, each in its own fork (`forks` above).
    pool: "forks",
    // The unit project runs in threads that keep their modules (and databases) from one file to the next;
    // vitest reads that choice from here, not from the project. Every fork is kept from start to end
    // (minForks): one ended while idle can take a file just handed to it along ("Terminating worker thread").
    poolOptions: { forks: { maxForks: forks, minForks: forks, isolate: false }, threads: { isolate: false, maxThreads: 2, minThreads: 1 } },
    // The slowest files first (test/support/slow-first.ts): a fresh clone has no durations cached.
    sequence: { sequencer: SlowestFirst },
    // One migrated database template, copied by every test database (test/support/test-database.ts); the
    // embedded one is kept between runs (test/support/global-setup.ts).
    globalSetup: ["test/support/global-setup.ts"],
    // Closes the databases a test file kept for reuse (test/support/test-database.ts).
    setupFiles: ["test/support/setup-file.ts"],
    projects: [
      // Unit tests beside the code: shorter, so a slow one shows (some of them open a database).
      {
        extends: true,
        test: {
          name: "unit",
          include: ["src/**/*.test.ts"],
          testTimeout: 15_000,
          // Pure and store tests share one module graph per worker, and so its databases (test-database.ts).
          pool: "threads",
          isolate: false,
          env: { CREWLINE_TEST_SHARE_DATABASES: "1" },
        },
      },
      // The bot over real boundaries (signed HTTP, the Slack stand-in, the local crew service).
      { extends: true, test: { name: "e2e", include: ["test/**/*.test.ts"], exclude: ["test/browser/**"], isolate: false, env: { CREWLINE_TEST_SHARE_DATABASES: "1" } } },
      // The playground in Debian's Chromium.
      { extends: true, test: { name: "browser", include: ["test/browser/**/*.test.ts"] } },
    ],
  },
});
