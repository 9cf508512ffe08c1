// Answers from outside (a crew, a flow) are read up to a limit: a service answering an endless or a
// 10 MiB body must not fill the bot's memory or hold its event loop.

/** Most bytes read of an answer from a crew or a flow; past this the answer is refused. */
export const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

/**
 * The body as UTF-8 text, or undefined once it goes past `limit` bytes (reading stops there and the
 * stream is cancelled). Takes Node streams (undici) and web streams (fetch) alike.
 */
export async function readBoundedText(body: AsyncIterable<Uint8Array> | null | undefined, limit = MAX_ANSWER_BYTES): Promise<string | undefined> {
  if (!body) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  // Leaving the loop early (return) closes the stream: no more is read.
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size > limit) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}
