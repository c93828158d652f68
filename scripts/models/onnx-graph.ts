/**
 * A small builder of ONNX graphs for the converters: initializers from typed arrays, nodes with
 * their attributes, and the encoded model. Names are the caller's; the builder only numbers nodes.
 */
import onnxProto from "onnx-proto";

const { onnx } = onnxProto;
const T = onnx.TensorProto.DataType;
const A = onnx.AttributeProto.AttributeType;

/** An attribute value: a string, a list of integers, an integer or a float. */
export type AttributeValue = string | number[] | number;

/** A dimension of a graph input or output: a size, or a name for a dynamic one. */
export type Dim = number | string;

/** Element types the converters use. */
export type ElementType = "float32" | "int64" | "int32";

const ELEMENT: Record<ElementType, number> = { float32: T.FLOAT, int64: T.INT64, int32: T.INT32 };

// A float attribute the caller means (1e-3) must not be taken for an integer one: only whole
// numbers are INT, and the converters write whole-number floats nowhere.
function attribute(name: string, value: AttributeValue): onnxProto.onnx.IAttributeProto {
  if (typeof value === "string") return { name, type: A.STRING, s: new TextEncoder().encode(value) };
  if (Array.isArray(value)) return { name, type: A.INTS, ints: value };
  return Number.isInteger(value) ? { name, type: A.INT, i: value } : { name, type: A.FLOAT, f: value };
}

function valueInfo(name: string, type: ElementType, dims: readonly Dim[]): onnxProto.onnx.IValueInfoProto {
  const dim = dims.map((d) => (typeof d === "string" ? { dimParam: d } : { dimValue: d }));
  return { name, type: { tensorType: { elemType: ELEMENT[type], shape: { dim } } } };
}

/** Collects a graph's initializers and nodes, in the order they are added, and encodes the model. */
export class GraphBuilder {
  readonly #initializers: onnxProto.onnx.ITensorProto[] = [];
  readonly #nodes: onnxProto.onnx.INodeProto[] = [];

  /** A float32 constant, copied from `values`. */
  f32(name: string, dims: readonly number[], values: ArrayLike<number>): string {
    const data = Float32Array.from(values);
    this.#initializers.push({ name, dims: [...dims], dataType: T.FLOAT, rawData: new Uint8Array(data.buffer) });
    return name;
  }

  /** An int64 constant. */
  i64(name: string, dims: readonly number[], values: readonly number[]): string {
    const data = BigInt64Array.from(values, (v) => BigInt(v));
    this.#initializers.push({ name, dims: [...dims], dataType: T.INT64, rawData: new Uint8Array(data.buffer) });
    return name;
  }

  /** Adds a node and returns the name of its first output. */
  node(op: string, inputs: readonly string[], outputs: readonly string[], attributes: Record<string, AttributeValue> = {}): string {
    const attribute_ = Object.entries(attributes).map(([k, v]) => attribute(k, v));
    this.#nodes.push({ opType: op, input: [...inputs], output: [...outputs], name: `${op}_${this.#nodes.length}`, attribute: attribute_ });
    return outputs[0]!;
  }

  /** The number of nodes so far. */
  get size(): number {
    return this.#nodes.length;
  }

  /** The model, encoded: opset 17, with the graph's inputs and outputs as given. */
  encode(graph: { name: string; producer: string; doc: string; inputs: [string, ElementType, Dim[]][]; outputs: [string, ElementType, Dim[]][] }): Uint8Array {
    const model = onnx.ModelProto.create({
      irVersion: 8,
      producerName: graph.producer,
      opsetImport: [{ domain: "", version: 17 }],
      docString: graph.doc,
      graph: {
        name: graph.name,
        node: this.#nodes,
        initializer: this.#initializers,
        input: graph.inputs.map(([n, t, d]) => valueInfo(n, t, d)),
        output: graph.outputs.map(([n, t, d]) => valueInfo(n, t, d)),
      },
    });
    return onnx.ModelProto.encode(model).finish();
  }
}
