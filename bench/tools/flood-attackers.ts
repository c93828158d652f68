/**
 * The flood run's attackers in a process of their own (started by bench/scenarios/flood.ts over
 * IPC): its first argument is the AttackSettings as JSON. It starts the attacks at once, says
 * `{ started: true }`, and on the message "stop" lets go of everything and answers with each
 * attack's AttackStats, then exits.
 */
import { startAttacks, type AttackSettings } from "../lib/attacks.js";

const attacks = startAttacks(JSON.parse(process.argv[2]!) as AttackSettings);
process.send!({ started: true });
process.on("message", (message) => {
  if (message !== "stop") return;
  const stats = [...attacks.values()].map((a) => a.stop());
  process.send!({ stats }, () => process.exit(0));
});
