/**
 * The fuzz's requests to the generation APIs: the OpenAI routes (completions, chats and the
 * model list, streamed or not, near-valid bodies bent at random, and models whose Workers answer
 * what the routes cannot read) and the V2 generate extension (`/generate`, `/generate_stream`,
 * `/infer_stream`) of the repository's models, some asking for binary outputs that no JSON answer
 * can hold, some from a model whose later chunk does not fit. And the requests that once made the
 * server answer twice, for each of these doors, sent alone on a connection whose every answer is
 * counted.
 */
import { brokenJson, perturb, randomJson, writeJson, type Json } from "./json.js";
import { MODEL_NAMES } from "./paths.js";
import type { Random } from "./random.js";
import { v2Body } from "./v2.js";

/** The model the fuzz server serves on its OpenAI routes. */
export const OPENAI_MODEL = "fuzz-echo";

/** Its models whose Workers answer what the OpenAI routes cannot read: their requests fail with `encoding error`, by design. */
export const MISFIT_OPENAI_MODELS: readonly string[] = ["fuzz-misfit", "fuzz-misfit-once"];

/** The repository's model whose second chunk no JSON answer can hold: its streams end with an error event, by design. */
export const MISFIT_MODEL = "misfit";

/** A request of the generation APIs, before the client's bending. */
export interface GenerationDraft {
  method: string;
  path: string;
  body?: Uint8Array;
  contentType?: string;
  headers?: [string, string][];
  /** Sent alone on a connection of its own, where every answer is counted. */
  alone?: true;
}

const utf8 = new TextEncoder();
const ROLES: readonly Json[] = ["system", "user", "assistant", "tool", "developer"];
const ODD_ROLES: readonly Json[] = ["robot", "", 3, null];

function text(r: Random): string {
  return Array.from({ length: r.skewed(0, 30) }, () => r.string(r.int(1, 6), "abcxyz日é")).join(" ");
}

// The fields both OpenAI endpoints share, each present or not, sometimes out of range.
function common(r: Random): Record<string, Json> {
  const fields: Record<string, Json> = { model: r.weighted<Json>([[8, OPENAI_MODEL], [1, r.pick(MISFIT_OPENAI_MODELS)], [1, "gpt-4"], [1, ""], [1, 7]]) };
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

/** A POST to `/v1/embeddings`: inputs as text, lists of text, token ids, or none of these. */
export function embeddingsDraft(r: Random): GenerationDraft {
  const near: Record<string, Json> = { model: r.weighted<Json>([[8, "fuzz-embed"], [1, OPENAI_MODEL], [1, "text-embedding-3-small"], [1, 7]]) };
  near.input = r.weighted<Json>([
    [4, text(r)],
    [3, Array.from({ length: r.skewed(1, 8) }, () => text(r))],
    [2, Array.from({ length: r.skewed(1, 8) }, () => r.int(0, 30000))],
    [1, [[1, 2, 3], [4, 5]]],
    [1, r.pick<Json>([[], "", null, 5, [1, "a"], [[1, "a"]], [-1], [1.5], [[]], {}])],
  ]);
  if (r.chance(0.3)) near.encoding_format = r.pick<Json>(["float", "base64", "hex", null, 1]);
  if (r.chance(0.1)) near.dimensions = r.pick<Json>([8, 0, "x"]);
  if (r.chance(0.1)) near.user = r.pick<Json>(["u", 5]);
  return { method: "POST", path: "/v1/embeddings", body: bend(r, near), contentType: "application/json" };
}

/** A POST to `/v1/completions` or `/v1/chat/completions`, or a request to `/v1/models`. */
export function openAIDraft(r: Random, endpoint: "completions" | "chat" | "models"): GenerationDraft {
  if (endpoint === "models") return { method: r.weighted([[6, "GET"], [1, "HEAD"], [1, "POST"], [1, "DELETE"]]), path: r.pick(["/v1/models", "/v1/models/", "/v1", "/v1/embeddings", "/v1/models/fuzz-echo"]) };
  const near = common(r);
  if (endpoint === "completions") near.prompt = r.chance(0.9) ? (r.chance(0.8) ? text(r) : [text(r)]) : r.pick<Json>([[], ["a", "b"], 5, null]);
  else near.messages = r.chance(0.9) ? Array.from({ length: r.skewed(1, 5) }, () => ({ role: r.chance(0.9) ? r.pick(ROLES) : r.pick(ODD_ROLES), content: r.chance(0.8) ? text(r) : [{ type: r.pick(["text", "image_url"]), text: text(r) }] })) : r.pick<Json>([[], "hi", null]);
  return { method: "POST", path: endpoint === "chat" ? "/v1/chat/completions" : "/v1/completions", body: bend(r, near), contentType: "application/json" };
}

// A near-valid body as JSON: as it is, bent, or not JSON at all.
function bend(r: Random, near: Json): Uint8Array {
  const text = writeJson(r, r.chance(0.3) ? perturb(r, near) : near);
  return r.chance(0.1) ? brokenJson(r, text) : utf8.encode(text);
}

/** A POST to a model's `/generate`, `/generate_stream` or `/infer_stream`. */
export function generateDraft(r: Random): GenerationDraft {
  const model = r.weighted<string>([[6, "upper"], [4, "mlp"], [1, MISFIT_MODEL], [1, r.pick(MODEL_NAMES)]]);
  const action = r.pick(["generate", "generate_stream", "infer_stream"]);
  const path = `/v2/models/${encodeURIComponent(model)}/${action}`;
  if (action === "infer_stream") {
    const v2 = v2Body(r, model, r.chance(0.3));
    return { method: "POST", path, body: v2.body, contentType: v2.contentType, headers: v2.headerLength === undefined ? [] : [["inference-header-content-length", v2.headerLength]] };
  }
  const near: Record<string, Json> =
    model === "mlp" ? { input: Array.from({ length: r.chance(0.8) ? 4 : r.int(0, 9) }, () => r.int(-100, 100) / 10) } : { text: r.chance(0.8) ? text(r) : [text(r), text(r)] };
  if (r.chance(0.3)) near.parameters = r.pick<Json>([{ suffix: "!" }, {}, [], "x", null, { binary_data_output: true }, { binary_data_output: "yes" }]);
  if (r.chance(0.2)) near.id = r.pick<Json>(["g1", 5, null]);
  return { method: "POST", path, body: bend(r, near), contentType: "application/json" };
}

/**
 * A request of a dialect at its edges, where an answer could once be written twice: binary
 * outputs asked of generate or a stream, a body that is not JSON, a Worker's output the dialect
 * cannot hold (streamed or not), sent alone on a connection.
 */
export function answerTwiceDraft(r: Random): GenerationDraft {
  const binary: Json = { binary_data_output: true };
  const draft = r.weighted<() => GenerationDraft>([
    [3, () => {
      const model = r.pick(["mlp", "upper", MISFIT_MODEL]);
      const fields: Json = model === "mlp" ? { input: [1, 2, 3, 4] } : { text: "ab" };
      return { method: "POST", path: `/v2/models/${model}/${r.pick(["generate", "generate_stream"])}`, body: bend(r, { ...fields, ...(r.chance(0.7) ? { parameters: binary } : {}) }) };
    }],
    [2, () => {
      const model = r.pick(["mlp", "upper", MISFIT_MODEL]);
      const input = model === "mlp" ? { name: "input", datatype: "FP32", shape: [1, 4], data: [1, 2, 3, 4] } : { name: "text", datatype: "BYTES", shape: [1], data: ["ab"] };
      const asks: Json = r.pick<Json>([{ parameters: binary }, { outputs: [{ name: model === "mlp" ? "output" : "upper", parameters: { binary_data: true } }] }, {}]);
      const headers: [string, string][] = r.chance(0.3) ? [["accept", "text/event-stream"]] : [];
      return { method: "POST", path: `/v2/models/${model}/${r.chance(0.7) ? "infer_stream" : "infer"}`, body: bend(r, { inputs: [input], ...(asks as Record<string, Json>) }), headers };
    }],
    [3, () => {
      const chat = r.chance(0.5);
      const near: Record<string, Json> = { model: r.weighted<Json>([[3, r.pick(MISFIT_OPENAI_MODELS)], [1, OPENAI_MODEL]]), stream: r.pick<Json>([true, false, null]), ...(r.chance(0.3) ? { stream_options: { include_usage: true } } : {}) };
      if (chat) near.messages = [{ role: "user", content: text(r) }];
      else near.prompt = text(r);
      return { method: "POST", path: chat ? "/v1/chat/completions" : "/v1/completions", body: bend(r, near) };
    }],
  ])();
  return { ...draft, contentType: "application/json", alone: true };
}
