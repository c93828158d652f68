/**
 * The response cache of a route or a model (off unless its settings give `responseCache`):
 * answers kept by a hash of what makes them, bounded in bytes, the least recently used leaving
 * first. The door looks a request up before it is queued: a hit is answered at once and never
 * reaches a queue. docs/scheduling.md states the rules.
 */
import { createHash } from "node:crypto";

/** One answer kept: what the Worker returned, before any dialect shaped it. */
export interface CachedAnswer {
  readonly body: Uint8Array;
  readonly contentType: string;
  readonly headers: Readonly<Record<string, string>> | undefined;
}

/** What an entry costs besides its body's bytes: its key, its record, the map's slot. */
const ENTRY_BYTES = 256;

/**
 * Answers by key, at most `maxBytes` of them together (bodies and an allowance for each entry);
 * a Map's order of insertion is the order of use, so the first key is the least recently used.
 */
export class ResponseCache {
  readonly #entries = new Map<string, CachedAnswer>();
  #bytes = 0;

  constructor(
    readonly maxBytes: number,
    /** What names the answers' maker now (a model's loaded instance): a reload's answers never meet the ones before. */
    readonly version: () => string = () => "",
  ) {}

  /** Bytes held. */
  get bytes(): number {
    return this.#bytes;
  }

  /** The answer kept under `key`, now the most recently used, or undefined. */
  get(key: string): CachedAnswer | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry;
  }

  /** Keeps `answer` under `key`, making room by dropping the least recently used; one larger than the whole cache is not kept. */
  set(key: string, answer: CachedAnswer): void {
    const cost = answer.body.byteLength + ENTRY_BYTES;
    if (cost > this.maxBytes) return;
    const old = this.#entries.get(key);
    if (old !== undefined) {
      this.#entries.delete(key);
      this.#bytes -= old.body.byteLength + ENTRY_BYTES;
    }
    for (const [oldest, entry] of this.#entries) {
      if (this.#bytes + cost <= this.maxBytes) break;
      this.#entries.delete(oldest);
      this.#bytes -= entry.body.byteLength + ENTRY_BYTES;
    }
    this.#entries.set(key, answer);
    this.#bytes += cost;
  }
}

/**
 * The key of a request's answer: a SHA-256 of what changes it, each part with its length so
 * that no two requests' parts run together: the route or model (`target`), its maker's version,
 * the body's content type, the query string, and the body's bytes as they came (the door never
 * decodes a REST body: its parameters are in these bytes).
 */
export function cacheKey(target: string, version: string, contentType: string | undefined, query: string | undefined, body: Uint8Array): string {
  const hash = createHash("sha256");
  for (const part of [target, version, contentType ?? "", query ?? ""]) hash.update(`${part.length}:${part}\n`);
  hash.update(body);
  return hash.digest("base64url");
}

/** Whether a request lets a cached answer be used, and its own be kept: not when it says `Cache-Control: no-cache` (or `no-store`). */
export function cacheAllowed(cacheControl: string | string[] | undefined): boolean {
  if (cacheControl === undefined) return true;
  const text = Array.isArray(cacheControl) ? cacheControl.join(",") : cacheControl;
  return !/(^|[\s,])no-(cache|store)([\s,=]|$)/i.test(text);
}
