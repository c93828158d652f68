/**
 * Fan-out and fan-in on a real server: a text becomes one sub-item per word, the words of every
 * request share the batches of the stage after, and each request's are gathered back in order.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { RecordFile, assertError, fixture, metric, post, rawRequest, runToExit, startServer, waitFor, waitForMetric, waitForMetrics, type ServerProcess } from "./helpers.js";

interface Upper {
  word: string;
  batch: number;
  requests: string[];
}

describe("fan-out and fan-in (--timeout 1000)", () => {
  let server: ServerProcess;
  const calls = new RecordFile();
  before(async () => {
    server = await startServer(fixture("fan-out.ts"), { args: ["--timeout", "1000"], env: { RECORD_FILE: calls.path } });
  });
  after(async () => {
    await server?.stop();
    calls.remove();
  });

  // Nothing of a request is left: none in flight, no sub-item queued.
  const nothingLeft = () =>
    waitForMetrics(server.url, "nothing in flight or queued", (read) => read("shoal_requests_in_flight") === 0 && ["Split_1", "SplitProcess_2", "Upper_4", "Join_5"].every((stage) => read("shoal_stage_queue_depth", { stage }) === 0));
  // Upper's batch with a slow word has come back from its worker.
  const upperRuns = () => metric(server.url, "shoal_stage_forward_duration_seconds_count", { stage: "Upper_4" }).then((n) => n ?? 0);

  test("the gathering stage gets each request's sub-items' outputs, in order", async () => {
    const reply = await post(`${server.url}/words`, { text: "the quick brown fox" });
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.json.text, "THE QUICK BROWN FOX");
    assert.deepEqual(
      reply.json.words.map((w: Upper) => w.word),
      ["THE", "QUICK", "BROWN", "FOX"],
    );
  });

  test("sub-items of concurrent requests share batches, each request still gathered in order; the counter counts them", async () => {
    const before = (await metric(server.url, "shoal_stage_sub_items_total", { route: "/words", stage: "Split_1" })) ?? 0;
    const texts = ["a b c", "d e", "f g h i"];
    const replies = await Promise.all(texts.map((text, i) => post(`${server.url}/words`, { text }, { "x-request-id": `mix-${i}` })));
    for (const [i, reply] of replies.entries()) {
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.text, texts[i]!.toUpperCase());
    }
    const words: Upper[] = replies.flatMap((r) => r.json.words);
    assert.ok(
      words.some((w) => w.requests.length > 1),
      `one of Upper's batches held the sub-items of more than one request: ${JSON.stringify(words)}`,
    );
    assert.ok(words.every((w) => w.batch <= 8));
    assert.equal(await metric(server.url, "shoal_stage_sub_items_total", { route: "/words", stage: "Split_1" }), before + 9);
    // Upper's batch sizes are of sub-items: a batch of more than one request's words is larger than any request's.
    const big = await metric(server.url, "shoal_stage_batch_size_bucket", { stage: "Upper_4", le: "4" });
    const all = await metric(server.url, "shoal_stage_batch_size_count", { stage: "Upper_4" });
    assert.ok(big !== undefined && all !== undefined && all > big, "a batch of more than 4 sub-items is in the histogram");
  });

  test("gathered at the route's end, the answer is the JSON array of the last stage's answers", async () => {
    const reply = await post(`${server.url}/bare`, { text: "one two" });
    assert.equal(reply.status, 200, reply.text);
    assert.match(reply.headers.get("content-type") ?? "", /^application\/json/);
    assert.deepEqual(
      reply.json.map((w: Upper) => w.word),
      ["ONE", "TWO"],
    );
  });

  test("no sub-items: the gathering stage gets [], and a route gathered at its end answers []", async () => {
    const words = await post(`${server.url}/words`, { text: "" });
    assert.equal(words.status, 200, words.text);
    assert.deepEqual(words.json, { text: "", words: [] });
    const bare = await post(`${server.url}/bare`, { text: " " });
    assert.equal(bare.status, 200, bare.text);
    assert.equal(bare.text, "[]");
  });

  test("a stage in a child process fans out as a thread's does", async () => {
    const reply = await post(`${server.url}/process`, { text: "over the wire" });
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(
      reply.json.map((w: Upper) => w.word),
      ["OVER", "THE", "WIRE"],
    );
    assert.equal(await metric(server.url, "shoal_stage_sub_items_total", { route: "/process", stage: "SplitProcess_2" }), 3);
  });

  test("a sub-item's error fails its request only; a request whose words shared its batch succeeds", async () => {
    const [bad, good] = await Promise.all([post(`${server.url}/words`, { text: "x boom y" }, { "x-request-id": "err-bad" }), post(`${server.url}/words`, { text: "p q" }, { "x-request-id": "err-good" })]);
    assertError(bad, 422, "request validation error: boom is not a word");
    assert.equal(good.status, 200, good.text);
    assert.equal(good.json.text, "P Q");
    assert.ok(
      good.json.words.some((w: Upper) => w.requests.includes("err-bad")),
      `the two requests' words shared a batch: ${good.text}`,
    );
    await nothingLeft();
  });

  test("more sub-items than fanOut.max: 422 naming the stage, and nothing reaches the next stage", async () => {
    const reply = await post(`${server.url}/words`, { text: "1 2 3 4 5 6 7 8 9 10 11" }, { "x-request-id": "too-many" });
    assertError(reply, 422, "request validation error: stage Split_1 made 11 sub-items of one item, more than its limit of 10 (fanOut.max)");
    assert.ok(!calls.lines().some((l) => l.startsWith("too-many")));
    const ten = await post(`${server.url}/words`, { text: "1 2 3 4 5 6 7 8 9 10" });
    assert.equal(ten.status, 200, ten.text);
  });

  test("a stage that fans out undeclared fails the request with 500; one at its route's last stage too", async () => {
    assertError(await post(`${server.url}/undeclared`, { text: "a b" }), 500, "internal error: stage Sneaky_3 returned fanOut() but declares no fanOut option");
    assertError(await post(`${server.url}/sneaky`, { text: "a b" }), 500, "internal error: stage Sneaky_3 returned fanOut() at its route's last stage; only a stage followed by others fans out");
  });

  test("the deadline passes while a sub-item is computed: 408, and nothing is left in flight", async () => {
    const runs = await upperRuns();
    const reply = await post(`${server.url}/words`, { text: "fast slow" }, { "x-request-id": "late" });
    assertError(reply, 408, "request timeout: no answer within 1000 ms");
    await nothingLeft();
    // Upper's slow batch ends after the answer; its late results change nothing.
    await waitFor("the slow batch to come back", async () => ((await upperRuns()) > runs ? true : undefined));
    await nothingLeft();
    const next = await post(`${server.url}/words`, { text: "after" });
    assert.equal(next.status, 200, next.text);
  });

  test("a client that hangs up has its sub-items dropped: those still queued are never computed", async () => {
    const runs = await upperRuns();
    // Upper's one worker is held by a slow word; the next request's words queue behind it.
    const busy = rawRequest(server.port, "/words", { headers: { "content-type": "application/json", "x-request-id": "dc-busy" }, body: JSON.stringify({ text: "slow" }) });
    await waitFor("the slow word to reach forward()", () => (calls.lines().includes("dc-busy slow") ? true : undefined));
    const gone = rawRequest(server.port, "/words", { headers: { "content-type": "application/json", "x-request-id": "dc-gone" }, body: JSON.stringify({ text: "a b c" }) });
    await waitForMetric(server.url, "shoal_stage_queue_depth", { stage: "Upper_4" }, (n) => n === 3);
    gone.req.destroy();
    await waitForMetric(server.url, "shoal_stage_queue_depth", { stage: "Upper_4" }, (n) => n === 0);
    assert.equal((await busy.response).status, 408);
    await waitFor("the slow batch to come back", async () => ((await upperRuns()) > runs ? true : undefined));
    await nothingLeft();
    const marker = await post(`${server.url}/words`, { text: "marker" }, { "x-request-id": "dc-marker" });
    assert.equal(marker.status, 200, marker.text);
    assert.deepEqual(
      calls.lines().filter((l) => l.startsWith("dc-")),
      ["dc-busy slow", "dc-marker marker"],
      "the dropped sub-items were never computed",
    );
  });
});

describe("--dry-run", () => {
  test("sends Split's example through each route, its sub-items' batch one step of the trace", async () => {
    const run = await runToExit(fixture("fan-out.ts"), ["--dry-run"]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^\/words: Split_1 [\d.]+ ms -> Upper_4 [\d.]+ ms -> Join_5 [\d.]+ ms => 200, \d+ bytes of application\/json/m);
    assert.match(run.stdout, /^\/bare: Split_1 [\d.]+ ms -> Upper_4 [\d.]+ ms => 200, \d+ bytes of application\/json/m);
  });
});

describe("routes the server refuses at start-up", () => {
  const cases: [string, RegExp][] = [
    ["gatherFirst", /route \/inference: stage Plain_1 gathers \(gather: true\), but no stage before it fans out/],
    ["lastFans", /route \/inference: stage Fans_2 fans out at the route's last stage; its sub-items need a stage after it/],
    ["nested", /route \/inference: stage Fans_2 fans out before the sub-items of Fans_1 are gathered/],
    ["notJson", /route \/inference: the sub-items of Fans_1 are gathered at the route's end and answered as one JSON array, but its last stage Raw_2 encodes application\/octet-stream/],
    ["v2", /exposeRoute\("\/split"\): stage Fans_1 fans out, and a route that fans out is not served as a V2 model/],
    ["badMax", /invalid stage Fans_1: option 'fanOut.max'/],
  ];
  for (const [name, pattern] of cases) {
    test(name, async () => {
      const run = await runToExit(fixture("fan-out-misfits.ts"), ["--port", "0", "--address", "127.0.0.1"], { FAN_OUT_CASE: name });
      assert.equal(run.code, 1, run.stderr);
      assert.match(run.stderr, pattern);
    });
  }
});
