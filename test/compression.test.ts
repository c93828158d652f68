/**
 * HTTP compression: gzip, deflate and zstd request bodies, the body limit on inflated bytes (a zip
 * bomb gets 413 without being inflated whole), and answers compressed as Accept-Encoding asks when
 * they are large enough.
 */
import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, test } from "node:test";
import { brotliDecompressSync, deflateSync, gunzipSync, gzipSync } from "node:zlib";
import { type ServerProcess, zstdFrame } from "./helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";

const LIMIT = 1024 * 1024;

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

// A POST whose answer is read as bytes, as they came (no automatic decompression).
function postRaw(port: number, path: string, body: Buffer, headers: Record<string, string>): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, method: "POST", headers: { "content-type": "application/json", ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

function inferBody(n: number): Buffer {
  return Buffer.from(JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [n], data: new Array(n).fill(0.25) }] }));
}

describe("HTTP compression", () => {
  const repo = new ModelRepo();
  let server: ServerProcess;
  const infer = (body: Buffer, headers: Record<string, string>) => postRaw(server.port, "/v2/models/echo/infer", body, headers);

  before(async () => {
    repo.module("echo", "echo.ts", {});
    server = await serveRepository(repo.dir, ["--max-request-size", String(LIMIT)]);
  });
  after(async () => {
    await server?.stop();
    repo.remove();
  });

  test("gzip, deflate and zstd request bodies are inflated", async () => {
    for (const [encoding, body] of [["gzip", gzipSync(inferBody(3))], ["deflate", deflateSync(inferBody(3))], ["zstd", zstdFrame(inferBody(3), 1)], ["identity", inferBody(3)]] as const) {
      const reply = await infer(body, { "content-encoding": encoding });
      assert.equal(reply.status, 200, `${encoding}: ${reply.body}`);
      assert.deepEqual(JSON.parse(reply.body.toString()).outputs.find((o: any) => o.name === "x_out").data, [0.25, 0.25, 0.25]);
    }
  });

  test("the body limit applies to the inflated bytes: a zip bomb gets 413", async () => {
    const bomb = gzipSync(Buffer.alloc(64 * LIMIT, 0x20));
    assert.ok(bomb.byteLength < LIMIT / 4);
    let reply = await infer(bomb, { "content-encoding": "gzip" });
    assert.equal(reply.status, 413);
    assert.deepEqual(JSON.parse(reply.body.toString()), { error: `request body is too large: the limit is ${LIMIT} bytes, once inflated` });
    const zstdBomb = zstdFrame(Buffer.from("{}"), 512);
    assert.ok(zstdBomb.byteLength < 4096);
    reply = await infer(zstdBomb, { "content-encoding": "zstd" });
    assert.equal(reply.status, 413);
    assert.deepEqual(JSON.parse(reply.body.toString()), { error: `request body is too large: the limit is ${LIMIT} bytes, once inflated` });
  });

  test("a body that is not what its encoding says is a 400; an unknown encoding a 415", async () => {
    let reply = await infer(Buffer.from("not gzip at all"), { "content-encoding": "gzip" });
    assert.equal(reply.status, 400);
    assert.match(JSON.parse(reply.body.toString()).error, /^bad request: the body is not valid gzip/);
    reply = await infer(Buffer.from("not zstd either"), { "content-encoding": "zstd" });
    assert.equal(reply.status, 400);
    assert.match(JSON.parse(reply.body.toString()).error, /^bad request: the body is not valid zstd/);
    reply = await infer(inferBody(1), { "content-encoding": "compress" });
    assert.equal(reply.status, 415);
    assert.equal(JSON.parse(reply.body.toString()).error, "unsupported media type: Content-Encoding 'compress'; use gzip, deflate or zstd");
  });

  test("large answers are compressed as Accept-Encoding asks; small ones are not", async () => {
    const large = inferBody(2000);
    let reply = await infer(large, { "accept-encoding": "gzip, deflate" });
    assert.equal(reply.status, 200);
    assert.equal(reply.headers["content-encoding"], "gzip");
    assert.equal(JSON.parse(gunzipSync(reply.body).toString()).outputs.find((o: any) => o.name === "x_out").data.length, 2000);
    reply = await infer(large, { "accept-encoding": "gzip;q=0.5, br" });
    assert.equal(reply.headers["content-encoding"], "br");
    assert.equal(JSON.parse(brotliDecompressSync(reply.body).toString()).outputs.length, 2);
    reply = await infer(large, { "accept-encoding": "identity" });
    assert.equal(reply.headers["content-encoding"], undefined);
    reply = await infer(large, {});
    assert.equal(reply.headers["content-encoding"], undefined);
    reply = await infer(inferBody(2), { "accept-encoding": "gzip" });
    assert.equal(reply.headers["content-encoding"], undefined);
    assert.equal(JSON.parse(reply.body.toString()).outputs.length, 2);
  });
});
