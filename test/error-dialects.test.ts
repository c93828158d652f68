/**
 * The error table's two ways of putting an error (pure, no server): Shoal's words, and MLServer's
 * for the models in its format; and an error's wire form with a status a runtime chose.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ShoalError, codeOfStatus, errorFromWire } from "../src/errors.js";

describe("error dialects", () => {
  test("MLServer's text is the message alone, the table's prefix when there is none; Shoal's has the prefix", () => {
    const error = new ShoalError("BAD_REQUEST", "something really bad happened");
    assert.equal(error.textIn("shoal"), "bad request: something really bad happened");
    assert.equal(error.textIn("mlserver"), "something really bad happened");
    assert.equal(new ShoalError("QUEUE_FULL").textIn("mlserver"), "too many requests");
  });

  test("MLServer's gRPC codes: a 422 is FAILED_PRECONDITION; 400, 404 and 500 as the table's; other statuses keep the table's", () => {
    const codes = (code: ConstructorParameters<typeof ShoalError>[0]) => [new ShoalError(code).grpcIn("shoal"), new ShoalError(code).grpcIn("mlserver")];
    assert.deepEqual(codes("VALIDATION"), ["INVALID_ARGUMENT", "FAILED_PRECONDITION"]);
    assert.deepEqual(codes("BAD_REQUEST"), ["INVALID_ARGUMENT", "INVALID_ARGUMENT"]);
    assert.deepEqual(codes("NOT_FOUND"), ["NOT_FOUND", "NOT_FOUND"]);
    assert.deepEqual(codes("INTERNAL"), ["INTERNAL", "INTERNAL"]);
    assert.deepEqual(codes("QUEUE_FULL"), ["RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED"]);
  });

  test("a status a runtime chose is the table's first row of it, SERVER for one the table has not", () => {
    assert.deepEqual([400, 403, 404, 422, 503, 418].map(codeOfStatus), ["BAD_REQUEST", "FORBIDDEN", "NOT_FOUND", "VALIDATION", "SHUTTING_DOWN", "SERVER"]);
    const error = errorFromWire({ code: "SERVER", message: "no", status: 403 });
    assert.deepEqual([error.status, error.code, error.message], [403, "FORBIDDEN", "no"]);
    assert.equal(errorFromWire({ code: "BAD_REQUEST", message: "x" }).code, "BAD_REQUEST");
    const refused = errorFromWire({ code: "VALIDATION", message: "bad", detail: [{ msg: "Input should be ..." }] });
    assert.deepEqual(refused.detail, [{ msg: "Input should be ..." }]);
  });
});
