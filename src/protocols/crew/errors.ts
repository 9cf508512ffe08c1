import { readableError } from "../../text/readable-error.js";
import { truncatePlain } from "../../text/truncate.js";
export type CrewErrorKind = "bad_request" | "unauthorized" | "not_found" | "missing_inputs" | "server" | "timeout" | "unreachable" | "invalid_response";

/** "webhook" is for payloads the crew POSTs to us (see parseWebhook). */
export type CrewOperation = "inputs" | "kickoff" | "status" | "resume" | "stop" | "webhook";

export interface InvalidInput {
  name: string;
  message: string;
}

export interface CrewErrorInit {
  kind: CrewErrorKind;
  crewName: string;
  operation: CrewOperation;
  status?: number;
  missingInputs?: string[];
  /** Inputs the crew refused, each with its words (a FastAPI 422's items that do not say "missing"). */
  invalidInputs?: InvalidInput[];
  serviceMessage?: string;
  retryAfterSeconds?: number;
  /** A POST may have reached the crew and taken effect despite the error (read time-out, reset). */
  maybeApplied?: boolean;
  /** Technical detail for logs only (never shown to users). */
  detail?: string;
  cause?: unknown;
}

const SERVICE_MESSAGE_MAX = 300;

export class CrewError extends Error {
  readonly kind: CrewErrorKind;
  readonly crewName: string;
  readonly operation: CrewOperation;
  readonly status?: number;
  readonly missingInputs?: string[];
  readonly invalidInputs?: InvalidInput[];
  readonly serviceMessage?: string;
  readonly retryAfterSeconds?: number;
  readonly maybeApplied?: boolean;
  /** Technical detail for logs only (never shown to users). */
  readonly detail?: string;

  constructor(init: CrewErrorInit) {
    super(technicalMessage(init), init.cause === undefined ? undefined : { cause: init.cause });
    this.name = "CrewError";
    this.kind = init.kind;
    this.crewName = init.crewName;
    this.operation = init.operation;
    this.status = init.status;
    this.missingInputs = init.missingInputs;
    this.invalidInputs = init.invalidInputs?.map((i) => ({ name: i.name, message: clip(readableError(i.message)) }));
    // Quoted to people (userMessage): a traceback's frames never are.
    this.serviceMessage = init.serviceMessage === undefined ? undefined : clip(readableError(init.serviceMessage));
    this.retryAfterSeconds = init.retryAfterSeconds;
    this.maybeApplied = init.maybeApplied;
    this.detail = init.detail;
  }

  /** Plain sentences for a Slack user: what failed and what to check. No URLs, tokens or stacks. */
  userMessage(): string {
    const crew = this.crewName ? `The crew “${this.crewName}”` : "The crew";
    const code = this.status === undefined ? "" : ` (${this.status})`;
    const doing = GERUND[this.operation];
    switch (this.kind) {
      case "unauthorized":
        return `${crew} rejected Crewline's token${code}. Ask whoever set up Crewline to check CREW_TOKEN / the crews file.`;
      case "unreachable":
        return `Couldn't reach ${lower(crew)} while ${doing}. Check that it is deployed and CREW_BASE_URL is right.${this.maybeAppliedNote()}`;
      case "server": {
        // The crew's own words (a KeyError, a quota) say more than "it may be starting up".
        const advice = this.serviceMessage ? ` Try again ${this.retryHint()}.` : ` It may be starting up; try again ${this.retryHint()}.`;
        return `${crew} had a server error${code} while ${doing}${this.quoted()}.${this.maybeAppliedNote() || advice}`;
      }
      case "timeout":
        return `${crew} didn't answer in time while ${doing}.${this.maybeAppliedNote() || " Try again in a minute."}`;
      case "missing_inputs":
        // Refused values are named only in the crew's message (a list of missing names alone would hide them).
        return this.missingInputs?.length && !this.invalidInputs?.length
          ? `${crew} needs inputs that were not given: ${this.missingInputs.join(", ")}. Fill them in and try again.`
          : `${crew} says required inputs are missing or invalid${code}${this.quoted()}. Check the inputs and try again.`;
      case "bad_request":
        return this.serviceMessage
          ? `${crew} refused the request while ${doing}${code}: “${this.serviceMessage}”`
          : `${crew} refused the request as invalid while ${doing}${code}. Check the inputs and try again.`;
      case "not_found":
        return this.operation === "status" || this.operation === "resume"
          ? `${crew} has no record of that run${code}; it may have expired or never started.`
          : `${crew} answered “not found”${code} while ${doing}. Check that CREW_BASE_URL points at the crew itself.`;
      case "invalid_response":
        if (this.operation === "webhook") return `${crew} sent a notification Crewline couldn't read.`;
        // A 2xx whose body could not be read: the crew (or whatever answers for it) took the request.
        if (this.maybeApplied) return `${crew} answered${code} while ${doing}, but Crewline couldn't read the answer.${this.maybeAppliedNote()}`;
        return `${crew} sent an answer Crewline couldn't read while ${doing}. It may run a different version of the service; ask whoever set up Crewline to check the deployment.`;
    }
  }

  private retryHint(): string {
    const s = this.retryAfterSeconds;
    return s !== undefined && s > 0 && s <= 600 ? `in ${s} seconds` : "in a minute";
  }

  private maybeAppliedNote(): string {
    return this.maybeApplied ? " It may have gone through anyway, so check the thread before trying again." : "";
  }

  private quoted(): string {
    return this.serviceMessage ? `: “${this.serviceMessage}”` : "";
  }
}

export function isCrewError(e: unknown): e is CrewError {
  return e instanceof CrewError;
}

const GERUND: Record<CrewOperation, string> = {
  inputs: "listing its inputs",
  kickoff: "starting a run",
  status: "checking a run",
  resume: "sending your review",
  stop: "stopping a run",
  webhook: "reporting progress",
};

function technicalMessage(init: CrewErrorInit): string {
  const code = init.status === undefined ? "" : ` ${init.status}`;
  const text = init.serviceMessage ?? init.detail;
  const detail = text ? `: ${clip(text)}` : "";
  return `crew "${init.crewName}" ${init.operation}: ${init.kind}${code}${detail}`;
}

const clip = (text: string) => truncatePlain(text, SERVICE_MESSAGE_MAX);

function lower(s: string): string {
  return s.charAt(0).toLowerCase() + s.slice(1);
}
