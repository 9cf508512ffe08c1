import { PGlite } from "@electric-sql/pglite";
const db = await PGlite.create();
await db.exec("create table t (id serial primary key, body text, j jsonb)");
await db.exec("create table e (id serial primary key, body text)");
await db.exec("alter table e alter column body set storage external");
const s = "**a ".repeat(2 * 1024 * 1024 / 4);
const lines = Array.from({ length: 20000 }, (_, i) => `line ${i} omega ${Math.random()}`).join("\n");
for (const [name, text] of [["stars", s], ["lines", lines]] as const) {
  for (const table of ["t", "e"]) {
    const t0 = performance.now();
    await db.query(`insert into ${table} (body) values ($1)`, [text]);
    const t1 = performance.now();
    await db.query(`select body from ${table} order by id desc limit 1`);
    console.log(name, table, "insert", Math.round(t1 - t0), "select", Math.round(performance.now() - t1));
  }
}
const t0 = performance.now();
await db.query(`insert into t (j) values ($1)`, [JSON.stringify({ output: s })]);
console.log("jsonb insert", Math.round(performance.now() - t0));
