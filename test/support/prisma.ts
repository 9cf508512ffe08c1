// Prisma's model API for tests, on a database the bot opened: tests read and seed rows the way Prisma's
// generated types describe them. The bot itself queries through Kysely only (src/store/sql.ts).

import { PrismaClient } from "../../src/generated/prisma/client.js";
import type { Database } from "../../src/store/db/database.js";

const clients = new WeakMap<Database, PrismaClient>();

/** The Prisma client on `database`'s connection (one per database). */
export function prismaOf(database: Database): PrismaClient {
  let client = clients.get(database);
  if (!client) {
    client = new PrismaClient({ adapter: database.prismaAdapter() });
    clients.set(database, client);
  }
  return client;
}
