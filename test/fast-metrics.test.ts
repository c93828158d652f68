/**
 * The metric series of their own (src/metrics/fast-metrics.ts) are exposed exactly as
 * prom-client's own counters and histograms are, in the same registry.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Counter, Histogram, Registry } from "prom-client";
import { FastCounter, FastHistogram } from "../src/metrics/fast-metrics.js";

const BOUNDS = [0.001, 0.01, 0.1, 1];

describe("fast metric series", () => {
  test("a histogram and a counter read the same as prom-client's, label for label and bucket for bucket", async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const fast = new FastHistogram("t_seconds", "a time", ["route", "protocol"], BOUNDS, ours);
    const slow = new Histogram({ name: "t_seconds", help: "a time", labelNames: ["route", "protocol"], buckets: BOUNDS, registers: [theirs] });
    const fastCount = new FastCounter("t_total", "a count", ["route", "code"], ours);
    const slowCount = new Counter({ name: "t_total", help: "a count", labelNames: ["route", "code"], registers: [theirs] });
    const values = [0.0005, 0.001, 0.002, 0.05, 0.5, 1, 3, 0.01];
    for (const v of values) {
      fast.series({ route: "/a", protocol: "http" }).observe(v);
      slow.observe({ route: "/a", protocol: "http" }, v);
    }
    fast.series({ route: "/b", protocol: "grpc" }).observe(0.2);
    slow.observe({ route: "/b", protocol: "grpc" }, 0.2);
    fastCount.series({ route: "/a", code: "200" }).inc();
    fastCount.series({ route: "/a", code: "200" }).inc(2);
    slowCount.inc({ route: "/a", code: "200" }, 3);
    assert.equal(await ours.metrics(), await theirs.metrics());
  });

  test("a series is found once: the same labels give the same object, a label left out is left out", async () => {
    const registry = new Registry();
    const h = new FastHistogram("w_seconds", "a wait", ["stage", "model"], BOUNDS, registry);
    assert.equal(h.series({ stage: "s" }), h.series({ stage: "s" }));
    assert.notEqual(h.series({ stage: "s" }), h.series({ model: "s" }));
    h.series({ model: "m" }).observe(0.5);
    const text = await registry.metrics();
    assert.match(text, /^w_seconds_bucket\{le="1",model="m"\} 1$/m);
    assert.match(text, /^w_seconds_count\{stage="s"\} 0$/m);
    assert.doesNotMatch(text, /model="",/);
  });
});
