/**
 * One of the flood run's normal clients in a process of its own (started by
 * bench/scenarios/flood.ts with bench/lib/forked.ts), so that neither the other client nor the
 * measuring process takes turns of its event loop: REST V2 inference on raw kept-alive sockets, or
 * gRPC unary calls on one channel, in closed loops from the start to "stop". Questions: "window"
 * (answers the LoadResult of the window it ends), `{ pace: rate | null }`, "stop" (the last window).
 */
import { httpSender } from "../../src/bench/http-sender.js";
import { grpcSender, steadyLoad } from "../../src/bench/loadgen.js";
import { answerQuestions } from "../lib/forked.js";

/** What the client sends, and at how many requests at once. */
export type ClientSetup =
  | { kind: "rest"; url: string; body: string; headers: Record<string, string>; concurrency: number }
  | { kind: "grpc"; target: string; method: string; message: string; concurrency: number };

await answerQuestions((c: ClientSetup) => {
  const sender = c.kind === "rest" ? httpSender(c.url, Buffer.from(c.body, "base64"), c.headers, c.concurrency) : grpcSender(c.target, c.method, Buffer.from(c.message, "base64"));
  const load = steadyLoad(sender.send, c.concurrency);
  return async (question) => {
    if (question === "window") return load.window();
    if (question === "stop") {
      const last = await load.stop();
      sender.close();
      return last;
    }
    load.pace((question as { pace: number | null }).pace ?? undefined);
    return undefined;
  };
});
