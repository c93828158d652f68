/**
 * Reading a Shoal server's Prometheus /metrics.
 */

/** The sum of the samples of `name` whose labels include every one of `labels` (NaN when there is none). */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = NaN;
  for (const line of text.split("\n")) {
    const m = /^([A-Za-z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (m === null || m[1] !== name) continue;
    const have = m[2] ?? "";
    if (!Object.entries(labels).every(([k, v]) => have.includes(`${k}="${v}"`))) continue;
    total = (Number.isNaN(total) ? 0 : total) + Number(m[3]);
  }
  return total;
}

/** GET <url>/metrics as text. */
export async function scrape(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) });
  if (res.status !== 200) throw new Error(`GET ${url}/metrics answered ${res.status}`);
  return res.text();
}
