// One process at a time in an embedded database's data folder. PGlite itself does not stop a second
// process from opening the same folder (both would write to it and corrupt it), so the bot holds a
// lock file there while it runs: `crewline.pid`, holding its process id, like PostgreSQL's own
// postmaster.pid. A lock file whose process is gone (a crash, kill -9) is taken over; one whose
// process is alive stops the start-up with a message naming the folder and the process.
import fs from "node:fs";
import path from "node:path";

export const LOCK_FILE = "crewline.pid";

/** Folders locked by this process (a second open in the same process is refused too). */
const held = new Set<string>();

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

function holderOf(file: string): number | undefined {
  try {
    const pid = Number.parseInt(fs.readFileSync(file, "utf8").split("\n")[0] ?? "", 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Locks `dir` for this process; throws when another live process holds it. Returns the release.
 * The process id recorded may be this process's own after a restart in a fresh container (PID 1
 * again): a lock that names this process but is not held by it is stale, and taken over.
 */
export function lockDataFolder(dir: string): () => void {
  const folder = path.resolve(dir);
  if (held.has(folder)) throw new Error(`DATA_DIR ${folder} is already open in this process`);
  fs.mkdirSync(folder, { recursive: true });
  const file = path.join(folder, LOCK_FILE);
  const mine = `${process.pid}\n`;
  for (let attempt = 0; ; attempt++) {
    try {
      fs.writeFileSync(file, mine, { flag: "wx" });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST" || attempt >= 2) throw err;
      const pid = holderOf(file);
      if (pid !== undefined && pid !== process.pid && alive(pid))
        throw new Error(
          `DATA_DIR ${folder} (the embedded database) is in use by another Crewline process (pid ${pid}); one process at a time may open it. Stop that process, or remove ${file} if it is not a Crewline process.`,
        );
      // Left by a process that is gone: take it over.
      fs.rmSync(file, { force: true });
    }
  }
  held.add(folder);
  return () => {
    held.delete(folder);
    if (holderOf(file) === process.pid) fs.rmSync(file, { force: true });
  };
}
