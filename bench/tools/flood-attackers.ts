/**
 * The flood run's attackers in a process of their own (started by bench/scenarios/flood.ts with
 * bench/lib/forked.ts): its setup is the AttackSettings. It starts the attacks at once, and on
 * "stop" lets go of everything, answers with each attack's AttackStats and exits.
 */
import { startAttacks, type AttackSettings } from "../lib/attacks.js";
import { answerQuestions } from "../lib/forked.js";

await answerQuestions((settings: AttackSettings) => {
  const attacks = startAttacks(settings);
  return (question) => (question === "stop" ? [...attacks.values()].map((a) => a.stop()) : undefined);
});
