/**
 * The container image, built and run here with podman on a base image made offline (a Debian
 * root file system from the Debian mirror plus this machine's node; deploy/container/make-base.sh):
 * it serves examples/models, answers V2 inference over REST (and gRPC, once the server has
 * --grpc-port), and on SIGTERM under load answers every request it took and exits 0. A server
 * script of one's own is built on it with deploy/container/Dockerfile.server. Without a working
 * container engine every test here skips and says why.
 */
import assert from "node:assert/strict";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { CACHE, EXAMPLE_MODELS, found, helloSamples, run, speechProbabilities } from "./deploy-helpers.js";
import { RAN_ONCE, ROOT, fixture, post, send, sleep } from "./helpers.js";

const IMAGE = "localhost/shoal:test";
const CONTAINERS_CONF = join(CACHE, "containers.conf");
// What runs here: runc (crun fails on this kernel's rlimits and cgroups), no systemd, and the
// host's network (no network namespaces to route through).
const PODMAN = ["--runtime", "runc", "--cgroup-manager", "cgroupfs"];
const env = { ...process.env, CONTAINERS_CONF };
const podman = (args: string[], options: { input?: string; timeoutMs?: number } = {}) => run("podman", [...PODMAN, ...args], { env, ...options });

/** A TCP port free now on 127.0.0.1. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Why containers cannot run here, or undefined when they can; prepares the base image. */
async function engine(base: string): Promise<string | undefined> {
  if (!(await found("podman"))) return "podman is not installed (apt-get install podman runc)";
  mkdirSync(CACHE, { recursive: true });
  // An empty default_ulimits: the default ones cannot be set in this sandbox.
  writeFileSync(CONTAINERS_CONF, "[containers]\ndefault_ulimits = []\n");
  try {
    await podman(["info"], { timeoutMs: 60_000 });
  } catch (err) {
    return `podman cannot run here: ${(err as Error).message.split("\n").slice(0, 4).join(" ")}`;
  }
  const exists = await podman(["image", "exists", base]).then(() => true, () => false);
  if (!exists && !(await found("debootstrap"))) return "debootstrap is not installed (apt-get install debootstrap), so no base image can be made offline";
  await run("bash", [join(ROOT, "deploy", "container", "make-base.sh"), base], { env, timeoutMs: 900_000 });
  return undefined;
}

/** A running container, removed by `remove()`. */
class Container {
  constructor(readonly name: string) {}

  static async start(name: string, image: string, args: string[]): Promise<Container> {
    await podman(["rm", "--force", "--ignore", name]);
    await podman(["run", "--detach", "--name", name, "--network", "host", ...args, image]);
    return new Container(name);
  }

  async logs(): Promise<string> {
    const { stdout, stderr } = await podman(["logs", this.name]).catch(() => ({ stdout: "", stderr: "(no logs)" }));
    return `${stdout}${stderr}`.slice(-6000);
  }

  async running(): Promise<boolean> {
    const { stdout } = await podman(["inspect", "--format", "{{.State.Running}}", this.name]);
    return stdout.trim() === "true";
  }

  /** Waits until `url` answers 200, failing with the logs if the container stops first. */
  async waitFor(url: string, timeoutMs = 180_000): Promise<void> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const status = await send(url).then((r) => r.status, () => 0);
      if (status === 200) return;
      if (!(await this.running())) throw new Error(`the container stopped before ${url} answered 200\n${await this.logs()}`);
      if (Date.now() > end) throw new Error(`${url} did not answer 200 within ${timeoutMs} ms\n${await this.logs()}`);
      await sleep(250);
    }
  }

  async signal(signal: string): Promise<void> {
    await podman(["kill", "--signal", signal, this.name]);
  }

  /** The exit code, once the container has stopped. */
  async exitCode(): Promise<number> {
    const { stdout } = await podman(["wait", this.name], { timeoutMs: 120_000 });
    return Number(stdout.trim());
  }

  async remove(): Promise<void> {
    await podman(["rm", "--force", "--ignore", this.name]).catch(() => undefined);
  }
}

const SEGMENTS = JSON.stringify({ inputs: [{ name: "probabilities", datatype: "FP32", shape: [8], data: [0.1, 0.9, 0.9, 0.2, 0.8, 0.9, 0.9, 0.1] }] });

/** What a client saw: status counts, and the errors of requests that got no answer. */
interface Outcome {
  statuses: Map<number, number>;
  refused: number;
  unanswered: string[];
}

/**
 * One client sending speech-segments requests one after another on a keep-alive connection
 * until the server says it is shutting down (503) or refuses the connection (it has gone: that
 * request was never taken), at most `limit` requests.
 */
async function client(url: string, outcome: Outcome, limit: number, answered: () => void): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    for (let i = 0; i < limit; i++) {
      const result = await new Promise<number | Error>((resolve) => {
        const req = request(`${url}/v2/models/speech-segments/infer`, { method: "POST", agent, headers: { "content-type": "application/json" } }, (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
          res.on("error", resolve);
        });
        req.on("error", resolve);
        req.end(SEGMENTS);
      });
      if (result instanceof Error) {
        if ((result as NodeJS.ErrnoException).code === "ECONNREFUSED") outcome.refused++;
        else outcome.unanswered.push(`${(result as NodeJS.ErrnoException).code ?? ""} ${result.message}`);
        return;
      }
      outcome.statuses.set(result, (outcome.statuses.get(result) ?? 0) + 1);
      answered();
      if (result === 503) return;
    }
  } finally {
    agent.destroy();
  }
}

describe("the container image", { skip: RAN_ONCE ?? false }, () => {
  let skip: string | undefined;
  const base = `localhost/shoal-test-base:node${process.versions.node}-bookworm`;

  before(async () => {
    skip = await engine(base);
    if (skip !== undefined) {
      console.log(`# container tests skipped: ${skip}`);
      return;
    }
    // Layers are cached between runs: only what changed is built again.
    await podman(["build", "--network", "host", "--build-arg", `BASE=${base}`, "--tag", IMAGE, ROOT], { timeoutMs: 1_200_000 });
  });

  test("is non-root, holds compiled JavaScript and production dependencies only, and declares its ports and volume", async (t) => {
    if (skip !== undefined) return t.skip(skip);
    const [config] = JSON.parse((await podman(["image", "inspect", IMAGE])).stdout) as { Config: Record<string, unknown> }[];
    assert.equal(config!.Config.User, "10001:10001");
    assert.deepEqual(Object.keys(config!.Config.ExposedPorts as object).sort(), ["8000/tcp", "8001/tcp"]);
    assert.deepEqual(Object.keys(config!.Config.Volumes as object), ["/models"]);
    assert.deepEqual(config!.Config.Entrypoint, ["node", "/app/dist/cli/main.js"]);
    const absent = ["/app/src", "/app/node_modules/tsx", "/app/node_modules/typescript", "/app/node_modules/@ricky0123", "/app/node_modules/@huggingface", "/tools"];
    const { stdout } = await podman(["run", "--rm", "--network", "host", "--entrypoint", "sh", IMAGE, "-c", `id -u; for f in ${absent.join(" ")}; do test ! -e $f || echo "present: $f"; done; test -f /app/dist/cli/main.js && echo compiled`]);
    assert.equal(stdout, "10001\ncompiled\n");
  });

  describe("serving examples/models", () => {
    let container: Container | undefined;
    let url = "";
    let grpcPort = 0;

    before(async () => {
      if (skip !== undefined) return;
      const port = await freePort();
      grpcPort = await freePort();
      url = `http://127.0.0.1:${port}`;
      // As the Helm chart runs it: a read-only root file system with an in-memory /tmp, no
      // capability, no privilege escalation; process workers, whose sockets live in /tmp.
      container = await Container.start(`shoal-test-${process.pid}`, IMAGE, [
        "--read-only", "--tmpfs", "/tmp", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--env", "SHOAL_MODEL_ISOLATION=process",
        "--volume", `${EXAMPLE_MODELS}:/models:ro`,
        "--env", `SHOAL_PORT=${port}`, "--env", `SHOAL_GRPC_PORT=${grpcPort}`, "--env", "SHOAL_WORKERS=2", "--env", "SHOAL_ADDRESS=127.0.0.1",
      ]);
      await container.waitFor(`${url}/readyz`);
    });
    after(async () => {
      await container?.remove();
    });

    test("answers V2 inference over REST: Silero VAD and speech-segments find the speech in hello.wav", async (t) => {
      if (skip !== undefined) return t.skip(skip);
      const probabilities = await speechProbabilities(url, helloSamples());
      assert.equal(probabilities.length, 29);
      const reply = await post(`${url}/v2/models/speech-segments/infer`, { inputs: [{ name: "probabilities", datatype: "FP32", shape: [29], data: probabilities }] });
      assert.equal(reply.status, 200, reply.text);
      const [start, end] = (reply.json.outputs as { data: number[] }[]).map((o) => o.data);
      assert.equal(start!.length, 1, reply.text);
      assert.ok(start![0]! >= 0.4 && start![0]! <= 0.9 && end![0]! >= 1.5 && end![0]! <= 2.3, reply.text);
    });

    test("answers V2 inference over gRPC on SHOAL_GRPC_PORT", async (t) => {
      if (skip !== undefined) return t.skip(skip);
      const grpc = await import("@grpc/grpc-js");
      const loader = await import("@grpc/proto-loader");
      const definition = loader.loadSync("grpc_service.proto", { includeDirs: [join(ROOT, "proto")], keepCase: true, longs: Number, defaults: true });
      const { inference } = grpc.loadPackageDefinition(definition) as unknown as { inference: { GRPCInferenceService: new (address: string, credentials: unknown) => Record<string, (request: unknown, callback: (err: Error | null, reply: any) => void) => void> & { close(): void } } };
      const stub = new inference.GRPCInferenceService(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure());
      const call = (method: string, request: unknown) => new Promise<any>((resolve, reject) => stub[method]!(request, (err, reply) => (err ? reject(err) : resolve(reply))));
      try {
        assert.equal((await call("ServerReady", {})).ready, true);
        const reply = await call("ModelInfer", {
          model_name: "speech-segments",
          inputs: [{ name: "probabilities", datatype: "FP32", shape: [6], contents: { fp32_contents: [0.1, 0.9, 0.9, 0.9, 0.2, 0.1] } }],
        });
        const start = reply.raw_output_contents.length > 0 ? [...new Float32Array(new Uint8Array(reply.raw_output_contents[0]).buffer)] : reply.outputs[0].contents.fp32_contents;
        assert.equal(reply.model_name, "speech-segments");
        assert.deepEqual(start.map((s: number) => Math.round(s * 1000)), [96]);
      } finally {
        stub.close();
      }
    });

    test("on SIGTERM under load, answers every request it took and exits 0", async (t) => {
      if (skip !== undefined) return t.skip(skip);
      const outcome: Outcome = { statuses: new Map(), refused: 0, unanswered: [] };
      let answers = 0;
      let signalled: Promise<void> | undefined;
      const clients = Array.from({ length: 8 }, () =>
        client(url, outcome, 5000, () => {
          // Once load is flowing, the container is told to stop, as Kubernetes does.
          if (++answers === 200) signalled = container!.signal("TERM");
        }),
      );
      await Promise.all(clients);
      await signalled;
      const code = await container!.exitCode();
      const logs = await container!.logs();
      const seen = `answers: ${[...outcome.statuses].map(([s, n]) => `${n} × ${s}`).join(", ")}; refused connections: ${outcome.refused}`;
      assert.deepEqual(outcome.unanswered, [], `requests without an answer (${seen})\n${logs}`);
      assert.ok((outcome.statuses.get(200) ?? 0) >= 200, `answers: ${[...outcome.statuses]}`);
      assert.deepEqual([...outcome.statuses.keys()].filter((s) => s !== 200 && s !== 503), [], `statuses: ${[...outcome.statuses]}`);
      // Every client was stopped by the shutdown (a 503 while draining, or the port closed), none by its limit.
      assert.equal((outcome.statuses.get(503) ?? 0) + outcome.refused, clients.length, `statuses: ${[...outcome.statuses]}, refused: ${outcome.refused}`);
      t.diagnostic(seen);
      assert.equal(code, 0, logs);
      assert.match(logs, /"signal":"SIGTERM".*"msg":"draining"/);
      assert.match(logs, /"msg":"stopped"/);
    });
  });

  test("builds a server script of one's own on the image (deploy/container/Dockerfile.server)", async (t) => {
    if (skip !== undefined) return t.skip(skip);
    const context = mkdtempSync(join(tmpdir(), "shoal-app-"));
    let container: Container | undefined;
    try {
      mkdirSync(join(context, "dist"));
      cpSync(fixture("plain.mjs"), join(context, "dist", "server.js"));
      writeFileSync(join(context, "dist", "package.json"), '{"type": "module"}\n');
      cpSync(join(ROOT, "deploy", "container", "Dockerfile.server"), join(context, "Dockerfile.server"));
      await podman(["build", "--network", "host", "--file", join(context, "Dockerfile.server"), "--build-arg", `SHOAL_IMAGE=${IMAGE}`, "--tag", "localhost/shoal-app:test", context]);
      const port = await freePort();
      container = await Container.start(`shoal-app-test-${process.pid}`, "localhost/shoal-app:test", ["--env", `SHOAL_PORT=${port}`, "--env", "SHOAL_ADDRESS=127.0.0.1"]);
      await container.waitFor(`http://127.0.0.1:${port}/readyz`);
      const reply = await post(`http://127.0.0.1:${port}/inference`, { x: 2 });
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json.y, 4);
      await container.signal("TERM");
      assert.equal(await container.exitCode(), 0, await container.logs());
    } finally {
      await container?.remove();
      rmSync(context, { recursive: true, force: true });
    }
  });
});
