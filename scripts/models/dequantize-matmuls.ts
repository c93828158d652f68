/**
 * Rewrites a dynamically quantised ONNX graph (onnxruntime's `quantize_dynamic`) so that its
 * matrix products run in float32 on dequantised weights. Dynamic quantisation picks one scale for
 * a whole activation tensor, every row of a batch together, so in the int8 graph a text's vector
 * depends on the texts it shares a run with (by up to 0.02 a component here); in the rewritten
 * graph each row is computed from its own values only, so a batch gives what each text gives
 * alone. The weights keep their int8 values (times their scales): the model is the same one.
 *
 * The pattern rewritten, for each `MatMulInteger(Xq, Wq, Xzp, Wzp)` whose `Xq` comes from
 * `DynamicQuantizeLinear(X)`: its output goes through `Cast` to float and `Mul` by
 * `Mul(Xscale, Wscale)`. It becomes `MatMul(X, (Wq - Wzp) * Wscale)`, the `Cast` and the outer
 * `Mul` pass their input on, and what no longer has a consumer is dropped.
 */
import onnxProto from "onnx-proto";

const { onnx } = onnxProto;
const T = onnx.TensorProto.DataType;
type Node = onnxProto.onnx.INodeProto;
type TensorProto = onnxProto.onnx.ITensorProto;

const dims = (t: TensorProto) => (t.dims ?? []).map(Number);

// An int8 or uint8 initializer's values, from raw bytes or the int32 list protobuf may use.
function integers(t: TensorProto): Int32Array {
  const n = dims(t).reduce((a, b) => a * b, 1);
  const out = new Int32Array(n);
  const raw = t.rawData;
  if (raw !== undefined && raw !== null && raw.length > 0) {
    for (let i = 0; i < n; i++) out[i] = t.dataType === T.INT8 ? (raw[i]! << 24) >> 24 : raw[i]!;
  } else {
    for (let i = 0; i < n; i++) out[i] = t.int32Data![i]!;
  }
  return out;
}

function floats(t: TensorProto): Float32Array {
  const raw = t.rawData;
  if (raw !== undefined && raw !== null && raw.length > 0) return new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
  return Float32Array.from(t.floatData!);
}

/** The graph in `model` with every dynamically quantised MatMul in float32; throws when the graph has another shape. */
export function dequantizeMatMuls(model: Uint8Array): Uint8Array {
  const m = onnx.ModelProto.decode(model);
  const g = m.graph!;
  const nodes = g.node!;
  const init = new Map(g.initializer!.map((t) => [t.name!, t]));
  const producer = new Map<string, Node>();
  const consumers = new Map<string, Node[]>();
  for (const n of nodes) {
    for (const o of n.output!) producer.set(o, n);
    for (const i of n.input!) consumers.set(i, [...(consumers.get(i) ?? []), n]);
  }
  const only = (name: string, op: string): Node => {
    const c = consumers.get(name) ?? [];
    if (c.length !== 1 || c[0]!.opType !== op) throw new Error(`dequantize: ${name} should go to one ${op}, not ${c.map((n) => n.opType).join(", ") || "nothing"}`);
    return c[0]!;
  };
  for (const n of nodes.filter((x) => x.opType === "MatMulInteger")) {
    const [xq, wq, , wzp] = n.input!;
    const quantize = producer.get(xq!);
    if (quantize?.opType !== "DynamicQuantizeLinear") throw new Error(`dequantize: ${n.name}'s input ${xq} is not dynamically quantised`);
    const w = init.get(wq!);
    const zp = init.get(wzp!);
    const cast = only(n.output![0]!, "Cast");
    const scaled = only(cast.output![0]!, "Mul");
    const scales = producer.get(scaled.input!.find((i) => i !== cast.output![0])!);
    const wScale = init.get(scales?.input?.find((i) => i !== quantize.output![1]) ?? "");
    if (w === undefined || zp === undefined || scales?.opType !== "Mul" || wScale === undefined) throw new Error(`dequantize: ${n.name} has no constant weights, zero point and scale`);
    const [rows, cols] = dims(w) as [number, number];
    const q = integers(w);
    const z = integers(zp);
    const s = floats(wScale);
    const perColumn = (v: ArrayLike<number>, j: number) => (v.length === 1 ? v[0]! : v[j]!);
    const values = new Float32Array(rows * cols);
    for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) values[i * cols + j] = (q[i * cols + j]! - perColumn(z, j)) * perColumn(s, j);
    const name = `${wq}_dequantized`;
    g.initializer!.push({ name, dims: [rows, cols], dataType: T.FLOAT, rawData: new Uint8Array(values.buffer) });
    n.opType = "MatMul";
    n.input = [quantize.input![0]!, name];
    cast.opType = "Identity";
    cast.attribute = [];
    scaled.opType = "Identity";
    scaled.input = [cast.output![0]!];
  }
  // Drop what nothing reads any more (the quantisers, the scale products, the int8 weights).
  const outputs = new Set(g.output!.map((o) => o.name!));
  for (let changed = true; changed; ) {
    const read = new Set(g.node!.flatMap((n) => n.input!));
    const kept = g.node!.filter((n) => n.output!.some((o) => read.has(o) || outputs.has(o)));
    changed = kept.length !== g.node!.length;
    g.node = kept;
  }
  const read = new Set(g.node!.flatMap((n) => n.input!));
  g.initializer = g.initializer!.filter((t) => read.has(t.name!));
  // Types recorded for the int32 products would now be wrong; the runtime infers them again.
  g.valueInfo = [];
  return onnx.ModelProto.encode(m).finish();
}
