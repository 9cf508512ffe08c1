// Prisma CLI configuration: the JS engine with a driver adapter, so no native engine binary is needed.
import path from "node:path";
import { defineConfig } from "prisma/config";
import { migrationAdapterFactory } from "./src/store/db/adapters.js";

// Pick the adapter from the environment as the operator set it, before the placeholder below.
const env = { ...process.env };
// Prisma 6 insists on a datasource URL and otherwise falls back to downloading native engines.
// With a driver adapter the value is never used, so embedded mode gets a placeholder.
process.env.DATABASE_URL ||= "postgresql://embedded@localhost/crewline";

export default defineConfig({
  experimental: { adapter: true },
  engine: "js",
  schema: path.join("prisma", "schema.prisma"),
  migrations: { path: path.join("prisma", "migrations") },
  adapter: async () => migrationAdapterFactory(env),
});
