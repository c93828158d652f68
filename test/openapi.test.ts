/** /openapi.json describes every route from its Workers' schemas; /docs serves Swagger UI from the package. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { assertError, fixture, send, startServer, type ServerProcess } from "./helpers.js";

type Json = any;

// Follows a local reference such as "#/components/schemas/Error".
function resolve(document: Json, ref: string): Json {
  assert.match(ref, /^#\//, `a local reference: ${ref}`);
  let node = document;
  for (const part of ref.slice(2).split("/")) {
    node = node?.[part.replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  assert.notEqual(node, undefined, `${ref} resolves`);
  return node;
}

// Every "$ref" anywhere in `value`.
function refsIn(value: unknown, found: string[] = []): string[] {
  if (Array.isArray(value)) for (const item of value) refsIn(item, found);
  else if (typeof value === "object" && value !== null) {
    for (const [key, inner] of Object.entries(value)) {
      if (key === "$ref" && typeof inner === "string") found.push(inner);
      else refsIn(inner, found);
    }
  }
  return found;
}

describe("the OpenAPI document", () => {
  let server: ServerProcess;
  let doc: Json;
  before(async () => {
    // A slow init() keeps the workers from being ready for a while.
    server = await startServer(fixture("validation.ts"), { env: { INIT_MS: "1500" }, waitReady: false });
  });
  after(async () => {
    await server?.stop();
  });

  test("is 503 until the workers are ready, then 200 JSON", async () => {
    assertError(await send(`${server.url}/openapi.json`), 503, "service unavailable: the API document is built once the workers are ready");
    await server.waitForLog((l) => l.msg === "ready", 30_000);
    const reply = await send(`${server.url}/openapi.json`);
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.headers.get("content-type"), "application/json");
    doc = reply.json;
    assert.equal(doc.openapi, "3.1.0");
    assert.equal(typeof doc.info.title, "string");
    assert.equal(typeof doc.info.version, "string");
  });

  test("has a POST operation per route and every reference resolves", () => {
    for (const path of ["/measure", "/batch", "/batch-one", "/count", "/depth", "/packed", "/plain"]) {
      assert.ok(doc.paths[path]?.post, `POST ${path}`);
      assert.deepEqual(Object.keys(doc.paths[path]), ["post"]);
    }
    const ids = Object.values(doc.paths).flatMap((item: Json) => Object.values(item).map((op: Json) => op.operationId)).filter(Boolean);
    assert.equal(new Set(ids).size, ids.length, "operation ids are unique");
    for (const ref of refsIn(doc)) resolve(doc, ref);
  });

  test("the request body is the first stage's input schema, with its example", () => {
    const body = doc.paths["/measure"].post.requestBody;
    assert.equal(body.required, true);
    const media = body.content["application/json"];
    const schema = resolve(doc, media.schema.$ref);
    assert.equal(schema.type, "object");
    assert.deepEqual(schema.required, ["name", "points"], "fields with defaults or optional are not required of the client");
    const point = schema.properties.points.items;
    assert.deepEqual(point.properties.x, { type: "number" });
    assert.equal(schema.properties.points.minItems, 2);
    assert.deepEqual(schema.properties.style.properties.color.enum, ["red", "green"]);
    assert.equal(schema.properties.scale.default, 1);
    assert.deepEqual(media.example, { name: "unit", points: [{ x: 0, y: 0 }, { x: 1, y: 0 }], scale: 1 });
  });

  test("the 200 response is the last stage's output schema", () => {
    const post = doc.paths["/count"].post;
    assert.match(post.requestBody.content["application/json"].schema.$ref, /\/Tokenize_\d+\.input$/);
    const ok = post.responses["200"].content["application/json"];
    assert.match(ok.schema.$ref, /\/CountTokens_\d+\.output$/);
    assert.deepEqual(resolve(doc, ok.schema.$ref).properties.count.type, "integer");
  });

  test("error answers carry the {error} schema, with the error table's messages", () => {
    const responses = doc.paths["/measure"].post.responses;
    assert.deepEqual(Object.keys(responses).sort(), ["200", "400", "408", "413", "422", "429", "500", "503"]);
    for (const status of ["400", "408", "413", "422", "429", "500", "503"]) {
      const response = resolve(doc, responses[status].$ref);
      const schema = resolve(doc, response.content["application/json"].schema.$ref);
      assert.deepEqual(schema.required, ["error"]);
      assert.equal(schema.properties.error.type, "string");
    }
    assert.match(resolve(doc, responses["422"].$ref).description, /request validation error/);
  });

  test("content types come from the codecs; a Worker without schemas has none", () => {
    const packed = doc.paths["/packed"].post;
    assert.ok(packed.requestBody.content["application/msgpack"].schema);
    assert.ok(packed.responses["200"].content["application/msgpack"].schema);
    assert.deepEqual(doc.paths["/plain"].post.requestBody.content, { "application/json": {} });
  });

  test("a recursive schema refers to itself through components", () => {
    const input = resolve(doc, doc.paths["/depth"].post.requestBody.content["application/json"].schema.$ref);
    const node = resolve(doc, input.properties.tree.$ref);
    assert.equal(node.properties.children.items.$ref, input.properties.tree.$ref);
  });

  test("the server's own endpoints are described", () => {
    for (const path of ["/", "/healthz", "/readyz", "/metrics", "/openapi.json", "/docs"]) assert.ok(doc.paths[path]?.get, `GET ${path}`);
    assert.ok(doc.paths["/metrics"].get.responses["200"].content["text/plain; version=0.0.4; charset=utf-8"]);
  });

  test("it is GET only", async () => {
    assertError(await send(`${server.url}/openapi.json`, { method: "POST", body: "{}" }), 405, "method not allowed: POST /openapi.json; use GET");
  });
});

describe("the /docs page", () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer(fixture("validation.ts"));
  });
  after(async () => {
    await server?.stop();
  });

  test("is HTML whose every script and stylesheet loads from this server", async () => {
    const page = await send(`${server.url}/docs`);
    assert.equal(page.status, 200, page.text);
    assert.equal(page.headers.get("content-type"), "text/html; charset=utf-8");
    const urls = [...page.text.matchAll(/<(?:script|link)\b[^>]*?\b(?:src|href)="([^"]+)"/g)].map((m) => new URL(m[1]!, `${server.url}/docs`));
    assert.ok(urls.length >= 3, `the page references its assets: ${urls}`);
    for (const url of urls) {
      assert.equal(url.origin, server.url, `${url} is served here, not from a CDN`);
      const asset = await send(url.href);
      assert.equal(asset.status, 200, `${url}: ${asset.status}`);
      assert.ok(asset.body.byteLength > 0, `${url} is not empty`);
    }
    const types = await Promise.all(urls.map(async (url) => (await send(url.href)).headers.get("content-type")));
    assert.ok(types.includes("text/css; charset=utf-8"), `${types}`);
    assert.ok(types.includes("text/javascript; charset=utf-8"), `${types}`);
  });

  test("points Swagger UI at /openapi.json", async () => {
    const init = await send(`${server.url}/docs/init.js`);
    assert.equal(init.status, 200);
    assert.match(init.text, /SwaggerUIBundle\(\{ url: new URL\("openapi\.json"/);
    const bundle = await send(`${server.url}/docs/swagger-ui-bundle.js`);
    assert.match(bundle.text.slice(0, 2000), /SwaggerUIBundle|swagger/i);
  });

  test("other paths under /docs are not found", async () => {
    assertError(await send(`${server.url}/docs/package.json`), 404, "not found: /docs/package.json");
    assertError(await send(`${server.url}/docs/../package.json`), 404, /^not found: /);
  });
});
