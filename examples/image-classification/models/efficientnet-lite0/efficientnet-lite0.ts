/**
 * EfficientNet-Lite0 as a V2 model, on image tensors a client prepared: input `image`, either
 * FP32 [N, 3, 224, 224] (planar RGB, already normalised as the model takes it) or UINT8
 * [N, 224, 224, 3] (interleaved RGB bytes, normalised here). Outputs `probs` FP32 [N, 1000] and
 * `label` BYTES [N], each image's most likely class. The images of all the requests of a batch
 * run together.
 */
import { ModelWorker, ValidationError, type ModelInput, type ModelOutput } from "shoal";
import type { InferenceSession, Tensor } from "onnxruntime-node";
import { IMAGE_ELEMENTS, SIDE, modelFiles, normalise, readLabels, topK } from "../../imagenet.js";

const encoder = new TextEncoder();

export default class EfficientNetLite0 extends ModelWorker {
  static override batched = true;
  #session!: InferenceSession;
  #Tensor!: typeof Tensor;
  #labels: string[] = [];

  override async init(): Promise<void> {
    const ort = await import("onnxruntime-node");
    this.#Tensor = ort.Tensor;
    this.#session = await ort.InferenceSession.create(modelFiles().model, { intraOpNumThreads: 1, interOpNumThreads: 1 });
    this.#labels = readLabels();
  }

  override async forward(requests: ModelInput[]): Promise<(ModelOutput | Error)[]> {
    const images = requests.map((r) => {
      try {
        return imagesOf(r);
      } catch (err) {
        return err as Error;
      }
    });
    const total = images.reduce((n, x) => n + (x instanceof Error ? 0 : x.count), 0);
    if (total === 0) return images as Error[];
    const batch = new Float32Array(total * IMAGE_ELEMENTS);
    let at = 0;
    for (const x of images) {
      if (x instanceof Error) continue;
      if (x.data instanceof Float32Array) batch.set(x.data, at);
      else normalise(x.data, x.count, batch, at);
      at += x.count * IMAGE_ELEMENTS;
    }
    const input = new this.#Tensor("float32", batch, [total, 3, SIDE, SIDE]);
    const probs = (await this.#session.run({ input })).probs!.data as Float32Array;
    let row = 0;
    return images.map((x) => {
      if (x instanceof Error) return x;
      const mine = probs.slice(row * 1000, (row += x.count) * 1000);
      const labels = Array.from({ length: x.count }, (_, i) => encoder.encode(topK(mine.subarray(i * 1000, (i + 1) * 1000), 1, this.#labels)[0]!.label));
      return { probs: { datatype: "FP32", shape: [x.count, 1000], data: mine }, label: { datatype: "BYTES", shape: [x.count], data: labels } };
    });
  }
}

// The request's images: FP32 [N, 3, 224, 224] or UINT8 [N, 224, 224, 3].
function imagesOf({ inputs }: ModelInput): { count: number; data: Float32Array | Uint8Array } {
  const names = Object.keys(inputs);
  const image = inputs.image;
  if (image === undefined || names.length !== 1) throw new ValidationError(`expected one input 'image'; got ${names.map((n) => `'${n}'`).join(", ") || "none"}`);
  const { datatype, shape, data } = image;
  const [n, ...rest] = shape;
  if (datatype === "FP32" && shape.length === 4 && rest.join() === `3,${SIDE},${SIDE}`) return { count: n!, data: data as Float32Array };
  if (datatype === "UINT8" && shape.length === 4 && rest.join() === `${SIDE},${SIDE},3`) return { count: n!, data: data as Uint8Array };
  throw new ValidationError(`input 'image' must be FP32 [N, 3, ${SIDE}, ${SIDE}] (normalised) or UINT8 [N, ${SIDE}, ${SIDE}, 3] (RGB); got ${datatype} [${shape.join(", ")}]`);
}
