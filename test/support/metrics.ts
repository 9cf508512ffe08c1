// GET /metrics as a test reads it: the Prometheus text format parsed into samples.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Scrape {
  status: number;
  contentType: string | null;
  text: string;
  samples: Sample[];
  /** The value of one sample (labels must match exactly); undefined when absent. */
  value(name: string, labels?: Record<string, string>): number | undefined;
  /** The sum over samples of a name whose labels include the given ones (0 when none). */
  sum(name: string, labels?: Record<string, string>): number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = LINE.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(LABEL)) labels[l[1]!] = l[2]!.replace(/\\n/g, "\n").replace(/\\"/g, '"').replace(/\\\\/g, "\\");
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

const sameLabels = (a: Record<string, string>, b: Record<string, string>) => Object.keys(a).length === Object.keys(b).length && Object.entries(b).every(([k, v]) => a[k] === v);

export async function scrape(baseUrl: string, token?: string): Promise<Scrape> {
  const res = await fetch(`${baseUrl}/metrics`, token === undefined ? {} : { headers: { authorization: token } });
  const text = await res.text();
  const samples = res.status === 200 ? parseExposition(text) : [];
  return {
    status: res.status,
    contentType: res.headers.get("content-type"),
    text,
    samples,
    value: (name, labels = {}) => samples.find((s) => s.name === name && sameLabels(s.labels, labels))?.value,
    sum: (name, labels = {}) => samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((total, s) => total + s.value, 0),
  };
}
