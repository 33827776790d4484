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

/** Whether one more job of `origin` fits its share, given each origin's queued count. */
export function shareAdmits(shares: QueueShares, queued: ReadonlyMap<string, number>, origin: string): boolean {
  let borrowed = 0;
  for (const n of queued.values()) borrowed += Math.max(0, n - shares.reserve);
  return (queued.get(origin) ?? 0) < shares.reserve || borrowed < shares.pool;
}
