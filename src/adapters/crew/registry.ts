// The configured crews by name, each with its own HTTP client.
import type { CrewConfig } from "../../config/config.js";
import type { CrewApi } from "../../protocols/crew/types.js";
import type { CrewDirectory } from "../../usecases/ports.js";
import { CrewClient } from "./client.js";

export class CrewRegistry implements CrewDirectory {
  private readonly clients = new Map<string, { config: CrewConfig; client: CrewApi & { close?: () => Promise<void> } }>();

  /** `observe` wraps each client (the app counts and times its calls there). */
  constructor(crews: CrewConfig[], makeClient: (crew: CrewConfig) => CrewApi = defaultClient, observe?: (crew: CrewConfig, client: CrewApi) => CrewApi) {
    for (const config of crews) {
      const client = (makeClient ?? defaultClient)(config);
      this.clients.set(config.name.toLowerCase(), { config, client: observe ? observe(config, client) : client });
    }
  }

  get(name: string): CrewApi | undefined {
    return this.clients.get(name.toLowerCase())?.client;
  }

  config(name: string): CrewConfig | undefined {
    return this.clients.get(name.toLowerCase())?.config;
  }

  /** Crews that may be started in a channel (no allow-list: everywhere), of those the workspace may use. */
  availableIn(channelId: string, teamId?: string): CrewConfig[] {
    return this.usableBy(teamId).filter((crew) => !crew.channels || crew.channels.includes(channelId));
  }

  /** Crews a workspace may use (`teams:` in CREWS_FILE; none listed: every workspace). No team given: all. */
  usableBy(teamId: string | undefined): CrewConfig[] {
    return this.all().filter((crew) => !crew.teams || teamId === undefined || crew.teams.includes(teamId));
  }

  all(): CrewConfig[] {
    return [...this.clients.values()].map((entry) => entry.config);
  }

  async close(): Promise<void> {
    await Promise.all([...this.clients.values()].map((entry) => entry.client.close?.()));
  }
}

function defaultClient(crew: CrewConfig): CrewApi {
  return new CrewClient({ name: crew.name, baseUrl: crew.baseUrl, token: crew.token, userToken: crew.userToken });
}
