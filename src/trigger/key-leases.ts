// Deliveries that share a dedupe key take turns: while one is between its cheap checks and its commit, a copy of
// it waits, then finds the committed job and answers "duplicate" without building a brief (51 copies of
// one errtrack delivery ran `git log` 51 times). Memory: one entry per key in flight, removed on release.

export interface KeyLeases {
  /** Resolves once no other holder has any of these keys; the returned function releases them (idempotent). */
  acquire(keys: readonly string[]): Promise<() => void>;
  /** Keys held right now (tests: back to 0 when traffic stops). */
  held(): number;
}

export function createKeyLeases(): KeyLeases {
  const holders = new Map<string, Promise<void>>();
  return {
    async acquire(keys) {
      const unique = [...new Set(keys)];
      for (;;) {
        const busy = unique.map((k) => holders.get(k)).filter((p): p is Promise<void> => p !== undefined);
        if (busy.length === 0) break;
        await Promise.all(busy);
      }
      let release!: () => void;
      const done = new Promise<void>((resolve) => (release = resolve));
      for (const k of unique) holders.set(k, done);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        for (const k of unique) if (holders.get(k) === done) holders.delete(k);
        release();
      };
    },
    held: () => holders.size,
  };
}
