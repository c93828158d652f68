/**
 * Who may change what a server serves, and what it shows: model control off by default (load and
 * unload 403, the rest readable), explicit control behind an admin token (from a flag, a file or
 * code), control requests from web pages refused unless their origin is listed by name (the
 * text/plain cross-origin unload), CORS preflights and headers for the allowed origins, model
 * settings that name files outside their folder made UNAVAILABLE, and secrets read from the
 * environment that reach the model and are never printed.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { SettingsError, parseSettings, resolveParameters } from "../src/models/settings.js";
import { assertError, fixture, post, rawRequest, send, startServer, type ServerProcess } from "./helpers.js";
import { ModelRepo, serveRepository } from "./model-helpers.js";

const X = { name: "x", datatype: "FP32", shape: [2], data: [1, 2] };
const SECRET = "s3cr3t-api-key-value";
const ADMIN = "https://admin.example.com";
const APP = "https://app.example.com";
const EVIL = "https://evil.example.net";

type IndexEntry = { name: string; version?: string; state: string; reason: string };

async function index(url: string): Promise<Map<string, IndexEntry>> {
  const reply = await post(`${url}/v2/repository/index`, {});
  assert.equal(reply.status, 200, reply.text);
  return new Map((reply.json as IndexEntry[]).map((e) => [e.name, e]));
}

/** Asserts that `model` is still loaded and serving. */
async function assertServing(url: string, model: string): Promise<void> {
  assert.equal((await send(`${url}/v2/models/${model}/ready`)).status, 200, `${model} is not ready`);
  const reply = await post(`${url}/v2/models/${model}/infer`, { inputs: [X] });
  assert.equal(reply.status, 200, reply.text);
}

/** A preflight for `method` on `path` from `origin`. */
function preflight(url: string, path: string, origin: string, method = "POST") {
  return send(`${url}${path}`, { method: "OPTIONS", headers: { origin, "access-control-request-method": method, "access-control-request-headers": "content-type" } });
}

function assertNoCors(headers: Headers, context: string): void {
  for (const name of ["access-control-allow-origin", "access-control-allow-methods", "access-control-allow-headers"]) assert.equal(headers.get(name), null, `${name} on ${context}`);
}

describe("model control 'none' (the default), and settings that stay in their folder", () => {
  const repo = new ModelRepo();
  const outside = mkdtempSync(join(tmpdir(), "shoal-outside-"));
  let server: ServerProcess;
  let url: string;

  before(async () => {
    repo.module("scale", "scale.ts", { parameters: { factor: 2 } });
    repo.module("secret", "secret.ts", { parameters: { apiKey: { env: "TEST_API_KEY" }, visible: "shown" } });
    repo.module("missing", "secret.ts", { parameters: { apiKey: { env: "TEST_MISSING_KEY" } } });
    // Escapes: a parent folder as a version, a file in the parent folder, an absolute runtime
    // elsewhere, a runtime that is a symlink to a file elsewhere, a version folder that is one.
    repo.settings("up", { name: "up", runtime: "onnx", versions: [".."] });
    writeFileSync(join(repo.dir, "x.onnx"), "not a model");
    repo.settings("parent", { name: "parent", runtime: "onnx", file: "../x.onnx" });
    repo.settings("absolute", { name: "absolute", runtime: fixture(join("models", "scale.ts")) });
    repo.settings("linked", { name: "linked", runtime: "./scale.ts" });
    symlinkSync(fixture(join("models", "scale.ts")), join(repo.dir, "linked", "scale.ts"));
    mkdirSync(join(outside, "1"));
    writeFileSync(join(outside, "1", "model.onnx"), "not a model");
    repo.settings("linkdir", { name: "linkdir", runtime: "onnx", versions: ["1"] });
    symlinkSync(join(outside, "1"), join(repo.dir, "linkdir", "1"));
    // A symlink that stays inside its model's folder is fine.
    repo.module("inside", "scale.ts", { runtime: "./link.ts" });
    symlinkSync("scale.ts", join(repo.dir, "inside", "link.ts"));
    server = await serveRepository(repo.dir, ["--workers", "1"], { TEST_API_KEY: SECRET });
    url = server.url;
  });
  after(async () => {
    await server?.stop();
    repo.remove();
    rmSync(outside, { recursive: true, force: true });
  });

  test("load and unload are 403, saying how to enable them; the models stay loaded", async () => {
    for (const action of ["load", "unload"]) {
      assertError(await post(`${url}/v2/repository/models/scale/${action}`, ""), 403, "forbidden: model control is off; start the server with --model-control explicit to load and unload models");
    }
    // A token does not open them either: there is none to give.
    assertError(await post(`${url}/v2/repository/models/scale/unload`, "", { authorization: "Bearer anything" }), 403, /--model-control explicit/);
    await assertServing(url, "scale");
  });

  test("the repository's models loaded at start; index, metadata, config and stats stay readable", async () => {
    const entries = await index(url);
    for (const name of ["scale", "secret", "inside"]) assert.equal(entries.get(name)?.state, "READY", name);
    assert.equal((await send(`${url}/v2/models/scale`)).status, 200);
    assert.equal((await send(`${url}/v2/models/scale/config`)).json.parameters.factor, 2);
    assert.equal((await send(`${url}/v2/models/scale/stats`)).status, 200);
    assert.equal((await send(`${url}/v2/health/ready`)).status, 200, "the models that cannot load do not hold readiness back");
  });

  test("settings naming files outside the model's folder make it UNAVAILABLE, with a reason", async () => {
    const entries = await index(url);
    const reason = (name: string) => {
      const entry = entries.get(name);
      assert.equal(entry?.state, "UNAVAILABLE", `${name}: ${JSON.stringify(entry)}`);
      return entry!.reason;
    };
    assert.match(reason("up"), /up\/model-settings\.json: versions: '\.\.' is outside the model folder /);
    assert.match(reason("parent"), /parent\/model-settings\.json: file: '\.\.\/x\.onnx' is outside the model folder /);
    assert.match(reason("absolute"), /absolute\/model-settings\.json: runtime: '\/.*scale\.ts' is outside the model folder /);
    assert.match(reason("linked"), /linked\/model-settings\.json: runtime: '\.\/scale\.ts' is outside the model folder /);
    assert.match(reason("linkdir"), /linkdir\/model-settings\.json: versions: '1' is outside the model folder /);
    for (const name of ["up", "parent", "absolute", "linked", "linkdir"]) assertError(await send(`${url}/v2/models/${name}`), 404, `not found: model '${name}'`);
  });

  test("a parameter read from the environment reaches the model", async () => {
    const reply = await post(`${url}/v2/models/secret/infer`, { inputs: [X] });
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.json.outputs[0].data, [SECRET.length]);
  });

  test("config shows the reference to the environment variable, never its value", async () => {
    const config = await send(`${url}/v2/models/secret/config`);
    assert.equal(config.status, 200);
    assert.deepEqual(config.json.parameters, { apiKey: { env: "TEST_API_KEY" }, visible: "shown" });
    for (const path of ["/v2/models/secret/config", "/v2/models/secret", "/v2/models/secret/stats", "/v2/models/stats"]) {
      assert.doesNotMatch((await send(`${url}${path}`)).text, new RegExp(SECRET), path);
    }
    assert.doesNotMatch(JSON.stringify([...(await index(url)).values()]), new RegExp(SECRET));
    assert.doesNotMatch(server.stdout + server.stderr, new RegExp(SECRET), "the log shows the secret");
  });

  test("a variable that is not set makes the model UNAVAILABLE, naming the variable", async () => {
    const entry = (await index(url)).get("missing");
    assert.equal(entry?.state, "UNAVAILABLE");
    assert.match(entry!.reason, /missing\/model-settings\.json: parameters\.apiKey: the environment variable TEST_MISSING_KEY is not set/);
  });
});

describe("model control 'explicit' with a token from a file and --cors-origins", () => {
  const repo = new ModelRepo();
  const secrets = mkdtempSync(join(tmpdir(), "shoal-token-"));
  const TOKEN = "file-token-0123456789";
  let server: ServerProcess;
  let url: string;

  before(async () => {
    repo.module("scale", "scale.ts", { parameters: { factor: 2 } });
    // As a mounted secret often is: with a line end.
    writeFileSync(join(secrets, "token"), `${TOKEN}\n`);
    server = await serveRepository(repo.dir, ["--workers", "1", "--model-control", "explicit", "--admin-token-file", join(secrets, "token"), "--cors-origins", `*,${ADMIN}`]);
    url = server.url;
  });
  after(async () => {
    await server?.stop();
    repo.remove();
    rmSync(secrets, { recursive: true, force: true });
  });

  test("a text/plain POST from another origin cannot unload a model: 403, and the model stays loaded", async () => {
    for (const authorization of [undefined, `Bearer ${TOKEN}`]) {
      const headers: Record<string, string> = { origin: EVIL, "content-type": "text/plain" };
      if (authorization !== undefined) headers.authorization = authorization;
      const { response } = rawRequest(server.port, "/v2/repository/models/scale/unload", { headers, body: "{}" });
      const reply = await response;
      assert.equal(reply.status, 403, reply.text);
      assert.deepEqual(JSON.parse(reply.text), { error: `forbidden: origin '${EVIL}' may not load or unload models; list it in --cors-origins` });
      assert.equal(reply.headers["access-control-allow-origin"], undefined, "'*' gives control paths no CORS");
    }
    await assertServing(url, "scale");
    assert.equal((await index(url)).get("scale")?.state, "READY");
  });

  test("without the token, or with a wrong one: 401 with WWW-Authenticate; with it: 200", async () => {
    const unload = `${url}/v2/repository/models/scale/unload`;
    for (const headers of [{}, { authorization: "Bearer wrong" }, { authorization: TOKEN }, { authorization: `Bearer ${TOKEN}x` }] as Record<string, string>[]) {
      const reply = await post(unload, "", headers);
      assertError(reply, 401, /^unauthorized: /);
      assert.match(reply.headers.get("www-authenticate") ?? "", /^Bearer\b/);
    }
    await assertServing(url, "scale");
    assert.equal((await post(unload, "", { authorization: `Bearer ${TOKEN}` })).status, 200);
    assertError(await send(`${url}/v2/models/scale/ready`), 404, "not found: model 'scale'");
    const load = await post(`${url}/v2/repository/models/scale/load`, "", { authorization: `Bearer ${TOKEN}` });
    assert.equal(load.status, 200, load.text);
    await assertServing(url, "scale");
  });

  test("an origin listed by name may load, with the token, and reads the answer", async () => {
    const reply = await post(`${url}/v2/repository/models/scale/load`, "", { origin: ADMIN, authorization: `Bearer ${TOKEN}` });
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.headers.get("access-control-allow-origin"), ADMIN);
    assertError(await post(`${url}/v2/repository/models/scale/load`, "", { origin: ADMIN }), 401, /^unauthorized: /);
    const allowed = await preflight(url, "/v2/repository/models/scale/load", ADMIN);
    assert.equal(allowed.status, 204);
    assert.equal(allowed.headers.get("access-control-allow-origin"), ADMIN);
  });

  test("'*' answers any origin's preflight and requests on the inference and readable routes", async () => {
    const allowed = await preflight(url, "/v2/models/scale/infer", EVIL);
    assert.equal(allowed.status, 204, allowed.text);
    assert.equal(allowed.headers.get("access-control-allow-origin"), EVIL);
    assert.match(allowed.headers.get("access-control-allow-headers") ?? "", /authorization/);
    const reply = await post(`${url}/v2/models/scale/infer`, { inputs: [X] }, { origin: EVIL });
    assert.equal(reply.status, 200);
    assert.equal(reply.headers.get("access-control-allow-origin"), EVIL);
    assert.match(reply.headers.get("access-control-expose-headers") ?? "", /inference-header-content-length/);
    assert.equal((await send(`${url}/v2/health/ready`, { headers: { origin: EVIL } })).headers.get("access-control-allow-origin"), EVIL);
  });

  test("a control preflight from an origin not listed by name is 403, with no CORS header", async () => {
    const refused = await preflight(url, "/v2/repository/models/scale/unload", EVIL);
    assertError(refused, 403, `forbidden: origin '${EVIL}' is not allowed; list it by name in --cors-origins`);
    assertNoCors(refused.headers, "the refused preflight");
  });

  test("paths outside the CORS routes answer no origin", async () => {
    assertNoCors((await send(`${url}/metrics`, { headers: { origin: EVIL } })).headers, "/metrics");
  });
});

describe("the switches given in code: new Server({ modelControl, adminToken, corsOrigins })", () => {
  let server: ServerProcess;

  before(async () => {
    server = await startServer(fixture("control-server.ts"));
  });
  after(async () => {
    await server?.stop();
  });

  test("control is open, behind the token", async () => {
    const unload = `${server.url}/v2/repository/models/upper/unload`;
    assertError(await post(unload, ""), 401, /^unauthorized: /);
    assert.equal((await post(unload, "", { authorization: "Bearer code-token" })).status, 200);
    assert.equal((await post(`${server.url}/v2/repository/models/upper/load`, "", { authorization: "Bearer code-token" })).status, 200);
    assert.equal((await send(`${server.url}/v2/models/upper/ready`)).status, 200);
  });

  test("the origin allowed gets CORS on a stage route; another gets a 403 preflight and no header", async () => {
    const allowed = await preflight(server.url, "/inference", APP);
    assert.equal(allowed.status, 204);
    assert.equal(allowed.headers.get("access-control-allow-origin"), APP);
    assert.equal(allowed.headers.get("vary"), "Origin");
    assert.ok(Number(allowed.headers.get("access-control-max-age")) > 0);
    const reply = await post(`${server.url}/inference`, { x: 2 }, { origin: APP });
    assert.equal(reply.json.y, 4);
    assert.equal(reply.headers.get("access-control-allow-origin"), APP);
    assert.match(reply.headers.get("access-control-expose-headers") ?? "", /x-request-id/);
    const refused = await preflight(server.url, "/inference", EVIL);
    assertError(refused, 403, `forbidden: origin '${EVIL}' is not allowed; list it in --cors-origins`);
    assertNoCors(refused.headers, "the refused preflight");
    const other = await post(`${server.url}/inference`, { x: 2 }, { origin: EVIL });
    assert.equal(other.status, 200, "CORS is the browser's guard: the server still answers");
    assertNoCors(other.headers, "a request from an origin not allowed");
    // The allowed origin is listed by name: a control request from it needs the token only.
    assertError(await post(`${server.url}/v2/repository/models/upper/load`, "", { origin: APP }), 401, /^unauthorized: /);
  });
});

describe("parameters read from the environment, without a server", () => {
  test("{\"env\": NAME} alone is a reference; anything else is a value", () => {
    const parameters = { key: { env: "K" }, plain: "v", object: { env: "K", other: 1 }, list: [{ env: "K" }] };
    assert.deepEqual(resolveParameters(parameters, "m", { K: "secret" }), { key: "secret", plain: "v", object: { env: "K", other: 1 }, list: [{ env: "K" }] });
    assert.deepEqual(resolveParameters({ key: { env: "K" } }, "m", { K: "" }), { key: "" }, "a variable set to nothing is set");
  });

  test("a variable not set is an error naming the parameter and the variable", () => {
    assert.throws(() => resolveParameters({ apiKey: { env: "NOPE" } }, "m/model-settings.json", {}), (err: unknown) => {
      assert.ok(err instanceof SettingsError);
      assert.equal(err.message, "m/model-settings.json: parameters.apiKey: the environment variable NOPE is not set");
      return true;
    });
  });

  test("a reference must name a variable", () => {
    for (const env of ["", "1A", "A-B", 3, null]) {
      assert.throws(() => parseSettings({ name: "m", runtime: "onnx", parameters: { key: { env } } }, "s"), /s: parameters\.key\.env: the name of an environment variable/, String(env));
    }
    assert.deepEqual(parseSettings({ name: "m", runtime: "onnx", parameters: { key: { env: "API_KEY_2" } } }, "s").parameters, { key: { env: "API_KEY_2" } });
  });
});
