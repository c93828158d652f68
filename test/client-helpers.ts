/** Shared by the client's tests: the models they call and a server of them with the routes of test/fixtures/client-server.ts. */
import { fixture, startServer, type ServerProcess } from "./helpers.js";
import { ModelRepo } from "./model-helpers.js";

/** The admin token of {@link startClientServer}'s server. */
export const TOKEN = "client-test-token";

/** The models the client tests call: FP32 scaling, BYTES, a streaming model, and an echo of any datatype. */
export function clientModels(): ModelRepo {
  const repo = new ModelRepo();
  repo.module("scale", "scale.ts", { parameters: { factor: 2 } });
  repo.module("upper", "upper.ts");
  repo.module("spell", "spell.ts");
  repo.module("echo", "echo.ts");
  return repo;
}

/** A server of those models and of test/fixtures/client-server.ts's routes, model control open behind {@link TOKEN}. */
export function startClientServer(repo: ModelRepo, args: string[] = []): Promise<ServerProcess> {
  return startServer(fixture("client-server.ts"), { args: ["--model-repository", repo.dir, "--model-control", "explicit", "--admin-token", TOKEN, ...args], startTimeoutMs: 60_000 });
}
