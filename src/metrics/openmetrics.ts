/**
 * The OpenMetrics exposition of a registry, for a scraper that asks for it (`Accept:
 * application/openmetrics-text`): the form that carries exemplars, so that a panel can go from a
 * histogram's bucket to the trace of a request in it.
 */
import { Registry, type MetricValueWithName } from "prom-client";

/** What prom-client's registry reads of a metric. */
interface Readable {
  name: string;
  help: string;
  type: string;
  aggregator: string;
  get(): Promise<{ name: string; values: MetricValueWithName<string>[] }> | { name: string; values: MetricValueWithName<string>[] };
}

/** The content type of the OpenMetrics text. */
export const OPENMETRICS_CONTENT_TYPE = Registry.OPENMETRICS_CONTENT_TYPE;

/** Whether a scrape's `Accept` header asks for OpenMetrics (Prometheus's does when exemplars or OpenMetrics are on). */
export function wantsOpenMetrics(accept: string | undefined): boolean {
  return accept !== undefined && accept.includes("application/openmetrics-text");
}

/**
 * The OpenMetrics text of `registry`'s metrics. prom-client renames each counter it renders as
 * OpenMetrics (`x_total` to `x`, on the metric itself), which would change every later Prometheus
 * scrape; so each metric is rendered through a stand-in of its own, made for this scrape.
 */
export async function openMetricsText(registry: Registry): Promise<string> {
  const open = new Registry<typeof OPENMETRICS_CONTENT_TYPE>();
  open.setContentType(OPENMETRICS_CONTENT_TYPE);
  for (const metric of registry.getMetricsAsArray() as unknown as Readable[]) {
    const name = metric.type === "counter" ? metric.name.replace(/_total$/, "") : metric.name;
    const standIn: Readable = { name, help: metric.help, type: metric.type, aggregator: metric.aggregator, get: async () => ({ ...(await metric.get()), name }) };
    open.registerMetric(standIn as never);
  }
  return open.metrics();
}
