/**
 * A closed-loop load of streaming generation requests, for the generate scenario: `connections`
 * clients each send a request, read its Server-Sent Events to the end, and send the next. Each
 * request asks for a length drawn from a seeded log-uniform mix, so every contender gets the same
 * sequence of lengths. Records, per request, the time to its first chunk and its chunks.
 */
import { Agent, request } from "node:http";
import { Random } from "../../test/fuzz/random.js";

export interface StreamPoint {
  /** Requests completed within the window. */
  requests: number;
  /** Chunks (tokens) received within the window, from requests completed in it or not. */
  tokens: number;
  /** Time to first chunk of each request completed in the window, in ms. */
  ttft: number[];
  /** Whole-request time of each, in ms. */
  latency: number[];
  /** Requests that failed (a status other than 200, or a broken stream). */
  errors: number;
  seconds: number;
}

/** Generation lengths, in tokens: log-uniform between `min` and `max`. */
export function lengths(seed: number, min: number, max: number): () => number {
  const random = new Random(seed);
  return () => Math.round(Math.exp(Math.log(min) + random.next() * (Math.log(max) - Math.log(min))));
}

/**
 * Runs the load for `warmupSec`, then measures for `seconds`. `body(length)` makes a request
 * body asking for `length` tokens.
 */
export async function streamLoad(port: number, path: string, connections: number, warmupSec: number, seconds: number, next: () => number, body: (length: number) => string): Promise<StreamPoint> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  let measuring = false;
  let stopping = false;
  const point: StreamPoint = { requests: 0, tokens: 0, ttft: [], latency: [], errors: 0, seconds };
  const one = (length: number) =>
    new Promise<void>((resolve) => {
      const started = performance.now();
      let first = 0;
      const payload = body(length);
      const req = request({ host: "127.0.0.1", port, path, method: "POST", agent, headers: { "content-type": "application/json", accept: "text/event-stream", "content-length": Buffer.byteLength(payload) } }, (res) => {
        let tail = "";
        res.setEncoding("utf8");
        res.on("data", (text: string) => {
          first ||= performance.now();
          // Events end with a blank line; count those that complete in this read.
          const events = (tail + text).split("\n\n");
          tail = events.pop()!;
          if (measuring) point.tokens += events.filter((e) => e.startsWith("data: ")).length;
        });
        res.on("end", () => {
          if (measuring) {
            if (res.statusCode === 200 && first > 0) {
              point.requests++;
              point.ttft.push(first - started);
              point.latency.push(performance.now() - started);
            } else point.errors++;
          }
          resolve();
        });
        res.on("error", () => {
          if (measuring) point.errors++;
          resolve();
        });
      });
      req.on("error", () => {
        if (measuring) point.errors++;
        resolve();
      });
      req.end(payload);
    });
  const client = async () => {
    while (!stopping) await one(next());
  };
  const clients = Array.from({ length: connections }, client);
  await sleep(warmupSec * 1000);
  measuring = true;
  await sleep(seconds * 1000);
  measuring = false;
  stopping = true;
  await Promise.all(clients);
  agent.destroy();
  return point;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
