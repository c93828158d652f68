/**
 * Shoal side of the ocr scenario: the OCR example's four stages (examples/ocr/ocr-pipeline.ts),
 * with the recogniser's largest batch from `--recognise-batch` (default the example's; 1 reads
 * every text box alone, as a server that cannot batch across a request's fan-out does at best).
 *
 *   node --import tsx bench/servers/shoal-ocr.ts --recognise-batch 1 --port 8000 --address 127.0.0.1
 *
 * `--recognise-batch` is ours; every other flag is Shoal's.
 */
import { Server } from "shoal";
import { appendOcrPipeline, RECOGNISE_BATCH } from "../../examples/ocr/ocr-pipeline.js";
import { Recognise } from "../../examples/ocr/recognise.js";
import type { ReadBox, TextBox } from "../../examples/ocr/text-box.js";

/** The recogniser of one box at a time: a stage of batch size 1 hands its worker the item itself, and takes its one answer back (typed as the batch's). */
export class RecogniseEach extends Recognise {
  override async forward(box: TextBox | TextBox[]): Promise<ReadBox[]> {
    return Array.isArray(box) ? super.forward(box) : ((await super.forward([box]))[0] as unknown as ReadBox[]);
  }
}

const argv = process.argv.slice(2);
const at = argv.indexOf("--recognise-batch");
const recogniseBatch = at >= 0 ? Number(argv.splice(at, 2)[1]) : RECOGNISE_BATCH;
if (!Number.isInteger(recogniseBatch) || recogniseBatch < 1) {
  process.stderr.write("shoal-ocr: --recognise-batch must be a whole number >= 1\n");
  process.exit(2);
}

const server = new Server();
appendOcrPipeline(server, recogniseBatch === 1 ? { recogniser: RecogniseEach, recogniseBatch } : { recogniseBatch });
await server.run(argv);
