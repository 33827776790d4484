// A small seeded PRNG (mulberry32) for the fuzz suites: the same seed gives the same request sequence, so a
// failure printed with its seed can be replayed with SVC_FUZZ_SEED=<seed>.

export interface Rng {
  readonly seed: number;
  /** Uniform in [0, 1). */
  next(): number;
  /** Integer in [0, n). */
  int(n: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
}

export function createRng(seed: number): Rng {
  let state = seed >>> 0;
  function next(): number {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  const rng: Rng = {
    seed,
    next,
    int: (n) => Math.floor(next() * n),
    pick: (items) => items[Math.floor(next() * items.length)]!,
    chance: (p) => next() < p,
  };
  return rng;
}

/** SVC_FUZZ_SEED when set (to replay a failure), else a fresh seed per run so CI keeps exploring. */
export function fuzzSeed(): number {
  const given = process.env.SVC_FUZZ_SEED;
  if (given !== undefined && /^\d{1,10}$/.test(given)) return Number(given) >>> 0;
  return (Date.now() ^ (process.pid << 16)) >>> 0;
}

/** SVC_FUZZ_REQUESTS scales a suite's request count (a positive integer); the default keeps CI under a minute. */
export function fuzzCount(fallback: number): number {
  const given = process.env.SVC_FUZZ_REQUESTS;
  return given !== undefined && /^\d{1,7}$/.test(given) && Number(given) > 0 ? Number(given) : fallback;
}
