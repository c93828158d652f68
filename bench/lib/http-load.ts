/**
 * Load of the scheduling scenarios (overload, lengths, wait sweep), on node:http with keep-alive:
 * open loop (requests sent at a fixed rate, whatever the answers) and closed loop (a number of
 * clients, each sending again when answered), each request's status and time kept. No wrk: each
 * request has headers and a body of its own.
 */
import { Agent, request } from "node:http";

/** What one request is: its path, headers and body. */
export interface Ask {
  path: string;
  headers?: Record<string, string>;
  body: Buffer;
}

/** What came of one request: its index in the load, its status (0: no answer) and its time. */
export interface Answer {
  index: number;
  status: number;
  ms: number;
}

/** POSTs one request and resolves with its status once its answer is read (0 on a connection error). */
export function send(agent: Agent, port: number, ask: Ask): Promise<number> {
  return new Promise((resolve) => {
    const headers = { "content-type": "application/json", "content-length": ask.body.length, ...ask.headers };
    const req = request({ host: "127.0.0.1", port, path: ask.path, method: "POST", agent, headers }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", () => resolve(0));
    req.end(ask.body);
  });
}

/** Sends `make(i)` at `rate` a second for `seconds`, open loop; resolves with every answer once all came. */
export async function openLoop(port: number, rate: number, seconds: number, make: (index: number) => Ask): Promise<Answer[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: 4096 });
  const pending: Promise<Answer>[] = [];
  const t0 = performance.now();
  let sent = 0;
  while (performance.now() - t0 < seconds * 1000) {
    const due = Math.floor(((performance.now() - t0) / 1000) * rate);
    for (; sent < due; sent++) {
      const index = sent;
      const start = performance.now();
      pending.push(send(agent, port, make(index)).then((status) => ({ index, status, ms: performance.now() - start })));
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  const answers = await Promise.all(pending);
  agent.destroy();
  return answers;
}

/** `streams` clients for `seconds`, each sending `make(i)` again as soon as answered; every answer, and the seconds it took. */
export async function closedLoop(port: number, streams: number, seconds: number, make: (index: number) => Ask): Promise<{ answers: Answer[]; seconds: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: streams });
  const answers: Answer[] = [];
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  let next = 0;
  await Promise.all(
    Array.from({ length: streams }, async () => {
      while (performance.now() < end) {
        const index = next++;
        const start = performance.now();
        const status = await send(agent, port, make(index));
        answers.push({ index, status, ms: performance.now() - start });
      }
    }),
  );
  agent.destroy();
  return { answers, seconds: (performance.now() - t0) / 1000 };
}

/** The sum of a counter's samples on a server's /metrics (every label set). */
export async function counterTotal(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let total = 0;
  for (const line of text.split("\n")) if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) total += Number(line.slice(line.lastIndexOf(" ") + 1));
  return total;
}
