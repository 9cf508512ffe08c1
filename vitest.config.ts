import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // One migrated database template per run, copied by every test database (test/support/test-database.ts).
    globalSetup: ["test/support/global-setup.ts"],
    // End-to-end suites start servers and databases; two cores do best with few workers.
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
});
