/**
 * Sends the fuzz's requests: most through a keep-alive `node:http` agent with a bounded number of
 * sockets, the raw ones on connections of their own, and records what came back.
 */
import { Agent, request } from "node:http";
import { exchangeRaw } from "./raw-http.js";
import type { FuzzRequest } from "./requests.js";

/** What one request got. */
export interface Outcome {
  request: FuzzRequest;
  /** The status of the answer; undefined when none came. */
  status: number | undefined;
  headers: Record<string, string>;
  body: Buffer;
  /** Why no answer came (a reset, a timeout), or why the client could not send the request. */
  error: string | undefined;
  /** The client refused to send it (a generator slip, not the server's doing). */
  unsent: boolean;
  /** Answers on the request's own connection (raw requests only; 1 is right). */
  answers: number;
  /** The request went on a socket that had carried an earlier one. */
  reused: boolean;
  /** The client hung up before the answer's end, as the request said to: its body is partial, or there is none. */
  hungUp: boolean;
  ms: number;
}

/** A keep-alive agent with `sockets` connections at most. */
export function fuzzAgent(sockets: number): Agent {
  return new Agent({ keepAlive: true, maxSockets: sockets, maxFreeSockets: sockets });
}

function flatHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(", ") : v;
  return out;
}

/** Sends `req` to the server on `port` and resolves with what happened; never rejects. */
export function send(port: number, agent: Agent, req: FuzzRequest, timeoutMs: number): Promise<Outcome> {
  const start = performance.now();
  const base = { request: req, headers: {}, body: Buffer.alloc(0), unsent: false, answers: 0, reused: false, hungUp: false };
  if (req.raw !== undefined) {
    return exchangeRaw(port, req.raw, timeoutMs).then((x) => {
      const first = x.responses[0];
      return { ...base, status: first?.status, headers: first?.headers ?? {}, body: first?.body ?? Buffer.alloc(0), error: x.error, answers: x.responses.length, ms: performance.now() - start };
    });
  }
  return new Promise((resolve) => {
    let settled = false;
    const done = (outcome: Omit<Outcome, "ms">) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...outcome, ms: performance.now() - start });
    };
    const headers: string[] = ["host", `127.0.0.1:${port}`];
    for (const [name, value] of req.headers) headers.push(name, value);
    // Every body is framed, so the request stays valid HTTP: Node sends the body of a GET, HEAD
    // or DELETE with neither header unless told.
    if (req.body !== undefined) headers.push(...(req.chunked ? ["transfer-encoding", "chunked"] : ["content-length", String(req.body.length)]));
    let r: ReturnType<typeof request>;
    try {
      r = request({ host: "127.0.0.1", port, method: req.method, path: req.path, headers, agent });
    } catch (err) {
      done({ ...base, status: undefined, error: (err as NodeJS.ErrnoException).code ?? (err as Error).message, unsent: true });
      return;
    }
    const timer = setTimeout(() => r.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    const hangUp = req.hangUp;
    // A client that leaves before any answer came.
    const leaving = hangUp !== undefined && "afterMs" in hangUp ? setTimeout(() => {
      done({ ...base, status: undefined, error: undefined, hungUp: true, reused: r.reusedSocket });
      r.destroy();
    }, hangUp.afterMs) : undefined;
    r.on("close", () => clearTimeout(leaving));
    r.on("response", (res) => {
      clearTimeout(leaving);
      const chunks: Buffer[] = [];
      let bytes = 0;
      // A client that leaves mid-stream: a 200's body, after some bytes of it.
      const after = hangUp !== undefined && "afterBytes" in hangUp && res.statusCode === 200 ? hangUp.afterBytes : undefined;
      res.on("data", (c: Buffer) => {
        chunks.push(c);
        bytes += c.length;
        if (after === undefined || bytes < after) return;
        done({ ...base, status: res.statusCode, headers: flatHeaders(res.headers), body: Buffer.concat(chunks), error: undefined, answers: 1, hungUp: true, reused: r.reusedSocket });
        r.destroy();
      });
      res.on("end", () => done({ ...base, status: res.statusCode, headers: flatHeaders(res.headers), body: Buffer.concat(chunks), error: undefined, answers: 1, reused: r.reusedSocket }));
      res.on("error", (err: NodeJS.ErrnoException) => done({ ...base, status: res.statusCode, error: `the answer broke off: ${err.code ?? err.message}`, reused: r.reusedSocket }));
    });
    r.on("error", (err: NodeJS.ErrnoException) => done({ ...base, status: undefined, error: err.code ?? err.message, reused: r.reusedSocket }));
    if (req.body === undefined) r.end();
    else if (req.chunked) {
      const half = req.body.length >> 1;
      r.write(req.body.subarray(0, half));
      r.end(req.body.subarray(half));
    } else r.end(req.body);
  });
}

/**
 * Sends requests `0..count-1` (made by `make`) with `concurrency` in flight, handing each outcome
 * to `seen` as it arrives.
 */
export async function sendAll(count: number, concurrency: number, make: (index: number) => FuzzRequest, sendOne: (req: FuzzRequest) => Promise<Outcome>, seen: (outcome: Outcome) => void): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const index = next++;
      seen(await sendOne(make(index)));
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
}
