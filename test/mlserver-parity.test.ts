/**
 * MLServer's own answers as the oracle: MLServer 1.7 (bench/.venv, as test/client-mlserver.test.ts
 * runs it) and Shoal serve the same copy of MLServer's test models (test/fixtures/mlserver-repo:
 * SumModel with its custom handlers, ErrorModel, TextModel), and the same REST and gRPC requests
 * get the same answers: statuses, bodies (ids aside, which are new UUIDs on each side), CloudEvents
 * and echoed headers, gRPC messages, codes, details and trailing metadata. Outside CI it is
 * skipped, saying so, when that venv has no MLServer; it runs in the suite's first run only.
 */
import assert from "node:assert/strict";
import { cpSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import * as grpcJs from "@grpc/grpc-js";
import { venvBin } from "../bench/lib/peers.js";
import { V2Client, freePort } from "./grpc-helpers.js";
import { RAN_ONCE, ROOT, fixture, send, type ServerProcess } from "./helpers.js";
import { serveRepository } from "./model-helpers.js";
import { mlserverPython, startMLServer, type MLServerProcess } from "./python-helpers.js";

const MLSERVER = venvBin(ROOT, "mlserver");
const python = RAN_ONCE === undefined ? mlserverPython() : { skip: RAN_ONCE };
const SKIP = python.skip ?? (existsSync(MLSERVER) ? false : "MLServer is not in bench/.venv");
const SUM = { inputs: [{ name: "input-0", shape: [1, 3], datatype: "INT32", data: [1, 2, 3] }] };
const PROMPT = { inputs: [{ name: "prompt", shape: [1], datatype: "BYTES", data: ["What is the capital of France?"], parameters: { content_type: "str" } }] };
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

// The same request as each server answers it, ids aside.
type Answer = { status: number; body: string; headers: Record<string, string> };
async function answer(url: string, method: string, path: string, body?: unknown): Promise<Answer> {
  const init: RequestInit = body === undefined ? { method } : { method, body: JSON.stringify(body), headers: { "content-type": "application/json", "x-foo": "bar" } };
  const reply = await send(`${url}${path}`, init);
  const headers: Record<string, string> = {};
  reply.headers.forEach((value, name) => {
    if (name.startsWith("ce-") || name === "x-foo") headers[name] = value.replace(UUID, "<id>");
  });
  return { status: reply.status, body: reply.text.replace(UUID, "<id>"), headers };
}

describe("Shoal answers as MLServer does, request for request", { skip: SKIP }, () => {
  const repo = mkdtempSync(join(tmpdir(), "shoal-mlserver-parity-"));
  let mlserver: MLServerProcess;
  let shoal: ServerProcess;
  const urls: string[] = [];
  const clients: V2Client[] = [];

  before(async () => {
    for (const model of ["sum-model", "error-model", "text-model"]) cpSync(fixture(join("mlserver-repo", model)), join(repo, model), { recursive: true, dereference: true });
    writeFileSync(join(repo, "settings.json"), JSON.stringify({ parallel_workers: 1 }));
    const grpcShoal = await freePort();
    [mlserver, shoal] = await Promise.all([
      startMLServer(repo, async (url) => (await send(`${url}/v2/health/ready`)).status === 200),
      serveRepository(repo, ["--model-control", "explicit"], { ...("env" in python ? python.env : {}), SHOAL_GRPC_PORT: String(grpcShoal) }),
    ]);
    urls.push(mlserver.http, shoal.url);
    clients.push(new V2Client(Number(mlserver.grpc.split(":")[1])), new V2Client(grpcShoal));
  });
  after(async () => {
    for (const client of clients) client.close();
    await Promise.all([mlserver?.stop(), shoal?.stop()]);
    rmSync(repo, { recursive: true, force: true });
  });

  test("REST: inference, its headers, errors, metadata, generate, custom handlers, the repository", async () => {
    const requests: [string, string, unknown?][] = [
      ["POST", "/v2/models/sum-model/infer", SUM],
      ["POST", "/v2/models/sum-model/versions/v1.2.3/infer", { id: "mine", ...SUM }],
      ["POST", "/v2/models/sum-model/infer", { inputs: [{ ...SUM.inputs[0], datatype: "INT322" }] }],
      ["POST", "/v2/models/error-model/infer", SUM],
      ["POST", "/v2/models/my-model/versions/v0/infer", SUM],
      ["POST", "/v2/models/sum-model/versions/v0/generate", SUM],
      ["GET", "/v2/models/sum-model"],
      ["GET", "/v2/models/my-model"],
      ["GET", "/v2"],
      ["POST", "/v2/models/text-model/versions/v1.2.3/generate", PROMPT],
      ["POST", "/my-custom-endpoint", [1, 2, 3, 4]],
      ["POST", "/custom-endpoint-with-long-response", 10],
      ["POST", "/v2/repository/models/my-model/load", {}],
    ];
    for (const [method, path, body] of requests) {
      const [theirs, ours] = await Promise.all(urls.map((url) => answer(url, method, path, body)));
      // The long answer is random letters: its shape is what both share.
      if (path.startsWith("/custom-endpoint")) for (const a of [theirs!, ours!]) a.body = a.body.replace(/[a-z]{10}/, "<letters>");
      assert.deepEqual(ours, theirs, `${method} ${path}`);
    }
  });

  test("gRPC: ModelInfer typed and raw, its trailing metadata, errors' codes and details, metadata", async () => {
    const sum = { model_name: "sum-model", model_version: "v1.2.3", inputs: [{ name: "input-0", datatype: "INT32", shape: [1, 3], contents: { int_contents: [1, 2, 3] } }] };
    const raw = Buffer.alloc(12);
    [1, 2, 3].forEach((v, i) => raw.writeInt32LE(v, 4 * i));
    const calls: [string, object][] = [
      ["ModelInfer", sum],
      ["ModelInfer", { ...sum, inputs: [{ name: "input-0", datatype: "INT32", shape: [1, 3] }], raw_input_contents: [raw] }],
      ["ModelInfer", { ...sum, model_name: "error-model", model_version: "" }],
      ["ModelInfer", { ...sum, model_name: "my-model" }],
      ["ModelInfer", { ...sum, inputs: [{ ...sum.inputs[0], datatype: "INT322" }] }],
      ["ModelMetadata", { name: "sum-model", version: "v1.2.3" }],
      ["ServerMetadata", {}],
      ["RepositoryModelLoad", { model_name: "my-model" }],
    ];
    const outcome = (client: V2Client, method: string, request: object) =>
      new Promise<string>((resolve) => {
        const metadata = new grpcJs.Metadata();
        metadata.set("x-foo", "bar");
        let value = "";
        const call = client.client[method](request, metadata, (err: grpcJs.ServiceError | null, response: unknown) => (value = err === null ? JSON.stringify(response, (k, v) => (k === "id" && v !== "" ? "<id>" : v)) : ""));
        call.on("status", (status: grpcJs.StatusObject) => {
          const trailers = Object.entries(status.metadata.getMap()).filter(([k]) => k.startsWith("ce-") || k === "x-foo").map(([k, v]) => `${k}=${String(v).replace(UUID, "<id>")}`).sort();
          // The details of an OK status are the library's own ("OK" in grpc-js, "" in Python's).
          const details = status.code === grpcJs.status.OK ? "" : JSON.stringify(status.details);
          setImmediate(() => resolve(`${grpcJs.status[status.code]} ${details} ${value} ${trailers.join(" ")}`));
        });
      });
    for (const [method, request] of calls) {
      const [theirs, ours] = await Promise.all(clients.map((client) => outcome(client, method, request)));
      assert.equal(ours, theirs, `${method} ${JSON.stringify(request).slice(0, 120)}`);
    }
  });
});
