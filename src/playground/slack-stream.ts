// The stand-in's message streaming (chat.startStream → chat.appendStream → chat.stopStream): the
// chunks it accepts, checked like Slack checks them, and the streamed message they build: a plan
// title, task cards by id (a later task_update of the same id changes its card), and markdown text.

export type TaskCardStatus = "pending" | "in_progress" | "complete" | "error";

export interface FakeTaskCard {
  id: string;
  title: string;
  status: TaskCardStatus;
  details?: string;
  output?: string;
  /** Every status the card went through, in order (tests read the card's story). */
  history: TaskCardStatus[];
}

export interface FakeStream {
  state: "streaming" | "stopped";
  recipientUserId?: string;
  recipientTeamId?: string;
  displayMode?: string;
  title?: string;
  tasks: FakeTaskCard[];
  /** markdown_text chunks, concatenated. */
  text: string;
  /** Calls that built it: 1 start, n appends, 1 stop. */
  appends: number;
}

const STATUSES = new Set<string>(["pending", "in_progress", "complete", "error"]);
const MARKDOWN_MAX = 12_000;
const CHUNKS_MAX = 100;

/** Slack's error code when the chunks are not what it accepts, else undefined. */
export function chunksProblem(chunks: unknown, markdownText: unknown): string | undefined {
  if (chunks === undefined) return typeof markdownText === "string" && markdownText ? undefined : "invalid_arguments";
  if (!Array.isArray(chunks) || chunks.length === 0 || chunks.length > CHUNKS_MAX) return "invalid_chunks";
  for (const c of chunks) {
    if (!c || typeof c !== "object") return "invalid_chunks";
    const chunk = c as Record<string, unknown>;
    switch (chunk.type) {
      case "markdown_text":
        if (typeof chunk.text !== "string" || chunk.text.length > MARKDOWN_MAX) return "invalid_chunks";
        break;
      case "plan_update":
        if (typeof chunk.title !== "string" || !chunk.title) return "invalid_chunks";
        break;
      case "task_update":
        if (typeof chunk.id !== "string" || !chunk.id || typeof chunk.title !== "string" || !STATUSES.has(String(chunk.status))) return "invalid_chunks";
        if ((chunk.details !== undefined && typeof chunk.details !== "string") || (chunk.output !== undefined && typeof chunk.output !== "string")) return "invalid_chunks";
        break;
      case "blocks":
        if (!Array.isArray(chunk.blocks) || chunk.blocks.length > 50) return "invalid_chunks";
        break;
      default:
        return "invalid_chunks";
    }
  }
  return undefined;
}

/** Applies checked chunks (and markdown_text) to the stream. */
export function applyChunks(stream: FakeStream, chunks: unknown, markdownText: unknown): void {
  if (typeof markdownText === "string") stream.text += markdownText;
  if (!Array.isArray(chunks)) return;
  for (const chunk of chunks as Record<string, any>[]) {
    if (chunk.type === "markdown_text") stream.text += String(chunk.text);
    else if (chunk.type === "plan_update") stream.title = String(chunk.title);
    else if (chunk.type === "task_update") {
      const status = chunk.status as TaskCardStatus;
      const card = stream.tasks.find((t) => t.id === chunk.id);
      const fields = {
        title: String(chunk.title),
        status,
        ...(chunk.details !== undefined ? { details: String(chunk.details) } : {}),
        ...(chunk.output !== undefined ? { output: String(chunk.output) } : {}),
      };
      if (card) {
        Object.assign(card, fields);
        if (card.history[card.history.length - 1] !== status) card.history.push(status);
      } else stream.tasks.push({ id: String(chunk.id), ...fields, history: [status] });
    }
  }
}

/** The streamed message's text as Slack keeps it for clients that show no task cards. */
export function streamText(stream: FakeStream): string {
  const lines = [stream.title ?? "", ...stream.tasks.map((t) => `${t.status}: ${t.title}`), stream.text].filter(Boolean);
  return lines.join("\n").slice(0, 40_000);
}
