// POST /v1/ingest throughput in events/s, batches of 500, into a fresh Control Plane DB.
import { join } from 'node:path';
import { startControl, rssMb } from './processes.ts';
import { runLoadInWorker } from './worker-client.ts';
import { loadJob } from './compare.ts';
import { meetsBar } from './stats.ts';
import type { BenchContext } from './context.ts';
import type { Row } from './report.ts';

const BATCH = 500;
// SQLite has one writer: a few connections keep it busy without measuring queueing.
const CONNECTIONS = 4;

export async function measureIngest(ctx: BenchContext): Promise<Row[]> {
  const control = await startControl(join(ctx.tmp, 'ingest.db'), ctx.env);
  try {
    const result = await runLoadInWorker(loadJob(ctx, control.url, { kind: 'ingest', batch: BATCH, source: 'bench' }, CONNECTIONS));
    const bad = result.unexpected ? ` unexpected=${result.unexpected} statuses=${JSON.stringify(result.statuses)} sample=${result.sample ?? ''}` : '';
    ctx.log(`POST /v1/ingest: ${Math.round(result.unitsPerSecond)} events/s (${Math.round(result.rps)} batches/s) p99 ${result.latencyMs.p99.toFixed(1)} ms${bad}`);
    const rss = rssMb(control.pid);
    return [{
      figure: `POST /v1/ingest (batches of ${BATCH})`, value: result.unitsPerSecond, unit: 'events/s', p50Ms: result.latencyMs.p50,
      p99Ms: result.latencyMs.p99, bar: '≥ 100,000 events/s',
      pass: result.unexpected === 0 && meetsBar(result.unitsPerSecond, { kind: 'min', value: 100_000 }),
      note: `${CONNECTIONS} connections, ${result.requests} batches measured; server RSS afterwards ${rss.toFixed(0)} MB`,
    }];
  } finally {
    await control.stop();
  }
}
