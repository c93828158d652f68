/** Greedy CTC decoding of the recogniser's per-step class probabilities. */

/** One line's text and its confidence: the mean probability of the characters kept. */
export interface Reading {
  text: string;
  score: number;
}

/**
 * Reads `steps` × `classes` probabilities (row-major, from `at`): the most likely class at each
 * step, repeats merged and blanks (class 0) dropped.
 */
export function ctcGreedy(probs: Float32Array, steps: number, classes: number, characters: readonly string[], at = 0): Reading {
  let text = "";
  let sum = 0;
  let kept = 0;
  let previous = 0;
  for (let t = 0; t < steps; t++) {
    const row = at + t * classes;
    let best = 0;
    for (let c = 1; c < classes; c++) if (probs[row + c]! > probs[row + best]!) best = c;
    if (best !== 0 && best !== previous) {
      text += characters[best] ?? "";
      sum += probs[row + best]!;
      kept++;
    }
    previous = best;
  }
  return { text, score: kept === 0 ? 0 : sum / kept };
}
