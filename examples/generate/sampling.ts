/** Choosing the next token from a model's logits. */

/** Greedy at temperature 0; otherwise a draw from softmax(logits / temperature), cut to `topP`. */
export function sample(logits: Float32Array, temperature: number, topP: number, random: () => number): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
  if (temperature === 0) return best;
  const weights = Float64Array.from(logits, (l) => Math.exp((l - logits[best]!) / temperature));
  let order = Array.from(weights.keys());
  let sum = weights.reduce((a, b) => a + b, 0);
  if (topP < 1) {
    order.sort((a, b) => weights[b]! - weights[a]! || a - b);
    let kept = 0;
    let cumulative = 0;
    while (kept < order.length && cumulative < topP * sum) cumulative += weights[order[kept++]!]!;
    order = order.slice(0, kept);
    sum = cumulative;
  }
  let r = random() * sum;
  for (const i of order) {
    r -= weights[i]!;
    if (r < 0) return i;
  }
  return order.at(-1)!;
}
