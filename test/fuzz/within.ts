/**
 * Asks `check` every 250 ms, for up to `ms`, until it finds nothing wrong. Resolves with undefined
 * then, or with the last problem it named (a thrown error counts as one) once the time is up.
 * Used after a fuzz or chaos run, when the server needs a moment to settle.
 */
export async function within(ms: number, check: () => Promise<string | undefined>): Promise<string | undefined> {
  const end = Date.now() + ms;
  let last: string | undefined;
  do {
    try {
      last = await check();
    } catch (err) {
      last = (err as Error).message;
    }
    if (last === undefined) return undefined;
    await new Promise((r) => setTimeout(r, 250));
  } while (Date.now() < end);
  return last;
}
