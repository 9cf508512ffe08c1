#!/usr/bin/env node
// `npm run db:migration -- <name>`: writes prisma/migrations/<timestamp>_<name>/migration.sql from the
// difference between the schema as last committed and the edited one. `prisma migrate dev` needs a
// shadow database, which the engine-free setup cannot provide (see docs/spec/prisma-notes.md).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const name = (process.argv[2] ?? "").replace(/[^a-z0-9_]+/gi, "_").toLowerCase();
if (!name) {
  console.error("usage: npm run db:migration -- <name>");
  process.exit(2);
}
const previous = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "schema-")), "schema.prisma");
fs.writeFileSync(previous, execFileSync("git", ["show", "HEAD:prisma/schema.prisma"]));
const sql = execFileSync("npx", ["prisma", "migrate", "diff", "--from-schema-datamodel", previous, "--to-schema-datamodel", "prisma/schema.prisma", "--script"], {
  encoding: "utf8",
});
if (!/CREATE|ALTER|DROP/i.test(sql)) {
  console.log("The schema has not changed since the last commit: no migration written.");
  process.exit(0);
}
const stamp = new Date().toISOString().replace(/\D/g, "").slice(0, 14);
const dir = path.join("prisma", "migrations", `${stamp}_${name}`);
fs.mkdirSync(dir, { recursive: true });
fs.writeFileSync(path.join(dir, "migration.sql"), sql);
console.log(`Wrote ${dir}/migration.sql`);
