/** The access decisions, without a server: control modes, the admin token, origins and CORS. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ShoalError } from "../src/errors.js";
import { AccessPolicy, type AccessConfig, type Refusal } from "../src/serving/access-policy.js";
import { corsHeaders, corsScope, isPreflight, preflight } from "../src/http/cors.js";
import type { DelegateParts } from "../src/http/intake.js";
import { V2Handler } from "../src/apis/v2/v2-handler.js";
import type { V2DataPlane } from "../src/serving/data-plane.js";

const ADMIN = "https://admin.example.com";
const APP = "https://app.example.com";
const EVIL = "https://evil.example.net";

function policy(config: Partial<AccessConfig> = {}): AccessPolicy {
  return new AccessPolicy({ modelControl: "explicit", adminToken: undefined, corsOrigins: [], ...config });
}

function refused(refusal: Refusal | undefined): { status: number; message: string; headers?: Record<string, string> } {
  assert.ok(refusal !== undefined, "refused");
  return { status: refusal.error.status, message: refusal.error.publicMessage, headers: refusal.headers };
}

function refusedPreflight(answer: Record<string, string> | ShoalError): ShoalError {
  assert.ok(answer instanceof ShoalError, `allowed: ${JSON.stringify(answer)}`);
  return answer;
}

describe("control requests", () => {
  test("model control 'none' refuses them with 403, saying how to open them, whatever the token", () => {
    const none = policy({ modelControl: "none", adminToken: "t0ken" });
    for (const authorization of [undefined, "Bearer t0ken"]) {
      const r = refused(none.control(undefined, authorization));
      assert.equal(r.status, 403);
      assert.match(r.message, /^forbidden: .*--model-control explicit/);
    }
  });

  test("'explicit' without a token lets a request without Origin through", () => {
    assert.equal(policy().control(undefined, undefined), undefined);
  });

  test("a token makes them need 'Authorization: Bearer <token>': 401 with WWW-Authenticate otherwise", () => {
    const p = policy({ adminToken: "t0ken" });
    for (const authorization of [undefined, "", "t0ken", "Basic dDBrZW4=", "Bearer t0ke", "Bearer t0ken2", "Bearer T0KEN", "Bearer t0ken extra", "Bearer"]) {
      const r = refused(p.control(undefined, authorization));
      assert.equal(r.status, 401, String(authorization));
      assert.match(r.headers?.["www-authenticate"] ?? "", /^Bearer\b/);
    }
    assert.match(refused(p.control(undefined, undefined)).message, /^unauthorized: this request needs 'Authorization: Bearer <admin token>'$/);
    assert.equal(refused(p.control(undefined, "Bearer nope")).message, "unauthorized: the admin token is not right");
    for (const authorization of ["Bearer t0ken", "bearer t0ken", "BEARER  t0ken "]) assert.equal(p.control(undefined, authorization), undefined, authorization);
  });

  test("the message never shows the token", () => {
    const p = policy({ adminToken: "s3cret-admin-token" });
    for (const authorization of [undefined, "Bearer s3cret-admin-toke"]) assert.doesNotMatch(JSON.stringify(p.control(undefined, authorization)), /s3cret/);
  });

  test("a request with an Origin is refused (403) unless that origin is listed by name; '*' does not open them", () => {
    const p = policy({ corsOrigins: ["*", ADMIN] });
    const r = refused(p.control(EVIL, undefined));
    assert.equal(r.status, 403);
    assert.equal(r.message, `forbidden: origin '${EVIL}' may not load or unload models; list it in --cors-origins`);
    assert.equal(refused(p.control("null", undefined)).status, 403);
    assert.equal(p.control(ADMIN, undefined), undefined);
    assert.equal(p.control("HTTPS://Admin.Example.com", undefined), undefined, "origins compare without case");
    assert.equal(refused(policy().control(ADMIN, undefined)).status, 403, "no origin is listed by default");
  });

  test("a listed origin still needs the token", () => {
    const p = policy({ adminToken: "t0ken", corsOrigins: [ADMIN] });
    assert.equal(refused(p.control(ADMIN, undefined)).status, 401);
    assert.equal(p.control(ADMIN, "Bearer t0ken"), undefined);
    assert.equal(refused(p.control(EVIL, "Bearer t0ken")).status, 403, "the token does not open an origin not listed");
  });
});

describe("CORS", () => {
  test("the scope of each path: control routes, open routes, and none", () => {
    // The V2 door says the scope of the paths under its prefix.
    const v2 = new V2Handler({} as V2DataPlane, {} as DelegateParts);
    assert.equal(corsScope("/v2/repository/models/mlp/load", false, v2), "control");
    assert.equal(corsScope("/v2/repository/models/mlp/unload", false, v2), "control");
    for (const path of ["/v2", "/v2/health/ready", "/v2/models/mlp", "/v2/models/mlp/versions/1/infer", "/v2/repository/index"]) {
      assert.equal(corsScope(path, false, v2), "open", path);
    }
    for (const path of ["/healthz", "/readyz"]) assert.equal(corsScope(path, false, undefined), "open", path);
    assert.equal(corsScope("/inference", true, undefined), "open");
    for (const path of ["/metrics", "/docs", "/openapi.json", "/", "/inference"]) assert.equal(corsScope(path, false, undefined), undefined, path);
  });

  test("no origin configured: no CORS headers at all", () => {
    assert.equal(corsHeaders(policy(), APP, "open"), undefined);
    assert.equal(corsHeaders(policy({ corsOrigins: [APP] }), APP, undefined), undefined);
  });

  test("an allowed origin gets itself back, the headers it may read, and Vary; another gets Vary alone", () => {
    const p = policy({ corsOrigins: [APP] });
    assert.deepEqual(corsHeaders(p, APP, "open"), {
      "access-control-allow-origin": APP,
      "access-control-expose-headers": "x-request-id, inference-header-content-length",
      vary: "Origin",
    });
    assert.deepEqual(corsHeaders(p, EVIL, "open"), { vary: "Origin" });
    assert.deepEqual(corsHeaders(p, undefined, "open"), { vary: "Origin" });
  });

  test("'*' allows any origin on open paths, never on control paths", () => {
    const p = policy({ corsOrigins: ["*"] });
    assert.equal(corsHeaders(p, EVIL, "open")?.["access-control-allow-origin"], EVIL);
    assert.deepEqual(corsHeaders(p, EVIL, "control"), { vary: "Origin" });
    assert.equal(refusedPreflight(preflight(p, EVIL, "control")).status, 403);
  });

  test("a preflight from an allowed origin: the methods, the headers (authorization included), max-age and Vary", () => {
    const answer = preflight(policy({ corsOrigins: [APP] }), APP, "open");
    assert.ok(!(answer instanceof ShoalError), answer.message);
    assert.equal(answer["access-control-allow-origin"], APP);
    assert.equal(answer["access-control-allow-methods"], "GET, HEAD, POST");
    const headers = answer["access-control-allow-headers"]!.split(", ");
    for (const name of ["content-type", "authorization", "x-request-id", "inference-header-content-length"]) assert.ok(headers.includes(name), name);
    assert.ok(Number(answer["access-control-max-age"]) > 0);
    assert.equal(answer.vary, "Origin");
  });

  test("a preflight from an origin not allowed is a 403", () => {
    const r = refusedPreflight(preflight(policy({ corsOrigins: [APP] }), EVIL, "open"));
    assert.equal(r.status, 403);
    assert.equal(r.publicMessage, `forbidden: origin '${EVIL}' is not allowed; list it in --cors-origins`);
  });

  test("a control path's preflight is answered for an origin listed by name", () => {
    assert.ok(!(preflight(policy({ corsOrigins: [ADMIN] }), ADMIN, "control") instanceof ShoalError));
  });

  test("a preflight is OPTIONS with an Origin and Access-Control-Request-Method", () => {
    assert.equal(isPreflight("OPTIONS", APP, "POST"), true);
    assert.equal(isPreflight("OPTIONS", undefined, "POST"), false);
    assert.equal(isPreflight("OPTIONS", APP, undefined), false);
    assert.equal(isPreflight("POST", APP, "POST"), false);
  });
});
