// The Control Plane's own series (docs/deploy.md "Metrics"): runs by active state, live event streams and the DB
// size read when scraped; run durations and times to a running agent observed as ingest stores the runs' status events.
import type { EventRow } from '../db/events-store.ts';
import type { RunsStore } from '../db/runs-store.ts';
import { ACTIVE_STATUSES, TERMINAL } from '../run-json.ts';
import { str } from '../untrusted.ts';
import { eventData } from './event-bus.ts';
import { MetricsRegistry, createRequestMetrics, registerDbSize, type Histogram } from '../http/metrics.ts';

/** Seconds: an agent's run lasts minutes to hours. */
const RUN_BUCKETS = [10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800];
/** Seconds: a run is running within a fraction of a second to a few minutes of being queued (DESIGN §7). */
const AGENT_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900];

export type ControlMetrics = ReturnType<typeof createControlMetrics>;

export function createControlMetrics(runs: RunsStore, subscribers: () => number, dbPath: string) {
  const registry = new MetricsRegistry();
  const requests = createRequestMetrics(registry);
  registry.gauge('svc_control_runs', 'Runs that are not over yet (queued, running, blocked, stopping), by status',
    ['status'], () => {
      const counts = new Map<string, number>(ACTIVE_STATUSES.map((s) => [s, 0]));
      for (const row of runs.countActiveByStatus()) counts.set(row.status, row.n);
      return [...counts].map(([status, n]) => [[status], n] as const);
    });
  registry.gauge('svc_control_sse_subscribers', 'Open event streams (/v1/stream and run streams)', [],
    () => [[[], subscribers()]]);
  registerDbSize(registry, dbPath);
  const duration: Histogram = registry.histogram('svc_control_run_duration_seconds', 'Time from a run\'s start ' +
    'to its end, observed when its ending status arrives, by the status it ended in', ['status'], RUN_BUCKETS);
  const toAgent: Histogram = registry.histogram('svc_control_time_to_agent_seconds', 'Time from a run\'s start ' +
    '(queued) to its worker running it, observed when that status change arrives', [], AGENT_BUCKETS);
  return {
    registry,
    requests,
    /** Newly stored events, each observed once; `startedAt` saves looking each run up again. */
    observeEvents(rows: readonly EventRow[], startedAt: ReadonlyMap<string, number>): void {
      for (const row of rows) {
        if (row.kind !== 'run.status') continue;
        const data = eventData(row.data);
        // A resume's own moves (back to queued, to running, or back to its end when its worker did not start): the
        // run's start and end were observed already, and its `started_at` is the first start's.
        if (data.resumed === true) continue;
        const to = str(data.to);
        const first = to === 'running' && str(data.from) === 'queued';
        if (!first && (to === null || !TERMINAL.has(to))) continue;
        const started = startedAt.get(row.run);
        if (started === undefined) continue;
        const seconds = Math.max(0, (row.ts - started) / 1000);
        if (first) toAgent.observe([], seconds);
        else duration.observe([to!], seconds);
      }
    },
  };
}
