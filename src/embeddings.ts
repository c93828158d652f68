/**
 * The contract between Shoal's `/v1/embeddings` (the OpenAI-compatible API) and a Worker that
 * embeds: the request the Worker gets (OpenAI's body, checked) and the answer it returns
 * (OpenAI's, which reaches the client as it is). See `Server.openAI()` with `kind: "embeddings"`.
 */
import { z } from "zod";

/** The most inputs one request may hold, as OpenAI's API allows. */
export const MAX_EMBEDDING_INPUTS = 2048;

const text = z.string().min(1, "must not be empty");
const tokens = z.array(z.number().int().min(0)).min(1, "must hold at least one token");

/**
 * One embeddings request, as OpenAI's API takes it: `input` is a text, a list of texts, a list of
 * token ids, or a list of token-id lists; `encoding_format` is `float` (default) or `base64`
 * (each vector as little-endian float32 bytes). `dimensions` is read so that it can be refused.
 */
export const EmbeddingRequest = z.object({
  model: z.string().min(1),
  input: z.union(
    [text, z.array(text).min(1, "must not be empty").max(MAX_EMBEDDING_INPUTS), tokens, z.array(tokens).min(1, "must not be empty").max(MAX_EMBEDDING_INPUTS)],
    { error: `must be a non-empty string, a list of 1 to ${MAX_EMBEDDING_INPUTS} non-empty strings, a list of token ids, or a list of 1 to ${MAX_EMBEDDING_INPUTS} non-empty lists of token ids` },
  ),
  encoding_format: z.enum(["float", "base64"]).optional(),
  dimensions: z.number().int().min(1).optional(),
  user: z.string().optional(),
});

export type EmbeddingRequest = z.infer<typeof EmbeddingRequest>;

/** A request's inputs as a list: each a text or a list of token ids. */
export function embeddingInputs(request: EmbeddingRequest): (string | number[])[] {
  const { input } = request;
  if (typeof input === "string") return [input];
  if (input.length > 0 && typeof input[0] === "number") return [input as number[]];
  return input as string[] | number[][];
}

/** OpenAI's answer to an embeddings request. */
export interface EmbeddingResponse {
  object: "list";
  data: { object: "embedding"; index: number; embedding: number[] | string }[];
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

/** The answer to `request`: one vector per input, in order, and the tokens the model read for them all. */
export function embeddingResponse(request: EmbeddingRequest, vectors: readonly Float32Array[], promptTokens: number): EmbeddingResponse {
  const base64 = request.encoding_format === "base64";
  return {
    object: "list",
    data: vectors.map((v, index) => ({ object: "embedding", index, embedding: base64 ? littleEndianBase64(v) : Array.from(v) })),
    model: request.model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}

// float32 values as little-endian bytes, in base64, whatever the machine's byte order.
function littleEndianBase64(v: Float32Array): string {
  const bytes = Buffer.alloc(v.length * 4);
  for (let i = 0; i < v.length; i++) bytes.writeFloatLE(v[i]!, i * 4);
  return bytes.toString("base64");
}
