/**
 * The live dashboard (`--dashboard`) in headless Chromium (Debian's `chromium`) against a server
 * under load: once the page has polled, every figure it marks as a series of /metrics agrees
 * with /metrics read just before and just after it (a counter between the two, the workers
 * alike); it is served from the package alone, and absent without the flag. Over a model
 * repository, after loads, an eviction and an unload through the repository API, it shows each
 * model version's state, replicas, memory, loads and evictions as /metrics has them.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { fixture, post, sample, send, startServer, type ServerProcess } from "./helpers.js";
import { found } from "./deploy-helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";

const run = promisify(execFile);

/** The page's DOM once it has run for a while: Chromium's --dump-dom, its timers on virtual time. */
async function dump(url: string): Promise<string> {
  const { stdout } = await run("chromium", ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=2500", "--dump-dom", url], { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 });
  return stdout;
}

/** The figures the page marks with the series they show (each a sum of its matching samples). */
function figures(dom: string, kind = "metric"): { metric: string; labels: Record<string, string>; text: string }[] {
  const unescape = (s: string) => s.replace(/&quot;/g, '"').replace(/&amp;/g, "&");
  return [...dom.matchAll(new RegExp(`<(?:td|span)([^>]*data-${kind}="[^"]+"[^>]*)>([^<]*)<`, "g"))].map((m) => {
    const attr = (name: string) => unescape(m[1]!.match(new RegExp(` data-${name}="([^"]*)"`))![1]!);
    return { metric: attr(kind), labels: JSON.parse(attr("labels")) as Record<string, string>, text: m[2]! };
  });
}

/** The sum of a scrape's samples of `name` with these labels (a value such as `2xx` matches its class). */
function total(text: string, name: string, labels: Record<string, string>): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/);
    if (m === null || m[1] !== name) continue;
    const own = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, l[2]!]));
    const fits = Object.entries(labels).every(([k, v]) => (/^\dxx$/.test(v) ? (own[k] ?? "").startsWith(v[0]!) : (own[k] ?? "") === v));
    if (fits) sum += Number(m[3]);
  }
  return sum;
}

describe("the live dashboard", { skip: (await found("chromium")) ? undefined : "no chromium (apt-get install chromium)" }, () => {
  let server: ServerProcess;
  let load: Promise<void>;
  let loading = true;

  before(async () => {
    server = await startServer(fixture("observability.ts"), { args: ["--dashboard"] });
    // Load: batches of eight, slow batches, streams and quick answers, until the test ends.
    load = (async () => {
      while (loading) {
        await Promise.all([
          ...Array.from({ length: 8 }, () => post(`${server.url}/eight`, {})),
          post(`${server.url}/slow`, {}),
          post(`${server.url}/now`, {}),
          send(`${server.url}/ticks`, { method: "POST", body: "{}", headers: { "content-type": "application/json", accept: "application/x-ndjson" } }),
        ]);
      }
    })();
    await post(`${server.url}/now`, {});
  });

  after(async () => {
    loading = false;
    await load;
    await server?.stop();
  });

  test("its figures match /metrics at the same moment", async () => {
    const before = (await send(`${server.url}/metrics`)).text;
    const dom = await dump(`${server.url}/dashboard`);
    const after = (await send(`${server.url}/metrics`)).text;
    assert.match(dom, /updated [^<]+</, "the page polled");
    const shown = figures(dom);
    const names = new Set(shown.map((f) => f.metric));
    for (const name of ["shoal_requests_total", "shoal_stage_queue_depth", "shoal_stage_running", "shoal_stage_live_workers", "shoal_stage_batch_size_count", "shoal_stage_worker_restarts_total", "shoal_streams_active", "shoal_requests_in_flight"]) {
      assert.ok(names.has(name), `the page shows ${name}`);
    }
    for (const route of ["/eight", "/slow", "/now", "/ticks"]) assert.ok(shown.some((f) => f.labels.route === route), `a row for ${route}`);
    let counters = 0;
    for (const { metric, labels, text } of shown) {
      // A size is shown with its unit.
      const value = Number(text.replace(/ (B|KiB|MiB)$/, ""));
      assert.ok(Number.isFinite(value) && value >= 0, `${metric} ${JSON.stringify(labels)}: ${text}`);
      const [low, high] = [total(before, metric, labels), total(after, metric, labels)];
      if (metric.endsWith("_total") || metric.endsWith("_count")) {
        assert.ok(low <= value && value <= high, `${metric} ${JSON.stringify(labels)}: the page shows ${value}, /metrics ${low} before and ${high} after`);
        counters++;
      } else if (metric.endsWith("_live_workers")) {
        assert.ok(value === low && value === high, `${metric} ${JSON.stringify(labels)}: ${value}, /metrics ${low} and ${high}`);
      }
    }
    assert.ok(counters >= 12, `${counters} counters compared`);
    // Under load: the batches of eight were counted on the page.
    const eights = shown.find((f) => f.metric === "shoal_stage_batch_size_count" && f.labels.stage === "Eight_4")!;
    assert.ok(Number(eights.text) > 0);
  });

  test("it is served from the package: no asset from elsewhere, its data the same series as /metrics", async () => {
    const page = await send(`${server.url}/dashboard`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-type")!, /^text\/html/);
    assert.doesNotMatch(page.text, /(src|href)="(https?:)?\/\//, "no CDN");
    for (const asset of ["dashboard/dashboard.css", "dashboard/dashboard.js"]) assert.equal((await send(`${server.url}/${asset}`)).status, 200, asset);
    const data = (await send(`${server.url}/dashboard/metrics.json`)).json as { namespace: string; metrics: { name: string }[] };
    assert.equal(data.namespace, "shoal");
    assert.ok(data.metrics.some((m) => m.name === "shoal_request_queue_seconds"));
    assert.equal(sample((await send(`${server.url}/metrics`)).text, "shoal_stage_live_workers", { stage: "Eight_4" }), 1);
  });
});

describe("the live dashboard over a model repository", { skip: (await found("chromium")) ? undefined : "no chromium (apt-get install chromium)" }, () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  const X = { inputs: [{ name: "x", datatype: "FP32", shape: [2], data: [1, 2] }] };

  before(async () => {
    // The budget holds a (two replicas of 500 bytes) or b (1000 bytes), not both.
    repo.module("a", "scale.ts", { memoryBytes: 500, replicas: 2, parameters: { factor: 2 } });
    repo.module("b", "scale.ts", { memoryBytes: 1000, parameters: { factor: 3 } });
    server = await serveRepository(repo.dir, ["--workers", "2", "--model-memory-bytes", "1000", "--model-control", "explicit", "--dashboard"]);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("it shows each model version's state, replicas, memory, loads and evictions as /metrics does", async () => {
    const url = server.url;
    const ok = async (path: string, body: unknown) => {
      const reply = await post(`${url}${path}`, body);
      assert.equal(reply.status, 200, `${path}: ${reply.text}`);
    };
    // Whichever fitted at start: b unloaded and a served, then b loaded, which evicts a.
    await ok("/v2/repository/models/b/unload", "");
    await ok("/v2/models/a/infer", X);
    await ok("/v2/repository/models/b/load", "");

    const before = (await send(`${url}/metrics`)).text;
    const dom = await dump(`${url}/dashboard`);
    const after = (await send(`${url}/metrics`)).text;
    assert.match(dom, /updated [^<]+</, "the page polled");
    // The state each version shows is the one /metrics gives 1, before and after.
    const states = figures(dom, "series");
    const stateOf = (model: string) => states.find((f) => f.labels.model === model)?.text;
    for (const { metric, labels, text } of states) {
      for (const scrape of [before, after]) assert.equal(total(scrape, metric, { ...labels, state: text }), 1, `${labels.model}: the page shows ${text}`);
    }
    assert.equal(stateOf("a"), "evicted");
    assert.equal(stateOf("b"), "ready");
    assert.match(dom, /class="reason">evicted to make room; loads again on its next request</, "a says why it is not ready");
    // Every figure of the section equals /metrics (nothing moved meanwhile: no request was made).
    const shown = figures(dom).filter((f) => f.metric.startsWith("shoal_model_"));
    const figure = (metric: string, labels: Record<string, string>) => shown.find((f) => f.metric === metric && JSON.stringify(f.labels) === JSON.stringify(labels))?.text;
    for (const { metric, labels, text } of shown) {
      const value = Number(text.replace(/ B$/, ""));
      for (const scrape of [before, after]) assert.equal(value, total(scrape, metric, labels), `${metric} ${JSON.stringify(labels)}: the page shows ${text}`);
    }
    const a = { model: "a", version: "" };
    const b = { model: "b", version: "" };
    assert.equal(figure("shoal_model_replicas", a), "0");
    assert.equal(figure("shoal_model_replicas", b), "1");
    assert.equal(figure("shoal_model_memory_bytes", a), "0 B");
    assert.equal(figure("shoal_model_memory_bytes", b), "1000 B");
    assert.equal(figure("shoal_model_pool_memory_bytes", { pool: "models" }), "1000 B");
    assert.equal(figure("shoal_model_pool_memory_budget_bytes", { pool: "models" }), "1000 B");
    // a served a request, then was evicted for b, which loaded through the API.
    assert.ok(Number(figure("shoal_model_loads_total", a)) >= 1, `a's loads: ${figure("shoal_model_loads_total", a)}`);
    assert.ok(Number(figure("shoal_model_evictions_total", a)) >= 1, `a's evictions: ${figure("shoal_model_evictions_total", a)}`);
    assert.ok(Number(figure("shoal_model_loads_total", b)) >= 1);
    assert.match(dom, /Node\.js #[12]</, "b's worker");
  });
});
