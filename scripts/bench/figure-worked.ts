// A worked-in Control Plane: a fresh process first ingests 200,000 runs over HTTP and serves list traffic, then
// /health, the uncached list and ingest are measured on that same process, and its RSS read afterwards. What a
// long-running server keeps (caches, statement maps, bus buffers, promoted garbage) shows up here and not on a
// fresh process.
import { join } from 'node:path';
import { startControl, rssMb } from './processes.ts';
import { runLoadInWorker } from './worker-client.ts';
import { compareWithCeiling, comparisonRow, describe, loadJob } from './compare.ts';
import { meetsBar } from './stats.ts';
import type { BenchContext } from './context.ts';
import type { Row } from './report.ts';

const BATCH = 500;
const ONE_BIG_INGEST = 5_000;
const GET_CONNECTIONS = 32;
const MAX_TIME_MS = 8_640_000_000_000_000;

/**
 * One large ingest (5,000 runs in a single request) on a fresh process of its own, then /health: an outside harness
 * once saw /health at 0.62–0.69× right after such an ingest. Its own process, so the worked-in rows below keep
 * measuring the same work as before.
 */
async function healthAfterOneBigIngest(ctx: BenchContext): Promise<Row> {
  const control = await startControl(join(ctx.tmp, 'one-big.db'), ctx.env);
  try {
    await runLoadInWorker({
      url: control.url, connections: 1, warmupMs: 0, durationMs: 600_000, maxRequests: 1,
      request: { kind: 'ingest-runs', batch: ONE_BIG_INGEST, source: 'one-big' }, expect: [200],
    });
    const health = await compareWithCeiling(ctx, loadJob(ctx, control.url, { kind: 'get', path: '/health' }, GET_CONNECTIONS));
    ctx.log(describe(`GET /health after one ${ONE_BIG_INGEST}-run ingest`, health));
    const row = comparisonRow(`GET /health right after one ${ONE_BIG_INGEST.toLocaleString('en-US')}-run ingest (one request)`,
      health, 'info: compare with GET /health (docs/bench.md: a cold process on shared cores varies ±25 %)', null);
    return { ...row, note: `${row.note ? `${row.note}; ` : ''}RSS afterwards ${rssMb(control.pid).toFixed(0)} MB` };
  } finally {
    await control.stop();
  }
}

export async function measureWorkedIn(ctx: BenchContext): Promise<Row[]> {
  const oneBig = await healthAfterOneBigIngest(ctx);
  const runs = ctx.options.quick ? 20_000 : 200_000;
  const control = await startControl(join(ctx.tmp, 'worked.db'), ctx.env);
  const size = runs.toLocaleString('en-US');
  try {
    // 1. Ingest `runs` new runs over HTTP, 500 per request, 4 connections.
    const ingest = await runLoadInWorker({
      url: control.url, connections: 4, warmupMs: 0, durationMs: 600_000, maxRequests: runs / BATCH,
      request: { kind: 'ingest-runs', batch: BATCH, source: 'worked' }, expect: [200],
    });
    if (ingest.unexpected) throw new Error(`ingesting runs answered ${JSON.stringify(ingest.statuses)}: ${ingest.sample ?? ''}`);
    const rssAfterIngest = rssMb(control.pid);
    ctx.log(`worked-in: ingested ${Math.round(ingest.unitsPerSecond)} runs/s over HTTP; RSS ${rssAfterIngest.toFixed(1)} MB`);
    // 2. Serve list traffic: uncached pages, then a repeated one, as a UI and its pollers would.
    const unique = { kind: 'get-unique', path: '/v1/runs?limit=50&until=@@N@@', base: MAX_TIME_MS } as const;
    await runLoadInWorker({ ...loadJob(ctx, control.url, unique, GET_CONNECTIONS), durationMs: 4000 });
    await runLoadInWorker({ ...loadJob(ctx, control.url, { kind: 'get', path: '/v1/runs?limit=500' }, GET_CONNECTIONS), durationMs: 2000 });

    // 3. Measure on the worked-in process.
    const health = await compareWithCeiling(ctx, loadJob(ctx, control.url, { kind: 'get', path: '/health' }, GET_CONNECTIONS));
    ctx.log(describe('worked-in GET /health', health));
    const list = await compareWithCeiling(ctx, loadJob(ctx, control.url, { ...unique, base: MAX_TIME_MS - 1e12 }, GET_CONNECTIONS));
    ctx.log(describe('worked-in GET /v1/runs uncached', list));
    const events = await runLoadInWorker(loadJob(ctx, control.url, { kind: 'ingest', batch: BATCH, source: 'worked' }, 4));
    ctx.log(`worked-in POST /v1/ingest: ${Math.round(events.unitsPerSecond)} events/s p99 ${events.latencyMs.p99.toFixed(1)} ms`);
    const rss = rssMb(control.pid);
    ctx.log(`worked-in RSS: ${rss.toFixed(1)} MB`);
    const worked = `worked-in (${size} runs ingested over HTTP, then list traffic)`;
    return [
      oneBig,
      comparisonRow(`${worked}: GET /health`, health, '≥ 0.85× ceiling', meetsBar(health.ratio, { kind: 'min', value: 0.85 })),
      // DESIGN §7: ratios to hello-world node:http are info rows (the list's bar is against its floor, above).
      comparisonRow(`${worked}: GET /v1/runs?limit=50, every request a cache miss`, list,
        'info: vs plain node:http (was ≥ 0.25× ceiling, p99 < 15 ms)', null),
      {
        figure: `${worked}: POST /v1/ingest (batches of ${BATCH})`, value: events.unitsPerSecond, unit: 'events/s',
        p50Ms: events.latencyMs.p50, p99Ms: events.latencyMs.p99, maxMs: events.latencyMs.max, bar: '≥ 100,000 events/s',
        pass: events.unexpected === 0 && meetsBar(events.unitsPerSecond, { kind: 'min', value: 100_000 }),
      },
      {
        figure: `${worked}: RSS after`, value: rss, unit: 'MB', bar: '< 150 MB', pass: meetsBar(rss, { kind: 'max', value: 150 }),
        note: `ingest of ${size} runs at ${Math.round(ingest.unitsPerSecond).toLocaleString('en-US')} runs/s; RSS right after it ${rssAfterIngest.toFixed(0)} MB`,
      },
    ];
  } finally {
    await control.stop();
  }
}
