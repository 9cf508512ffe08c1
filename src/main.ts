// Process entry: `npm start`. Reads the environment once, then runs until SIGINT/SIGTERM.
import { createCrewline } from "./app.js";
import { ConfigError, loadConfig } from "./config/config.js";
import { createLogger, type Logger } from "./log/log.js";

// At info until the configuration is read: LOG_LEVEL is checked with the other settings.
let log: Logger = createLogger("info");

async function main(): Promise<void> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  log = createLogger(config.logLevel);
  // Without its database the bot can only refuse work: exit, so that the supervisor (systemd, Docker, Kubernetes) starts it again.
  const crewline = createCrewline(config, { log, onFatal: () => process.exit(1) });
  const shutdown = async (signal: string) => {
    log.info("shutting down", { signal });
    await crewline.stop().catch((err) => log.error("shutdown failed", { err }));
    process.exit(0);
  };
  process.once("SIGINT", () => void shutdown("SIGINT"));
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  await crewline.start();
}

// Last line of defence: bad input must never end the process. Logged once, without a stack trace.
process.on("unhandledRejection", (err) => log.error("unhandled rejection", { err }));
process.on("uncaughtException", (err) => log.error("uncaught exception", { err }));

main().catch((err) => {
  log.error("crewline failed to start", { err });
  process.exit(1);
});
