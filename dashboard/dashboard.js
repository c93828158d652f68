// The live dashboard: polls dashboard/metrics.json (the same series as /metrics) every second
// and shows them. Rates come from the difference between two polls; quantiles from the
// histograms' buckets as Prometheus's histogram_quantile reads them, over the server's lifetime.
"use strict";

const POLL_MS = 1000;
const root = document.documentElement;
const theme = new URLSearchParams(location.search).get("theme");
if (theme === "dark" || theme === "light") root.dataset.theme = theme;
document.getElementById("theme").addEventListener("click", () => {
  const dark = root.dataset.theme === "dark" || (root.dataset.theme === undefined && matchMedia("(prefers-color-scheme: dark)").matches);
  root.dataset.theme = dark ? "light" : "dark";
});

let previous; // { at, totals } of the last poll
const history = [];

/** The series of one metric, by name: [{ labels, value, metricName }]. */
function index(metrics) {
  const byName = new Map();
  for (const metric of metrics) {
    for (const value of metric.values) {
      const name = value.metricName ?? metric.name;
      if (!byName.has(name)) byName.set(name, []);
      byName.get(name).push(value);
    }
  }
  return byName;
}

const matches = (labels, want) => Object.entries(want).every(([k, v]) => (labels[k] ?? "") === v);
const sum = (series, want = {}) => (series ?? []).filter((s) => matches(s.labels, want)).reduce((n, s) => n + s.value, 0);

/** A quantile of a histogram's series matching `want`, as histogram_quantile computes it. */
function quantile(byName, name, q, want) {
  const buckets = new Map();
  for (const s of byName.get(`${name}_bucket`) ?? []) {
    if (!matches(s.labels, want)) continue;
    const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    buckets.set(le, (buckets.get(le) ?? 0) + s.value);
  }
  const bounds = [...buckets.keys()].sort((a, b) => a - b);
  const total = buckets.get(Infinity) ?? 0;
  if (total === 0) return undefined;
  const rank = q * total;
  let below = 0;
  let lower = 0;
  for (const le of bounds) {
    const count = buckets.get(le);
    if (count >= rank) {
      if (le === Infinity) return lower;
      return lower + ((le - lower) * (rank - below)) / Math.max(count - below, 1e-12);
    }
    below = count;
    lower = le;
  }
  return lower;
}

const labelSets = (series, keys) => {
  const seen = new Map();
  for (const s of series ?? []) {
    const key = keys.map((k) => s.labels[k] ?? "").join("\u0000");
    if (!seen.has(key)) seen.set(key, Object.fromEntries(keys.map((k) => [k, s.labels[k] ?? ""])));
  }
  return [...seen.values()];
};

function seconds(s) {
  if (s === undefined || Number.isNaN(s)) return "–";
  if (s < 0.001) return `${(s * 1e6).toFixed(0)} µs`;
  if (s < 1) return `${(s * 1000).toFixed(s < 0.01 ? 2 : 1)} ms`;
  return `${s.toFixed(2)} s`;
}
const count = (n) => (n === undefined ? "–" : n >= 1e6 ? `${(n / 1e6).toFixed(2)} M` : n >= 1e4 ? `${(n / 1e3).toFixed(1)} k` : String(Math.round(n * 100) / 100));
const bytes = (n) => (n >= 1073741824 ? `${(n / 1073741824).toFixed(2)} GiB` : n >= 1048576 ? `${(n / 1048576).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`);

/** A cell showing one figure of /metrics; the data attributes say which (a test reads them). */
function cell(text, metric, labels, stat, cls = "n") {
  const td = document.createElement("td");
  td.className = cls;
  td.textContent = text;
  if (metric !== undefined) {
    td.dataset.metric = metric;
    td.dataset.labels = JSON.stringify(labels);
    td.dataset.stat = stat;
  }
  return td;
}

function fill(tbody, rows, columns) {
  tbody.replaceChildren();
  if (rows.length === 0) {
    const tr = tbody.insertRow();
    const td = cell("none yet", undefined, undefined, undefined, "empty");
    td.colSpan = columns;
    tr.append(td);
  }
  for (const row of rows) tbody.append(row);
}

function render(data) {
  const ns = data.namespace;
  const m = (name) => `${ns}_${name}`;
  const byName = index(data.metrics);
  const now = performance.now();
  const requests = byName.get(m("requests_total"));
  const total = sum(requests);
  const errors = sum((requests ?? []).filter((s) => s.labels.code.startsWith("5")));
  const perRoute = new Map(labelSets(requests, ["route", "protocol"]).map((l) => [`${l.route} ${l.protocol}`, sum(requests, l)]));
  let rate;
  let errorRate;
  const routeRate = new Map();
  if (previous !== undefined) {
    const dt = (now - previous.at) / 1000;
    rate = (total - previous.total) / dt;
    errorRate = (errors - previous.errors) / dt;
    for (const [key, n] of perRoute) routeRate.set(key, (n - (previous.perRoute.get(key) ?? 0)) / dt);
  }
  previous = { at: now, total, errors, perRoute };
  if (rate !== undefined) history.push(rate);
  if (history.length > 60) history.shift();

  document.getElementById("rate").textContent = rate === undefined ? "–" : count(rate);
  const err = document.getElementById("errors");
  err.textContent = errorRate === undefined ? "–" : count(errorRate);
  err.className = `value${errorRate > 0 ? " bad" : ""}`;
  const peak = Math.max(1, ...history);
  document.querySelector("#spark polyline").setAttribute("points", history.map((r, i) => `${(i * 120) / 59},${28 - (r / peak) * 26}`).join(" "));
  for (const el of document.querySelectorAll("header [data-metric]")) {
    const name = m(el.dataset.metric.replace(/^shoal_/, ""));
    el.dataset.metric = name;
    el.dataset.labels = "{}";
    const v = sum(byName.get(name));
    el.textContent = el.dataset.format === "bytes" ? bytes(v) : count(v);
  }
  const behind = byName.get(m("queue_behind_seconds")) ?? [];
  const worst = Math.max(0, ...behind.map((s) => s.value));
  const behindEl = document.getElementById("behind");
  behindEl.textContent = seconds(worst);
  behindEl.className = `value${worst > 1 ? " bad" : worst > 0.1 ? " warn" : ""}`;

  // Routes: answers by status, and latency by phase.
  const routeRows = labelSets(requests, ["route", "protocol"]).sort((a, b) => a.route.localeCompare(b.route)).map((l) => {
    const tr = document.createElement("tr");
    const byClass = (c) => sum((requests ?? []).filter((s) => matches(s.labels, l) && s.labels.code.startsWith(c)));
    const q = (name, p) => quantile(byName, m(name), p, l);
    const pair = (name) => `${seconds(q(name, 0.5))} / ${seconds(q(name, 0.99))}`;
    const mean = (name) => {
      const n = sum(byName.get(m(`${name}_count`)), l);
      return n === 0 ? 0 : sum(byName.get(m(`${name}_sum`)), l) / n;
    };
    const e2e = mean("request_duration_seconds");
    const queue = mean("request_queue_seconds");
    const fillWait = mean("request_batch_fill_seconds");
    const forward = mean("request_forward_seconds");
    const bar = document.createElement("div");
    bar.className = "phases";
    bar.title = `queue ${seconds(queue - fillWait)}, batch fill ${seconds(fillWait)}, forward ${seconds(forward)}, the rest ${seconds(Math.max(0, e2e - queue - forward))}`;
    for (const [cls, v] of [["q", queue - fillWait], ["f", fillWait], ["w", forward], ["r", Math.max(0, e2e - queue - forward)]]) {
      const span = document.createElement("span");
      span.className = cls;
      span.style.width = `${e2e > 0 ? (100 * Math.max(0, v)) / e2e : 0}%`;
      bar.append(span);
    }
    const phases = cell("", undefined, undefined, undefined, "");
    phases.append(bar);
    const batches = sum(byName.get(m("request_batch_size_count")), l);
    const five = byClass("5");
    tr.append(
      cell(l.route, undefined, undefined, undefined, "name"),
      cell(l.protocol, undefined, undefined, undefined, ""),
      cell(count(sum(requests, l)), m("requests_total"), l, "sum"),
      cell(routeRate.has(`${l.route} ${l.protocol}`) ? count(routeRate.get(`${l.route} ${l.protocol}`)) : "–"),
      cell(count(byClass("2")), m("requests_total"), { ...l, code: "2xx" }, "sum", "n okc"),
      cell(count(byClass("4"))),
      cell(count(five), undefined, undefined, undefined, five > 0 ? "n bad" : "n"),
      cell(pair("request_duration_seconds")),
      cell(pair("request_queue_seconds")),
      cell(pair("request_batch_fill_seconds")),
      cell(pair("request_forward_seconds")),
      phases,
      cell(batches === 0 ? "–" : (sum(byName.get(m("request_batch_size_sum")), l) / batches).toFixed(1)),
    );
    return tr;
  });
  fill(document.querySelector("#routes tbody"), routeRows, 13);

  // Stages and the shared pool's models.
  const depth = byName.get(m("stage_queue_depth"));
  const stageRows = labelSets(depth, ["stage", "model"]).map((l) => {
    const own = l.stage !== "" ? { stage: l.stage } : { model: l.model };
    const tr = document.createElement("tr");
    const workers = sum(byName.get(m("stage_live_workers")), own);
    const backing = l.stage !== "" ? sum(byName.get(m("stage_workers_backing_off")), own) : 0;
    const restarts = l.stage !== "" ? sum(byName.get(m("stage_worker_restarts_total")), own) : undefined;
    const batchCount = sum(byName.get(m("stage_batch_size_count")), own);
    const behindS = sum(byName.get(m("queue_behind_seconds")), own);
    const bars = document.createElement("div");
    bars.className = "bars";
    let below = 0;
    const buckets = (byName.get(m("stage_batch_size_bucket")) ?? []).filter((s) => matches(s.labels, own) && Object.keys(own).every((k) => s.labels[k] !== undefined));
    const counts = buckets.map((s) => {
      const n = s.value - below;
      below = s.value;
      return { le: s.labels.le, n };
    });
    const top = Math.max(1, ...counts.map((c) => c.n));
    for (const c of counts) {
      const span = document.createElement("span");
      span.style.height = `${(100 * c.n) / top}%`;
      span.title = `≤ ${c.le}: ${c.n} batches`;
      bars.append(span);
    }
    const chart = cell("", undefined, undefined, undefined, "");
    chart.append(bars);
    tr.append(
      cell(l.stage !== "" ? l.stage : `model ${l.model}`, undefined, undefined, undefined, "name"),
      cell(count(sum(depth, own)), m("stage_queue_depth"), own, "sum"),
      cell(count(sum(byName.get(m("stage_running")), own)), m("stage_running"), own, "sum"),
      cell(seconds(behindS), undefined, undefined, undefined, behindS > 1 ? "n bad" : behindS > 0.1 ? "n warn" : "n"),
      cell(count(workers), m("stage_live_workers"), own, "sum", workers === 0 ? "n bad" : "n"),
      cell(count(backing), undefined, undefined, undefined, backing > 0 ? "n warn" : "n"),
      restarts === undefined ? cell("–") : cell(count(restarts), m("stage_worker_restarts_total"), own, "sum", restarts > 0 ? "n warn" : "n"),
      cell(count(batchCount), m("stage_batch_size_count"), own, "sum"),
      cell(`${seconds(quantile(byName, m("stage_forward_duration_seconds"), 0.5, own))} / ${seconds(quantile(byName, m("stage_forward_duration_seconds"), 0.99, own))}`),
      cell(batchCount === 0 ? "–" : (sum(byName.get(m("stage_batch_size_sum")), own) / batchCount).toFixed(1)),
      chart,
    );
    return tr;
  });
  fill(document.querySelector("#stages tbody"), stageRows, 11);

  renderModels(data, byName, m);

  // Streams, by route.
  const active = byName.get(m("streams_active"));
  const streamRows = labelSets(active, ["route"]).map((l) => {
    const tr = document.createElement("tr");
    const pair = (name) => `${seconds(quantile(byName, m(name), 0.5, l))} / ${seconds(quantile(byName, m(name), 0.99, l))}`;
    tr.append(
      cell(l.route, undefined, undefined, undefined, "name"),
      cell(count(sum(active, l)), m("streams_active"), l, "sum"),
      cell(pair("stream_first_chunk_seconds")),
      cell(pair("stream_chunk_interval_seconds")),
      cell(count(sum(byName.get(m("stream_cancellations_total")), l))),
    );
    return tr;
  });
  fill(document.querySelector("#streams tbody"), streamRows, 5);

  const updated = document.getElementById("updated");
  updated.textContent = `updated ${new Date().toLocaleTimeString()}`;
  updated.dataset.polls = String(Number(updated.dataset.polls ?? 0) + 1);
}

const PARTS = { models: "Node.js", "python-models": "Python" };

/** The shared pool's model versions, and each part's memory against its budget; hidden without a shared pool. */
function renderModels(data, byName, m) {
  const used = byName.get(m("model_pool_memory_bytes")) ?? [];
  document.getElementById("models").hidden = used.length === 0;
  const memory = document.getElementById("memory");
  memory.replaceChildren();
  for (const part of used) {
    const own = { pool: part.labels.pool };
    const budget = sum(byName.get(m("model_pool_memory_budget_bytes")), own);
    const row = document.createElement("div");
    row.className = "memory";
    const label = document.createElement("span");
    label.className = "label";
    label.textContent = `${PARTS[own.pool] ?? own.pool} workers`;
    const bar = document.createElement("div");
    bar.className = "meter";
    const fillBar = document.createElement("span");
    const share = budget > 0 ? part.value / budget : 0;
    fillBar.style.width = `${Math.min(100, 100 * share)}%`;
    fillBar.className = share > 0.9 ? "bad" : share > 0.7 ? "warn" : "";
    bar.append(fillBar);
    const figure = document.createElement("span");
    figure.className = "n";
    const usedEl = document.createElement("span");
    usedEl.textContent = bytes(part.value);
    Object.assign(usedEl.dataset, { metric: m("model_pool_memory_bytes"), labels: JSON.stringify(own), stat: "sum" });
    const budgetEl = document.createElement("span");
    budgetEl.textContent = budget > 0 ? bytes(budget) : "no budget";
    if (budget > 0) Object.assign(budgetEl.dataset, { metric: m("model_pool_memory_budget_bytes"), labels: JSON.stringify(own), stat: "sum" });
    figure.append(usedEl, budget > 0 ? " of " : ", ", budgetEl);
    row.append(label, bar, figure);
    memory.append(row);
  }
  const states = byName.get(m("model_state")) ?? [];
  const reasons = new Map((data.reasons ?? []).map((r) => [`${r.model}\u0000${r.version}`, r.reason]));
  const replicas = byName.get(m("model_replicas")) ?? [];
  const rows = labelSets(states, ["model", "version"]).sort((a, b) => a.model.localeCompare(b.model) || a.version.localeCompare(b.version)).map((l) => {
    const tr = document.createElement("tr");
    const state = states.find((s) => matches(s.labels, l) && s.value === 1)?.labels.state ?? "–";
    const stateCell = cell("", undefined, undefined, undefined, "");
    const badge = document.createElement("span");
    badge.className = `state ${state}`;
    badge.textContent = state;
    // The state shown is the one /metrics gives 1 (a test reads it).
    Object.assign(badge.dataset, { series: m("model_state"), labels: JSON.stringify(l) });
    stateCell.append(badge);
    const reason = reasons.get(`${l.model}\u0000${l.version}`);
    if (reason !== undefined && reason !== state) {
      const why = document.createElement("span");
      why.className = "reason";
      why.textContent = reason;
      stateCell.append(why);
    }
    const held = replicas.filter((s) => matches(s.labels, l)).sort((a, b) => Number(a.labels.worker) - Number(b.labels.worker));
    const where = held.length === 0 ? "–" : `${PARTS[held[0].labels.pool] ?? held[0].labels.pool} ${held.map((s) => `#${s.labels.worker}`).join(" ")}`;
    const loads = sum(byName.get(m("model_loads_total")), l);
    const evictions = sum(byName.get(m("model_evictions_total")), l);
    tr.append(
      cell(l.model, undefined, undefined, undefined, "name"),
      cell(l.version === "" ? "–" : l.version, undefined, undefined, undefined, "name"),
      stateCell,
      cell(count(held.length), m("model_replicas"), l, "sum", held.length === 0 && state === "ready" ? "n bad" : "n"),
      cell(where, undefined, undefined, undefined, "where"),
      cell(bytes(sum(byName.get(m("model_memory_bytes")), l)), m("model_memory_bytes"), l, "sum"),
      cell(count(loads), m("model_loads_total"), l, "sum"),
      cell(count(evictions), m("model_evictions_total"), l, "sum", evictions > 0 ? "n warn" : "n"),
    );
    return tr;
  });
  fill(document.querySelector("#versions tbody"), rows, 8);
}

async function poll() {
  try {
    const answer = await fetch("dashboard/metrics.json", { cache: "no-store" });
    if (!answer.ok) throw new Error(`dashboard/metrics.json: ${answer.status}`);
    render(await answer.json());
    document.getElementById("error").textContent = "";
  } catch (err) {
    document.getElementById("error").textContent = String(err.message ?? err);
  }
  setTimeout(poll, POLL_MS);
}
poll();
