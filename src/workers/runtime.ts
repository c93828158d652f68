import { errorToWire, type WireError } from "../errors.js";
import type { RequestMeta, Worker, WorkerClass } from "../worker.js";
import type { BatchMessage, ItemResult, ResultMessage, WorkerBoot } from "./messages.js";
import { transferablesOf } from "./transfer.js";

/** A result message and the buffers it moves. */
export interface Outgoing {
  message: ResultMessage;
  transfer: ArrayBuffer[];
}

/**
 * The worker side of a stage, whatever the channel: builds the user's Worker, then runs each
 * batch as decode (first stage) → forward → encode (last stage), keeping failures per item.
 */
export class WorkerRuntime {
  private constructor(
    readonly worker: Worker,
    readonly boot: WorkerBoot,
  ) {}

  /** Constructs the Worker, sets its identity and runs its `init()`. */
  static async start(cls: WorkerClass, boot: WorkerBoot): Promise<WorkerRuntime> {
    const worker = new cls();
    worker.workerId = boot.workerId;
    worker.stage = boot.stageName;
    worker.maxBatchSize = boot.maxBatchSize;
    await worker.init();
    return new WorkerRuntime(worker, boot);
  }

  async run(batch: BatchMessage): Promise<Outgoing> {
    const { items, seq } = batch;
    const results: ItemResult[] = new Array(items.length);
    const inputs: unknown[] = [];
    const metas: RequestMeta[] = [];
    const positions: number[] = [];
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      if (item.ingress) {
        try {
          inputs.push(this.worker.decode(item.payload as Uint8Array));
        } catch (err) {
          results[i] = { ok: false, error: errorToWire(err, "DECODING") };
          continue;
        }
      } else {
        inputs.push(item.payload);
      }
      metas.push(item.meta);
      positions.push(i);
    }
    const transfer = new Set<ArrayBuffer>();
    if (inputs.length > 0) {
      let outputs: unknown[];
      try {
        outputs = await this.#forward(inputs, metas);
      } catch (err) {
        return { message: { kind: "result", seq, error: errorToWire(err) }, transfer: [] };
      }
      if (!Array.isArray(outputs) || outputs.length !== inputs.length) {
        const got = Array.isArray(outputs) ? `an array of ${outputs.length}` : typeof outputs;
        const error: WireError = {
          code: "INTERNAL",
          message: "",
          stack: `${this.boot.stageName} worker ${this.boot.workerId}: forward() returned ${got} for a batch of ${inputs.length}; it must return one result per item, in order`,
        };
        return { message: { kind: "result", seq, error }, transfer: [] };
      }
      for (let j = 0; j < outputs.length; j++) {
        const at = positions[j]!;
        results[at] = this.#finish(outputs[j], items[at]!.egress, transfer);
      }
    }
    return { message: { kind: "result", seq, results }, transfer: [...transfer] };
  }

  #forward(inputs: unknown[], metas: RequestMeta[]): Promise<unknown[]> | unknown[] {
    if (this.boot.maxBatchSize > 1) return Promise.resolve(this.worker.forward(inputs, metas)) as Promise<unknown[]>;
    return Promise.resolve(this.worker.forward(inputs[0], metas[0])).then((out) => [out]);
  }

  #finish(output: unknown, egress: boolean, transfer: Set<ArrayBuffer>): ItemResult {
    if (output instanceof Error) return { ok: false, error: errorToWire(output) };
    if (!egress) {
      const own = transferablesOf(output);
      for (const buffer of own) transfer.add(buffer);
      return own.size > 0 ? { ok: true, value: output, transfer: [...own] } : { ok: true, value: output };
    }
    try {
      const body = exclusive(this.worker.encode(output));
      if (body.byteLength > 0) transfer.add(body.buffer as ArrayBuffer);
      return { ok: true, value: body };
    } catch (err) {
      return { ok: false, error: errorToWire(err, "ENCODING") };
    }
  }
}

// Response bytes move to the coordinator. A view into a larger buffer (a socket chunk, an
// encoder's scratch space) is first copied to a buffer of its own, since cloning the view would
// copy the whole buffer behind it.
function exclusive(body: Uint8Array): Uint8Array {
  if (!(body instanceof Uint8Array)) throw new TypeError(`encode() must return a Uint8Array, not ${typeof body}`);
  if (body.byteOffset === 0 && body.byteLength === body.buffer.byteLength && body.buffer instanceof ArrayBuffer) return body;
  return Uint8Array.prototype.slice.call(body);
}
