// Fan-in (DESIGN §7): 100 runners shipping to one Control Plane while 20 SSE subscribers watch /v1/stream. Each runner
// is one keep-alive connection shipping one run the way src/engine/shipper.ts does: every 200 ms (or
// once its last batch was accepted, when that took longer) a POST /v1/ingest with the run's JSON and the events its
// run wrote since, at most 500. Every event carries its send time, so the subscribers measure the lag from a runner's
// send to their screen; the DB's event count says what they all should have received.
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { startControl, rssMb, type ServerProcess } from './processes.ts';
import { openSseInWorkers } from './worker-client.ts';
import { loadWithCpu } from './cpu-per-request.ts';
import { meetsBar } from './stats.ts';
import type { BenchContext } from './context.ts';
import type { Row } from './report.ts';

export const RUNNERS = 100;
const SUBSCRIBERS = 20;
/**
 * Each run writes 420 events a second: 42,000 offered, 5 % over the bar (40,000 accepted) so that edge effects of the
 * window are no question, and not so far over it that the row measures a saturated server's queue instead.
 */
const EVENTS_PER_RUN_SECOND = 420;
const TICK_MS = 200;
/**
 * The row's note gives the p99 of the batches sent in the window's first 2 s apart from the rest: on a fresh server
 * the slow batches were all there (docs/bench-history.md, "The fan-in: where a fresh row's p99 comes from").
 */
const EARLY_MS = 2_000;

/** Runs the fan-in load on `control` (whose DB is `dbPath`) and returns its rows, labelled with `prefix`. */
export async function fanIn(ctx: BenchContext, control: ServerProcess, dbPath: string, prefix = ''): Promise<Row[]> {
  const session = await openSseInWorkers({ url: control.url, path: '/v1/stream', subscribers: SUBSCRIBERS }, 2);
  const before = countEvents(dbPath);
  const load = await loadWithCpu({
    url: control.url, connections: RUNNERS, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs * ctx.rounds,
    intervalMs: TICK_MS, expect: [200], splitMs: EARLY_MS,
    request: {
      kind: 'ingest', batch: (EVENTS_PER_RUN_SECOND * TICK_MS) / 1000, perSecond: EVENTS_PER_RUN_SECOND,
      source: 'fanin',
    },
  }, control.pid).catch(async (err: unknown) => {
    // The subscriber processes end only when told to: a failed load (a runner's `read ECONNRESET` on a machine at load
    // average 15) left them running and the bench waiting on them for ever.
    await session.finish(0, 0);
    throw err;
  });
  // Server CPU per accepted event (all its work: ingest and the fan-out to the subscribers), and what one core makes
  // of it.
  const cpuPerEvent = (load.cpuUsPerRequest * load.requests) / Math.max(1, load.unitsPerSecond * load.seconds);
  const stored = countEvents(dbPath) - before;
  const sse = await session.finish(stored, 5_000);
  const lost = stored * session.connected - sse.delivered;
  const bad = load.unexpected
    ? ` unexpected=${load.unexpected} ${JSON.stringify(load.statuses)} ${load.sample ?? ''}` : '';
  ctx.log(`fan-in: ${Math.round(load.unitsPerSecond)} events/s, ingest p99 ${load.latencyMs.p99.toFixed(1)} ms; SSE ` +
    `${sse.delivered}/${stored * session.connected} delivered, lag p99 ${sse.p99.toFixed(1)} ms${bad}`);
  const { before: first, after: later } = load.split!;
  const early = `${first.p99.toFixed(1)} ms for those sent in the first ${EARLY_MS / 1000} s, ` +
    `${later.p99.toFixed(1)} ms after`;
  const label = `${prefix}${RUNNERS} runners → one Control Plane ` +
    `(${RUNNERS * EVENTS_PER_RUN_SECOND} events/s offered), ${SUBSCRIBERS} SSE subscribers`;
  return [
    {
      figure: `${label}: events accepted`, value: load.unitsPerSecond, unit: 'events/s', p50Ms: load.latencyMs.p50,
      p99Ms: load.latencyMs.p99, maxMs: load.latencyMs.max, bar: '≥ 40,000 events/s, ingest p99 ≤ 250 ms',
      pass: load.unexpected === 0 && meetsBar(load.unitsPerSecond, { kind: 'min', value: 40_000 })
        && meetsBar(load.latencyMs.p99, { kind: 'max', value: 250 }),
      note: `${load.requests} batches measured (ingest p99 ${early}); server CPU ${cpuPerEvent.toFixed(1)} µs per ` +
        `event (one core: ${Math.round(1e6 / cpuPerEvent).toLocaleString('en-US')} events/s); server RSS ` +
        `afterwards ${rssMb(control.pid).toFixed(0)} MB`,
    },
    {
      figure: `${label}: SSE lag (runner send → subscriber)`, value: sse.p99, unit: 'ms p99', p50Ms: sse.p50,
      p99Ms: sse.p99, maxMs: sse.max, bar: 'p99 ≤ 1 s, 0 lost',
      pass: session.failed === 0 && lost === 0 && meetsBar(sse.p99, { kind: 'max', value: 1000 }),
      note: `${stored} events stored × ${session.connected} subscribers: ${lost} not delivered within 5 s; ` +
        `${sse.reconnects} streams cut off for lagging and resumed with Last-Event-ID`,
    },
  ];
}

function countEvents(dbPath: string): number {
  const db = new DatabaseSync(dbPath, { readOnly: true });
  try {
    return Number((db.prepare('SELECT count(*) AS n FROM events').get() as { n: number }).n);
  } finally {
    db.close();
  }
}

export async function measureIngest(ctx: BenchContext): Promise<Row[]> {
  const dbPath = join(ctx.tmp, 'fan-in.db');
  const control = await startControl(dbPath, ctx.env);
  try {
    return await fanIn(ctx, control, dbPath);
  } finally {
    await control.stop();
  }
}
