/**
 * The fuzz's requests to the generation APIs: the OpenAI routes (completions, chats and the
 * model list, streamed or not, near-valid bodies bent at random) and the V2 generate extension
 * (`/generate`, `/generate_stream`, `/infer_stream`) of the repository's models.
 */
import { perturb, randomJson, writeJson, type Json } from "./json.js";
import { MODEL_NAMES } from "./paths.js";
import type { Random } from "./random.js";
import { v2Body } from "./v2.js";

/** The model the fuzz server serves on its OpenAI routes. */
export const OPENAI_MODEL = "fuzz-echo";

/** A request of the generation APIs, before the client's bending. */
export interface GenerationDraft {
  method: string;
  path: string;
  body?: Uint8Array;
  contentType?: string;
  headers?: [string, string][];
}

const utf8 = new TextEncoder();
const ROLES: readonly Json[] = ["system", "user", "assistant", "tool", "developer"];
const ODD_ROLES: readonly Json[] = ["robot", "", 3, null];

function text(r: Random): string {
  return Array.from({ length: r.skewed(0, 30) }, () => r.string(r.int(1, 6), "abcxyz日é")).join(" ");
}

// The fields both OpenAI endpoints share, each present or not, sometimes out of range.
function common(r: Random): Record<string, Json> {
  const fields: Record<string, Json> = { model: r.weighted<Json>([[8, OPENAI_MODEL], [1, "gpt-4"], [1, ""], [1, 7]]) };
  if (r.chance(0.6)) fields.max_tokens = r.chance(0.9) ? r.int(1, 40) : r.pick<Json>([0, -1, 1.5, "8", null, 2 ** 40]);
  if (r.chance(0.3)) fields.temperature = r.pick<Json>([0, 0.7, 2, 2.5, -1, null]);
  if (r.chance(0.2)) fields.top_p = r.pick<Json>([1, 0.5, 0, 1.5, null]);
  if (r.chance(0.2)) fields.stop = r.pick<Json>(["a", ["a", "b"], [], ["a", "b", "c", "d", "e"], 5, null]);
  if (r.chance(0.1)) fields.n = r.pick<Json>([1, 2, 0, null]);
  if (r.chance(0.5)) fields.stream = r.pick<Json>([true, false, true, "yes", null]);
  if (r.chance(0.2)) fields.stream_options = r.pick<Json>([{ include_usage: true }, { include_usage: "no" }, null, []]);
  if (r.chance(0.1)) fields.seed = r.pick<Json>([1, -5, 1.5, "x"]);
  if (r.chance(0.1)) fields.extra = randomJson(r, 2);
  return fields;
}

/** A POST to `/v1/completions` or `/v1/chat/completions`, or a request to `/v1/models`. */
export function openAIDraft(r: Random, endpoint: "completions" | "chat" | "models"): GenerationDraft {
  if (endpoint === "models") return { method: r.weighted([[6, "GET"], [1, "HEAD"], [1, "POST"], [1, "DELETE"]]), path: r.pick(["/v1/models", "/v1/models/", "/v1", "/v1/embeddings", "/v1/models/fuzz-echo"]) };
  const near = common(r);
  if (endpoint === "completions") near.prompt = r.chance(0.9) ? (r.chance(0.8) ? text(r) : [text(r)]) : r.pick<Json>([[], ["a", "b"], 5, null]);
  else near.messages = r.chance(0.9) ? Array.from({ length: r.skewed(1, 5) }, () => ({ role: r.chance(0.9) ? r.pick(ROLES) : r.pick(ODD_ROLES), content: r.chance(0.8) ? text(r) : [{ type: r.pick(["text", "image_url"]), text: text(r) }] })) : r.pick<Json>([[], "hi", null]);
  const body = r.chance(0.3) ? perturb(r, near) : near;
  return { method: "POST", path: endpoint === "chat" ? "/v1/chat/completions" : "/v1/completions", body: utf8.encode(writeJson(r, body)), contentType: "application/json" };
}

/** A POST to a model's `/generate`, `/generate_stream` or `/infer_stream`. */
export function generateDraft(r: Random): GenerationDraft {
  const model = r.weighted<string>([[6, "upper"], [4, "mlp"], [1, r.pick(MODEL_NAMES)]]);
  const action = r.pick(["generate", "generate_stream", "infer_stream"]);
  const path = `/v2/models/${encodeURIComponent(model)}/${action}`;
  if (action === "infer_stream") {
    const v2 = v2Body(r, model, r.chance(0.3));
    return { method: "POST", path, body: v2.body, contentType: v2.contentType, headers: v2.headerLength === undefined ? [] : [["inference-header-content-length", v2.headerLength]] };
  }
  const near: Record<string, Json> =
    model === "mlp" ? { input: Array.from({ length: r.chance(0.8) ? 4 : r.int(0, 9) }, () => r.int(-100, 100) / 10) } : { text: r.chance(0.8) ? text(r) : [text(r), text(r)] };
  if (r.chance(0.3)) near.parameters = r.pick<Json>([{ suffix: "!" }, {}, [], "x", null]);
  if (r.chance(0.2)) near.id = r.pick<Json>(["g1", 5, null]);
  const body = r.chance(0.3) ? perturb(r, near) : near;
  return { method: "POST", path, body: utf8.encode(writeJson(r, body)), contentType: "application/json" };
}
