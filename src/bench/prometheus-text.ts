/**
 * Reading a Shoal server's Prometheus /metrics.
 */

/** The sum of the samples of `name` whose labels include every one of `labels`, each equal to a string or matching a pattern (NaN when there is none). */
export function metricValue(text: string, name: string, labels: Record<string, string | RegExp> = {}): number {
  let total = NaN;
  for (const line of text.split("\n")) {
    const m = /^([A-Za-z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (m === null || m[1] !== name) continue;
    const have = m[2] ?? "";
    if (!Object.entries(labels).every(([k, v]) => (typeof v === "string" ? have.includes(`${k}="${v}"`) : new RegExp(`[{,]${k}="${v.source}"`).test(have)))) continue;
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

/** What a Shoal server's own counters say of its batches and queues, summed over its stages (or one model's). */
export interface StageTotals {
  batches: number;
  items: number;
  queued: number;
  queueSeconds: number;
}

/**
 * The batch and queue totals of a Shoal server's `/metrics` text, whatever its `--namespace`
 * (found from the name of its batch-size histogram); undefined for a server that has none.
 */
export function stageTotals(text: string, model?: string): StageTotals | undefined {
  const namespace = /^(\w+)_stage_batch_size_count[{ ]/m.exec(text)?.[1];
  if (namespace === undefined) return undefined;
  // A model's series are labelled `name/version`.
  const labels: Record<string, string | RegExp> = model === undefined ? {} : { model: new RegExp(`${model.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(/[^"]*)?`) };
  const read = (name: string) => metricValue(text, `${namespace}_${name}`, labels) || 0;
  return { batches: read("stage_batch_size_count"), items: read("stage_batch_size_sum"), queued: read("stage_queue_wait_seconds_count"), queueSeconds: read("stage_queue_wait_seconds_sum") };
}

/** The mean batch size and queue wait (ms) between two readings; NaN where nothing happened. */
export function stageDelta(before: StageTotals, after: StageTotals): { batchSize: number; queueMs: number } {
  return { batchSize: (after.items - before.items) / (after.batches - before.batches), queueMs: ((after.queueSeconds - before.queueSeconds) / (after.queued - before.queued)) * 1000 };
}
