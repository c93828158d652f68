/**
 * The Grafana dashboard (deploy/grafana/shoal.json): valid, every query names only metrics that
 * a live Shoal exports on /metrics, and it covers what an operator looks at.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { EXAMPLE_MODELS } from "./deploy-helpers.js";
import { Client } from "shoal/client";
import { ROOT, send, type ServerProcess } from "./helpers.js";
import { serveRepository } from "./model-helpers.js";

interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { uid: string };
  targets?: { expr: string }[];
}

const dashboard = JSON.parse(readFileSync(join(ROOT, "deploy", "grafana", "shoal.json"), "utf8")) as {
  uid: string;
  panels: Panel[];
  templating: { list: { name: string; query: string | { query: string } }[] };
};

// PromQL words that are not metric names.
const KEYWORDS = new Set(["by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless", "inf", "nan"]);

/** The metric names a PromQL expression selects. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // label values
    .replace(/\{[^}]*\}/g, "") // label matchers
    .replace(/\[[^\]]*\]/g, "") // ranges
    .replace(/\b(by|without|on|ignoring)\s*\([^)]*\)/g, "") // grouping labels
    .replace(/\$\w+|\$\{\w+\}/g, ""); // dashboard variables
  // Words followed by "(" are functions and aggregations.
  return [...bare.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)].filter((m) => m[2] === undefined && !KEYWORDS.has(m[1]!.toLowerCase())).map((m) => m[1]!);
}

/** The series names a /metrics page exports: sample names, and a histogram's _bucket, _sum and _count. */
function exported(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split("\n")) {
    const type = line.match(/^# TYPE (\S+) (\w+)/);
    if (type !== null) {
      names.add(type[1]!);
      if (type[2] === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) names.add(type[1] + suffix);
    } else if (/^[a-zA-Z_:]/.test(line)) names.add(line.match(/^[a-zA-Z_:][a-zA-Z0-9_:]*/)![0]);
  }
  return names;
}

describe("deploy/grafana/shoal.json", () => {
  let server: ServerProcess;
  let names: Set<string>;

  before(async () => {
    server = await serveRepository(EXAMPLE_MODELS);
    // One inference, so that the histograms have series.
    await new Client(server.url).v2.infer("speech-segments", { inputs: [{ name: "probabilities", data: Float32Array.of(0.1, 0.9) }] });
    names = exported((await send(`${server.url}/metrics`)).text);
  });
  after(async () => {
    await server?.stop();
  });

  test("the metric name reader finds the names in PromQL", () => {
    assert.deepEqual(metricNames('histogram_quantile(0.99, sum by (le, route) (rate(shoal_request_duration_seconds_bucket{job=~"$job", code=~"5.."}[$__rate_interval])))'), ["shoal_request_duration_seconds_bucket"]);
    assert.deepEqual(metricNames('count by (instance) (shoal_stage_live_workers{model!=""} > 0) / up'), ["shoal_stage_live_workers", "up"]);
  });

  test("every query of every panel and variable names only metrics that Shoal exports", () => {
    const queries: [string, string][] = [];
    for (const panel of dashboard.panels) for (const target of panel.targets ?? []) queries.push([panel.title, target.expr]);
    for (const variable of dashboard.templating.list) {
      const query = typeof variable.query === "string" ? variable.query : variable.query.query;
      const selector = query.match(/^label_values\((.*),\s*\w+\)$/);
      if (selector !== null) queries.push([`$${variable.name}`, selector[1]!]);
    }
    assert.ok(queries.length >= 15, `${queries.length} queries`);
    for (const [where, expr] of queries) {
      const used = metricNames(expr);
      assert.ok(used.length > 0, `${where}: no metric in ${expr}`);
      for (const name of used) assert.ok(names.has(name), `${where}: ${name} is not exported by Shoal (${expr})`);
    }
  });

  test("it shows requests by route and status, latency by phase, queues, how far behind, batch sizes, forward time, streams, workers, restarts and models loaded", () => {
    const uses = (metric: string) => dashboard.panels.filter((p) => (p.targets ?? []).some((t) => metricNames(t.expr).includes(metric))).map((p) => p.title);
    for (const metric of [
      "shoal_requests_total",
      "shoal_request_duration_seconds_bucket",
      "shoal_requests_in_flight",
      "shoal_stage_queue_depth",
      "shoal_stage_batch_size_bucket",
      "shoal_stage_forward_duration_seconds_bucket",
      "shoal_stage_live_workers",
      "shoal_stage_worker_restarts_total",
      "shoal_request_queue_seconds_bucket",
      "shoal_request_batch_fill_seconds_bucket",
      "shoal_request_forward_seconds_bucket",
      "shoal_request_batch_size_bucket",
      "shoal_stream_first_chunk_seconds_bucket",
      "shoal_stream_chunk_interval_seconds_bucket",
      "shoal_queue_behind_seconds",
    ]) {
      assert.ok(uses(metric).length > 0, `no panel shows ${metric}`);
    }
    assert.ok(dashboard.panels.some((p) => p.title === "Models loaded"));
    assert.ok(dashboard.panels.some((p) => p.type === "heatmap" && uses("shoal_stage_batch_size_bucket").includes(p.title)), "the batch sizes as a distribution");
    const rate = dashboard.panels.find((p) => p.title === "Request rate by route and status")!;
    assert.match(rate.targets![0]!.expr, /sum by \(route, code\)/);
  });

  test("panels have unique ids and take the dashboard's Prometheus data source", () => {
    const ids = dashboard.panels.map((p) => p.id);
    assert.equal(new Set(ids).size, ids.length);
    for (const panel of dashboard.panels.filter((p) => p.type !== "row")) assert.equal(panel.datasource?.uid, "${datasource}", panel.title);
    assert.equal(dashboard.uid, "shoal-overview");
  });
});
