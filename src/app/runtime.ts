import type { ServerConfig } from "../config.js";
import { BunListener, isBun } from "../http/bun/bun-listener.js";
import type { Handle, Listener } from "../http/listener.js";
import { NodeListener } from "../http/node/node-listener.js";

/** The runtime's own HTTP server under the HTTP door: Bun.serve on Bun, node:http elsewhere. */
export function httpListener(config: ServerConfig): (handle: Handle) => Listener {
  return isBun() ? (handle) => new BunListener(config, handle) : (handle) => new NodeListener(config, handle);
}
