// Load generator, run in a worker thread so that the client does not share the event loop with the
// server under test. Plain JavaScript on purpose: no loader is needed inside the worker.
//   workerData: { origin, requests: [{ path, body, headers? }], concurrency, mode: "closed" | "paced", ratePerSec }
//   closed: `concurrency` loops, each sends its next request when the previous answer is read.
//   paced:  request i is due at start + i / ratePerSec (open loop); latency counts from the due time,
//           so a stalled server is not hidden by the client waiting for it (no coordinated omission).
import { parentPort, workerData } from "node:worker_threads";
import { Pool } from "undici";

const { origin, requests, concurrency, mode, ratePerSec } = workerData;
const pool = new Pool(origin, { connections: concurrency, pipelining: 1, keepAliveTimeout: 30_000 });
const latencies = new Float64Array(requests.length);
const statuses = {};
let errors = 0;

async function send(i, from) {
  const r = requests[i];
  try {
    const res = await pool.request({ method: "POST", path: r.path, headers: { "content-type": "application/json", ...r.headers }, body: r.body });
    await res.body.dump();
    statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
  } catch (err) {
    errors++;
    statuses[err?.code ?? "error"] = (statuses[err?.code ?? "error"] ?? 0) + 1;
  }
  latencies[i] = performance.now() - from;
}

const start = performance.now();
if (mode === "paced") {
  const gap = 1000 / ratePerSec;
  const inflight = [];
  for (let i = 0; i < requests.length; i++) {
    const due = start + i * gap;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    inflight.push(send(i, due));
  }
  await Promise.all(inflight);
} else {
  let next = 0;
  const loop = async () => {
    for (;;) {
      const i = next++;
      if (i >= requests.length) return;
      await send(i, performance.now());
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
}
const elapsedMs = performance.now() - start;
await pool.close();
parentPort.postMessage({ latencies, statuses, errors, elapsedMs }, [latencies.buffer]);
