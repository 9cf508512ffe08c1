// Domain shapes of the crew execution service, after tolerant parsing.
// The raw wire variants are described in docs/spec/crew-api-field-notes.md;
// everything past the crew client sees only these.

export interface CrewInput {
  name: string;
  description?: string;
  type?: string;
  required: boolean;
}

export type ExecutionPhase = "running" | "paused" | "succeeded" | "failed";

export interface ExecutionStatus {
  /** Raw state text as the service sent it (e.g. "RUNNING", "completed"). */
  rawState: string;
  phase: ExecutionPhase;
  /** The state says the run was stopped or cancelled (phase "failed"): a stop from Slack may be on its way to being recorded. */
  cancelled?: true;
  /** Final output (or output so far) as text; JSON outputs are pretty-printed. */
  output?: string;
  /** Output of the last executed task, when reported. */
  lastTask?: { output?: string; agent?: string; name?: string; taskId?: string; wholeName?: string };
  error?: string;
  progress?: { completed?: number; total?: number; currentAgent?: string; current?: string };
}

/** The human-input webhook setting: where the crew asks for a decision, and the token it presents. */
export interface HumanInputWebhook {
  url: string;
  authentication: { strategy: "bearer"; token: string };
}

/** The event-stream setting (opt-in per crew): batches of events POSTed to `url` with the authentication. */
export interface EventStreamWebhook {
  events: string[];
  url: string;
  realtime: boolean;
  authentication: { strategy: "bearer"; token: string };
}

/** Every webhook setting of an execution: sent on kickoff and again on every resume (none is carried over). */
export interface WebhookSettings {
  taskWebhookUrl?: string;
  stepWebhookUrl?: string;
  crewWebhookUrl?: string;
  humanInputWebhook?: HumanInputWebhook;
  webhooks?: EventStreamWebhook;
}

export interface KickoffRequest extends WebhookSettings {
  inputs: Record<string, string>;
  meta?: Record<string, string>;
}

export interface ResumeRequest extends WebhookSettings {
  executionId: string;
  taskId: string;
  humanFeedback: string;
  isApprove: boolean;
}

export interface ResumeResult {
  status?: "resumed" | "retrying" | "completed";
  message?: string;
}

/** Parsed webhook bodies (see field notes, "Webhook payloads"). */
export interface StepEvent {
  kind: "step";
  runId?: string;
  thought?: string;
  tool?: string;
  toolInput?: string;
  result?: string;
  /** One-line summary for the progress message. */
  summary: string;
  /** The task that started (an event stream's task_started names it): the live plan's card title. */
  task?: string;
}

export interface TaskEvent {
  kind: "task";
  runId?: string;
  /** task_id, taskId or id; else the task name. */
  taskKey: string;
  /** The task id when the payload names one (the seed interface's task webhook does). */
  taskId?: string;
  name?: string;
  /** The whole name when `name` is cut and no task id was given (parse.ts wholeName). */
  wholeName?: string;
  description?: string;
  agent?: string;
  output: string;
}

export interface CrewCompletionEvent {
  kind: "crew";
  runId?: string;
  output: string;
  /** Set when the payload reports a failure (error field / failed state). */
  error?: string;
}

/** A human-input request: the crew paused on a task and waits for a decision (field notes). */
export interface HumanInputEvent {
  kind: "input";
  runId?: string;
  /** task_id / taskId / id when given: the id /resume wants. */
  taskId?: string;
  name?: string;
  /** The whole name when `name` is cut and no task id was given (parse.ts wholeName). */
  wholeName?: string;
  agent?: string;
  output: string;
}

export type CrewEvent = StepEvent | TaskEvent | CrewCompletionEvent | HumanInputEvent;

/**
 * What POST /stop/{kickoff_id} answered (field notes): any 2xx, stopped; 404 or 405, a deployment
 * without /stop; 409, or a 400, the run had already ended. Other failures are thrown (CrewError).
 */
export type StopResult = { outcome: "stopped" } | { outcome: "not_supported"; status: number } | { outcome: "ended"; message?: string };

export interface CrewApi {
  listInputs(): Promise<CrewInput[]>;
  kickoff(req: KickoffRequest): Promise<{ kickoffId: string }>;
  status(kickoffId: string): Promise<ExecutionStatus>;
  resume(req: ResumeRequest): Promise<ResumeResult>;
  /** Asks the crew to stop a run; a client without it cannot stop runs (answered as not_supported). */
  stop?(kickoffId: string): Promise<StopResult>;
}
