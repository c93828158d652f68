/**
 * The pieces of `shoal bench`: its levels as written, perf_analyzer's stability rule, the CSV,
 * the raw-socket HTTP sender against a node:http server (Content-Length, chunked, Connection:
 * close, errors, a connection limit), and the open loop's rate.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { httpSender } from "../src/bench/http-sender.js";
import { parseLevels, type LevelResult } from "../src/bench/levels.js";
import { openLoop, summarise, type Send } from "../src/bench/loadgen.js";
import { toCsv } from "../src/bench/report.js";
import { stable } from "../src/bench/stability.js";

test("levels: lists, doubling ranges that end on their last, ranges with a step; nonsense refused", () => {
  assert.deepEqual(parseLevels("1,4,16"), [1, 4, 16]);
  assert.deepEqual(parseLevels("1:64"), [1, 2, 4, 8, 16, 32, 64]);
  assert.deepEqual(parseLevels("3:20"), [3, 6, 12, 20]);
  assert.deepEqual(parseLevels("10:50:20"), [10, 30, 50]);
  assert.deepEqual(parseLevels("0.5:2:0.5"), [0.5, 1, 1.5, 2]);
  for (const bad of ["", "0", "a,b", "8:2", "1:4:0", "-1"]) assert.throws(() => parseLevels(bad), /is not a list of levels/, bad);
});

test("stability: three windows whose throughput and mean latency are each within the tolerance of their mean", () => {
  const w = (requestsPerSec: number, meanMs: number) => ({ requestsPerSec, meanMs });
  assert.equal(stable([w(100, 1), w(100, 1)], 0.1), false, "two windows are not enough");
  assert.equal(stable([w(50, 9), w(100, 1), w(105, 1.05), w(96, 0.98)], 0.1), true, "only the last three count");
  assert.equal(stable([w(100, 1), w(100, 1), w(125, 1)], 0.1), false, "throughput 125 is 16 % over the mean 108");
  assert.equal(stable([w(100, 1), w(100, 1), w(100, 1.3)], 0.1), false, "latency apart");
  assert.equal(stable([w(0, NaN), w(0, NaN), w(0, NaN)], 0.1), false, "windows with no answer");
  assert.equal(stable([w(100, 1), w(100, 1), w(125, 1)], 0.2), true, "a wider tolerance");
});

test("the CSV: a header and a line per level, error kinds quoted when they hold a comma", () => {
  const result: LevelResult = { mode: "rate", value: 50, requests: 10, errors: 2, errorKinds: { "HTTP 503": 1, "a, b": 1 }, requestsPerSec: 5, meanMs: 1, p50Ms: 1, p90Ms: 2, p99Ms: 3, seconds: 2, windows: 3, stable: true, batchSize: NaN, queueMs: 0.5 };
  assert.equal(toCsv([result]), 'mode,level,requests,req_per_sec,mean_ms,p50_ms,p90_ms,p99_ms,errors,error_kinds,batch_size,queue_ms,windows,stable\nrate,50,10,5.0,1.000,1.000,2.000,3.000,2,"HTTP 503 x1; a, b x1",,0.500,3,true\n');
});

describe("the HTTP sender", () => {
  let server: Server;
  let base: string;
  let open = 0;
  let connections = 0;

  before(async () => {
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c));
      req.on("end", () => {
        const path = req.url ?? "";
        if (path === "/length") res.end(`got ${body}`);
        else if (path === "/chunked") {
          res.write("a".repeat(10_000));
          setTimeout(() => res.end("b"), 5);
        } else if (path === "/close") res.setHeader("connection", "close").end("bye");
        else if (path === "/slow") setTimeout(() => res.end("late"), 20);
        else res.writeHead(503).end("busy");
      });
    });
    server.on("connection", (socket) => {
      connections++;
      open++;
      socket.on("close", () => open--);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => server.close());

  test("answers read to their end by Content-Length or chunks, on kept-alive connections; other statuses named", async () => {
    connections = 0;
    for (const path of ["/length", "/chunked"]) {
      const sender = httpSender(`${base}${path}`, Buffer.from("fish"), { "content-type": "text/plain" }, 2);
      const answers = await Promise.all(Array.from({ length: 20 }, () => sender.send()));
      assert.deepEqual(new Set(answers), new Set([true]), path);
      sender.close();
    }
    assert.equal(connections, 4, "two connections for each sender's 20 requests");
    const busy = httpSender(`${base}/busy`, undefined, {}, 1);
    assert.deepEqual(await Promise.all([busy.send(), busy.send()]), ["HTTP 503", "HTTP 503"]);
    busy.close();
  });

  test("a server that closes the connection after each answer: a new one for the next", async () => {
    connections = 0;
    const sender = httpSender(`${base}/close`, undefined, {}, 1);
    for (let i = 0; i < 5; i++) assert.equal(await sender.send(), true);
    assert.equal(connections, 5);
    sender.close();
  });

  test("never more connections than its limit: the other calls wait for one", async () => {
    let most = 0;
    const watch = setInterval(() => (most = Math.max(most, open)), 1);
    const sender = httpSender(`${base}/slow`, undefined, {}, 3);
    assert.deepEqual(new Set(await Promise.all(Array.from({ length: 12 }, () => sender.send()))), new Set([true]));
    clearInterval(watch);
    sender.close();
    assert.ok(most <= 3, `${most} connections open at once`);
  });

  test("a refused connection rejects with its code", async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const sender = httpSender(`http://127.0.0.1:${port}/`, undefined, {}, 1);
    await assert.rejects(sender.send(), { code: "ECONNREFUSED" });
    sender.close();
  });
});

test("the open loop sends at the rate asked whatever the answers take, and counts from each arrival", async () => {
  const send: Send = () => new Promise((resolve) => setTimeout(() => resolve(true), 30));
  const load = openLoop(send, 400);
  await new Promise((resolve) => setTimeout(resolve, 500));
  load.window();
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const result = summarise([load.window()]);
  await load.stop();
  // 400 a second with answers 30 ms late: about 12 in flight at once, not one at a time.
  assert.ok(result.requestsPerSec > 250 && result.requestsPerSec < 550, `${result.requestsPerSec} req/s`);
  assert.ok(result.p50Ms >= 29, `p50 ${result.p50Ms} ms`);
});
