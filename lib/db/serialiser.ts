// One at a time per key: a session's toolset changes, for one (two parallel activations each judged against
// the same "before" once passed a budget together).

/** Runs `fn` after every earlier call with the same key has settled; keys with nothing queued are forgotten. */
export function serialiser() {
  const tails = new Map<string, Promise<unknown>>();
  return <T>(key: string, fn: () => Promise<T>): Promise<T> => {
    const run = (tails.get(key) ?? Promise.resolve()).then(fn, fn);
    // Settled either way (the caller has `run`'s error), and then forgotten unless a later call followed.
    const forget = () => {
      if (tails.get(key) === tail) tails.delete(key);
    };
    const tail: Promise<void> = run.then(forget, forget);
    tails.set(key, tail);
    return run;
  };
}
