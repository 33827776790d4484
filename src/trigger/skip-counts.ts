// Counts of deliveries refused because no served repository takes them, per route, for GET /status.
// In memory: they describe this process's traffic (the log has each one), not the queue.

export interface SkipCounts {
  count(route: string): void;
  snapshot(): Record<string, number>;
}

export function createSkipCounts(): SkipCounts {
  const counts = new Map<string, number>();
  return {
    count(route) {
      counts.set(route, (counts.get(route) ?? 0) + 1);
    },
    snapshot() {
      return Object.fromEntries([...counts].sort(([a], [b]) => a.localeCompare(b)));
    },
  };
}
