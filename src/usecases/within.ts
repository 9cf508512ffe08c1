// Work a caller waits on, raced against a deadline (a Slack request is answered within 3 s; a Home is not held by a slow Slack).

/** `work`'s result, or `late()`'s once `ms` have passed first (the work goes on, unheard). */
export async function within<T, L>(work: Promise<T>, ms: number, late: () => L): Promise<T | L> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<L>((resolve) => {
    timer = setTimeout(() => resolve(late()), Math.max(0, ms));
    timer.unref();
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
