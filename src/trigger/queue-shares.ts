// How the bounded queue is shared between routes, so a flood on one route can never 429 another.
// Half of SVC_TRIGGER_QUEUE_MAX is reserved, split evenly between the routes that are configured; the other half
// is a pool any route may borrow from, first come. A route is answered 429 only when its own reserve is used up
// and the pool is full. Plain data.

export interface QueueShares {
  /** Queued jobs every configured route can always place, whatever the other routes did. */
  reserve: number;
  /** Queued jobs beyond their reserve that all routes together may hold. */
  pool: number;
}

/**
 * Shares for `max` waiting jobs over `routes` configured routes. The reserve is at least one job, so with a tiny
 * queue (max < 2 × routes) the bound is `routes × 1` rather than `max`: fairness wins over the exact figure.
 */
export function queueShares(max: number, routes: number): QueueShares {
  const n = Math.max(1, routes);
  const reserve = Math.max(1, Math.floor(max / (2 * n)));
  return { reserve, pool: Math.max(0, max - n * reserve) };
}

/** One transaction's view of the queue: each origin's queued count and how much of the pool is borrowed. */
export interface ShareLedger {
  /** Whether one more job of `origin` fits its share. */
  admits(origin: string): boolean;
  /** Counts a job placed for `origin` (call only after admits() said yes). */
  take(origin: string): void;
}

export function shareLedger(shares: QueueShares, queued: ReadonlyMap<string, number>): ShareLedger {
  const counts = new Map(queued);
  let borrowed = 0;
  for (const n of counts.values()) borrowed += Math.max(0, n - shares.reserve);
  return {
    admits(origin) {
      return (counts.get(origin) ?? 0) < shares.reserve || borrowed < shares.pool;
    },
    take(origin) {
      const n = (counts.get(origin) ?? 0) + 1;
      counts.set(origin, n);
      if (n > shares.reserve) borrowed++;
    },
  };
}
