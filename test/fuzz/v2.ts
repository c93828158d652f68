/**
 * V2 inference bodies for the fuzz, JSON and binary: requests the repository's models take,
 * then bent: shapes that do not match the data (or ask for billions of elements), other
 * datatypes, strings where numbers go, binary sizes and `Inference-Header-Content-Length`
 * values that lie, BYTES elements whose lengths lie, unknown inputs and outputs.
 */
import { perturb, randomJson, RawNumber, writeJson, type Json } from "./json.js";
import type { Random } from "./random.js";

/** The input of a model of the fuzz server's repository. */
export interface ModelInputSpec {
  name: string;
  datatype: "FP32" | "BYTES";
  /** The fixed dimensions after the batch one. */
  inner: number[];
}

/** The V2 models as the fuzz knows them: mlp takes FP32 [N, 4], upper BYTES [N], pipeline (a route) FP32 [1]. */
export const FUZZ_MODELS: Record<string, ModelInputSpec> = {
  mlp: { name: "input", datatype: "FP32", inner: [4] },
  upper: { name: "text", datatype: "BYTES", inner: [] },
  // The route /fuzz/pipeline served as a V2 model: `n`, one number.
  pipeline: { name: "n", datatype: "FP32", inner: [] },
};

const DATATYPES: readonly Json[] = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES", "BF16", "fp32", "", 5, null, "FP32 "];
const ODD_DIMS: readonly Json[] = [-1, 0, -5, 1.5, 2 ** 31, 2 ** 32 + 4, 1e9, 2 ** 53, "4", null, new RawNumber("1e400"), new RawNumber("99999999999999999999")];

/** An inference body, its content-type, and the header-length header if it has one. */
export interface V2Body {
  body: Uint8Array;
  contentType: string;
  /** The `Inference-Header-Content-Length` value to send, or undefined for none. */
  headerLength: string | undefined;
}

const utf8 = new TextEncoder();

// A tensor's elements: numbers for FP32, strings for BYTES.
function elements(r: Random, spec: ModelInputSpec, count: number): Json[] {
  if (spec.datatype === "BYTES") return Array.from({ length: count }, () => r.string(r.skewed(0, 20), "abc xyzé日"));
  return Array.from({ length: count }, () => Math.round((r.next() - 0.5) * 2000) / 100);
}

// The BYTES elements' binary form: each a 4-byte little-endian length, then its bytes.
function framedBytes(r: Random, items: readonly string[], lie: boolean): Uint8Array {
  const parts = items.map((s) => utf8.encode(s));
  const out = new Uint8Array(parts.reduce((n, p) => n + 4 + p.length, 0));
  const view = new DataView(out.buffer);
  let at = 0;
  for (const p of parts) {
    view.setUint32(at, lie && r.chance(0.5) ? r.pick([0xffffffff, p.length + 1, 0x7fffffff]) : p.length, true);
    out.set(p, at + 4);
    at += 4 + p.length;
  }
  return out;
}

/** A V2 inference body for `model` (a name of {@link FUZZ_MODELS}, or any other). */
export function v2Body(r: Random, model: string, binary: boolean): V2Body {
  const spec = Object.hasOwn(FUZZ_MODELS, model) ? FUZZ_MODELS[model]! : FUZZ_MODELS[r.pick(Object.keys(FUZZ_MODELS))]!;
  const rows = r.chance(0.02) ? r.int(500, 3000) : r.skewed(1, 16);
  let shape: Json[] = [rows, ...spec.inner];
  const count = rows * spec.inner.reduce((a, b) => a * b, 1);
  let data: Json[] = elements(r, spec, count);
  const bend = r.chance(0.5);
  const tensor: { [key: string]: Json } = { name: spec.name, datatype: spec.datatype, shape, data };
  if (bend) {
    for (let n = r.int(1, 3); n > 0; n--) {
      switch (r.int(0, 7)) {
        case 0:
          shape = Array.from({ length: r.int(0, 5) }, () => (r.chance(0.5) ? r.pick(ODD_DIMS) : r.int(0, 8)));
          tensor.shape = shape;
          break;
        case 1:
          tensor.datatype = r.pick(DATATYPES);
          break;
        case 2:
          data = data.map((x) => (r.chance(0.3) ? r.pick<Json>(["NaN", "inf", "-Infinity", new RawNumber("1e400"), null, true, [1, 2], {}, "1", -0]) : x));
          tensor.data = data;
          break;
        case 3:
          data = data.slice(0, r.int(0, data.length));
          tensor.data = data;
          break;
        case 4:
          // Nested rows instead of a flat list: right, or ragged.
          tensor.data = Array.from({ length: rows }, (_, i) => data.slice(i * (count / rows), (i + 1) * (count / rows) + (r.chance(0.2) ? 1 : 0)));
          break;
        case 5:
          tensor.name = r.pick<Json>(["x", "", "INPUT", null, 7, "input ", "__proto__"]);
          break;
        case 6:
          tensor.parameters = r.chance(0.5) ? { binary_data_size: r.pick<Json>([-1, 0, 1e12, "8", 1.5, null]) } : randomJson(r, 2);
          break;
        default:
          tensor.data = randomJson(r, 3);
      }
    }
  }
  // Now and then more elements than any limit on BYTES elements allows, each tiny.
  if (r.chance(0.004)) tensor.data = Array.from({ length: r.pick([70_000, 200_000]) }, () => (spec.datatype === "BYTES" ? "" : 0));
  const request: { [key: string]: Json } = { inputs: [tensor] };
  if (r.chance(0.3)) request.id = r.chance(0.8) ? r.string(r.int(0, 12), "abc123-") : randomJson(r, 1);
  if (r.chance(0.2)) request.parameters = r.chance(0.5) ? { binary_data_output: r.pick<Json>([true, false, "true", 1]) } : randomJson(r, 2);
  if (r.chance(0.2)) request.outputs = r.pick<Json>([[{ name: "output" }], [{ name: "upper", parameters: { binary_data: true } }], [{ name: "nope" }], [], "output", [{}], [{ name: "output" }, { name: "output" }]]);
  if (r.chance(0.05)) request.inputs = r.pick<Json>([[], null, {}, [tensor, tensor], [tensor, { name: "extra", datatype: "FP32", shape: [1], data: [1] }]]);
  const doc = r.chance(0.1) ? perturb(r, request) : request;

  if (!binary) return { body: utf8.encode(writeJson(r, doc)), contentType: r.pick(["application/json", "application/json", "text/plain", "application/octet-stream"]), headerLength: undefined };

  // Binary: the tensor's data leaves the JSON and follows it, its size in binary_data_size.
  let part: Uint8Array;
  if (spec.datatype === "BYTES") part = framedBytes(r, (Array.isArray(data) ? data : []).map((x) => (typeof x === "string" ? x : String(x))), bend && r.chance(0.3));
  else part = new Uint8Array(Float32Array.from((Array.isArray(data) ? data : []).map((x) => (typeof x === "number" ? x : NaN))).buffer);
  if (bend && r.chance(0.3)) part = part.subarray(0, r.int(0, part.length));
  delete tensor.data;
  const declared = bend && r.chance(0.3) ? r.pick<Json>([part.length + 1, part.length - 1, 0, -4, 2 ** 40, "12"]) : part.length;
  tensor.parameters = { ...(typeof tensor.parameters === "object" && tensor.parameters !== null && !Array.isArray(tensor.parameters) ? tensor.parameters : {}), binary_data_size: declared };
  const header = utf8.encode(writeJson(r, doc === request ? request : perturb(r, request, 0.05)));
  const body = new Uint8Array(header.length + part.length);
  body.set(header);
  body.set(part, header.length);
  const headerLength = r.weighted<string | undefined>([
    [12, String(header.length)],
    [1, undefined],
    [1, String(header.length + r.int(1, 10))],
    [1, String(Math.max(0, header.length - r.int(1, 10)))],
    [1, r.pick(["-1", "0", "99999999999999999999", "1e3", "0x10", " 12 ", "", "abc", "NaN", String(body.length + 1), String(2 ** 53)])],
  ]);
  return { body, contentType: r.pick(["application/octet-stream", "application/octet-stream", "application/json", "application/vnd.sagemaker-triton.binary+json"]), headerLength };
}
