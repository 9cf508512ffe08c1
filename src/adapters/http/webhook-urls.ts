// The URLs a crew is given for its callbacks to this bot (POST /hooks/<execution>/<kind>/<secret>).
import type { Execution, WebhookUrls } from "../../usecases/ports.js";

/** The events Crewline reads from a crew's event stream (progress, task outputs, the end of the run). */
export const STREAM_EVENTS = [
  "crew_kickoff_started",
  "crew_kickoff_completed",
  "crew_kickoff_failed",
  "task_started",
  "task_completed",
  "task_failed",
  "agent_execution_started",
  "tool_usage_started",
  "tool_usage_finished",
  "tool_usage_error",
  "llm_call_started",
  "llm_call_completed",
];

export function webhookUrlBuilder(publicUrl: string | undefined, eventStream: (crewName: string) => boolean = () => false) {
  return (execution: Execution): WebhookUrls | undefined => {
    if (!publicUrl || !execution.webhooks) return undefined;
    const base = `${publicUrl}/hooks/${execution.id}`;
    return {
      stepWebhookUrl: `${base}/step/${execution.webhookSecret}`,
      taskWebhookUrl: `${base}/task/${execution.webhookSecret}`,
      crewWebhookUrl: `${base}/crew/${execution.webhookSecret}`,
      ...(execution.humanInputToken
        ? { humanInputWebhook: { url: `${base}/input/${execution.webhookSecret}`, authentication: { strategy: "bearer" as const, token: execution.humanInputToken } } }
        : {}),
      ...(execution.humanInputToken && eventStream(execution.crewName)
        ? {
            webhooks: {
              events: [...STREAM_EVENTS],
              url: `${base}/events/${execution.webhookSecret}`,
              realtime: false,
              authentication: { strategy: "bearer" as const, token: execution.humanInputToken },
            },
          }
        : {}),
    };
  };
}
