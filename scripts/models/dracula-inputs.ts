/**
 * The sentiment model's inputs (models/sentiment/, made by dracula-sentiment.ts): texts as words,
 * words as character ids. Kept apart from the converter so that a server's workers load only this.
 */

/** Longest word the model reads, in UTF-16 code units; the rest of a word is ignored. */
export const MAX_CHARS = 20;

/** What a client of the model needs besides the graph (`vocabulary.json`): how to turn text into `char_ids`. */
export interface DraculaVocabulary {
  /** Row of the character embedding for each known character. */
  chars: Record<string, number>;
  /** The id of a character the model does not know. */
  unknown: number;
  /** The id that pads a word to {@link MAX_CHARS}. */
  pad: number;
  maxChars: number;
  /** The names of the model's three outputs, in order. */
  labels: ["negative", "neutral", "positive"];
}

/** A text's words as the model splits them: on " ", empty ones dropped. */
export function words(text: string): string[] {
  return text.split(" ").filter((w) => w.length > 0);
}

/**
 * The model's inputs for a batch of texts, each given as its {@link words} (at least one each):
 * `char_ids` [batch, most words, 20], padded, and each text's number of words.
 */
export function draculaInputs(texts: readonly (readonly string[])[], vocabulary: DraculaVocabulary): { charIds: BigInt64Array<ArrayBuffer>; wordLens: Int32Array<ArrayBuffer>; shape: [number, number, number] } {
  const { chars, unknown, pad, maxChars } = vocabulary;
  const most = Math.max(...texts.map((t) => t.length));
  const charIds = new BigInt64Array(texts.length * most * maxChars).fill(BigInt(pad));
  texts.forEach((ws, b) =>
    ws.forEach((w, i) => {
      const at = (b * most + i) * maxChars;
      for (let j = 0; j < Math.min(w.length, maxChars); j++) charIds[at + j] = BigInt(Object.hasOwn(chars, w[j]!) ? chars[w[j]!]! : unknown);
    }),
  );
  return { charIds, wordLens: Int32Array.from(texts, (t) => t.length), shape: [texts.length, most, maxChars] };
}
