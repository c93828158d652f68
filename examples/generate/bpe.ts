/**
 * A byte-level BPE tokenizer, GPT-2's kind, learned here from a short built-in text and written
 * in the Hugging Face `tokenizers` format (tokenizer.json) that @huggingface/transformers reads.
 */

/** The one special token: end of text, also used as the beginning of an empty prompt. */
export const EOS = "<|endoftext|>";

// GPT-2's split of text into words before BPE: contractions, letters, digits, other symbols, spaces.
const PRE_TOKENIZE = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

// Byte-level BPE works on printable characters standing for bytes: printable Latin-1 bytes stand
// for themselves, the others for the characters from U+0100 on, in order (GPT-2's table).
function byteChars(): string[] {
  const chars: string[] = [];
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    chars.push(String.fromCodePoint(printable ? b : next++));
  }
  return chars;
}

/**
 * Learns byte-level BPE merges from `text` until the vocabulary holds `size` tokens (or no pair
 * is left): the most frequent adjacent pair is merged first, ties broken by the pair's spelling,
 * so the same text always gives the same tokenizer.
 */
export function trainBpe(text: string, size: number): { vocab: string[]; merges: [string, string][] } {
  const chars = byteChars();
  const encoder = new TextEncoder();
  const counts = new Map<string, number>();
  for (const [word] of text.matchAll(PRE_TOKENIZE)) {
    const key = Array.from(encoder.encode(word), (b) => chars[b]!).join("\u0000");
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const words = [...counts].map(([key, count]) => ({ parts: key.split("\u0000"), count }));
  const vocab = [...chars];
  const merges: [string, string][] = [];
  while (vocab.length < size) {
    const pairs = new Map<string, number>();
    for (const { parts, count } of words) {
      for (let i = 0; i + 1 < parts.length; i++) {
        const pair = `${parts[i]}\u0000${parts[i + 1]}`;
        pairs.set(pair, (pairs.get(pair) ?? 0) + count);
      }
    }
    let best: string | undefined;
    let bestCount = 0;
    for (const [pair, count] of pairs) {
      if (count > bestCount || (count === bestCount && pair < best!)) [best, bestCount] = [pair, count];
    }
    if (best === undefined) break;
    const [left, right] = best.split("\u0000") as [string, string];
    merges.push([left, right]);
    vocab.push(left + right);
    for (const word of words) {
      const parts: string[] = [];
      for (let i = 0; i < word.parts.length; i++) {
        if (word.parts[i] === left && word.parts[i + 1] === right) parts.push(left + right), i++;
        else parts.push(word.parts[i]!);
      }
      word.parts = parts;
    }
  }
  return { vocab, merges };
}

// The Hugging Face `tokenizers` format of a GPT-2-style byte-level BPE.
export function tokenizerJson(vocab: string[], merges: [string, string][]): unknown {
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [{ id: vocab.length, content: EOS, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: byteLevel,
    decoder: byteLevel,
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: "",
      end_of_word_suffix: "",
      fuse_unk: false,
      byte_fallback: false,
      vocab: Object.fromEntries([...vocab, EOS].map((token, id) => [token, id])),
      merges: merges.map(([a, b]) => `${a} ${b}`),
    },
  };
}

// The text the tokenizer learns its merges from: plain English about the project's subject, so
// that common words become single tokens.
export const CORPUS = `
A shoal is a group of fish that stay together. When the fish swim in the same direction, the group is a school.
Fish in a shoal find food faster, and they are safer from the fish that hunt them. A shoal can hold a few fish or
many thousands of them, and it moves as if it were one animal. Each fish keeps watch on the fish next to it and
turns when its neighbours turn.

Shoal is also the name of a model server written in TypeScript for Node.js. It takes requests from many clients,
gathers them into batches, and runs each batch through a model at once, because a model that answers eight
questions together takes little more time than a model that answers one. The server has stages, and each stage has
workers. A worker may run in a thread or in a process of its own. Requests wait in a queue until a batch is full or
until the oldest request has waited long enough. Then the batch goes to a free worker, and the answers go back to
the clients that asked.

A language model writes text one token at a time. It reads the prompt, then it predicts the next token, adds it to
the text, and predicts again, until it writes the end of the text or reaches the longest answer it may give. Each
step reuses the keys and the values it computed before, kept in a cache, so a step costs the same for the first
token and the last. When many clients ask at once, the server runs one step for all of their sequences together:
new sequences join between two steps and finished ones leave at once. This is continuous batching, and it keeps the
model busy while short answers end and long ones go on.

The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore. How much wood would a
woodchuck chuck if a woodchuck could chuck wood? One, two, three, four, five, six, seven, eight, nine, ten.
Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday. January, February, March, April, May, June,
July, August, September, October, November, December. 0 1 2 3 4 5 6 7 8 9 10 100 1000 2024 2025 2026.
What is the weather like today? It is sunny and warm, with a light wind from the sea. Tomorrow it will rain.
Hello, world! Hello from Shoal. Thank you. Please tell me a story about the sea, the fish and the boats.
Once upon a time there was a small fish who wanted to see the whole ocean. She swam past the rocks, past the
boats and past the light house, and every day she met new friends who showed her something she had never seen.
`;
