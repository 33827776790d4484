// A worked-in Control Plane, used the way a server is used before it is measured: a fresh process first takes
// ingest (200,000 runs over HTTP, then the fan-in of 100 runners with 20 SSE subscribers), then list traffic; only then
// are the list (against its floor over the same DB), /health and RSS measured on that same process. What a
// long-running server keeps (V8's state after ingest, statement maps, bus buffers, promoted garbage) shows up here and
// not on a fresh process.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startControl, startServer, rssMb } from './processes.ts';
import { runLoadInWorker } from './worker-client.ts';
import { compareWithCeiling, compareWithFloor, comparisonRow, describe, loadJob } from './compare.ts';
import { fanIn } from './figure-ingest.ts';
import { meetsBar } from './stats.ts';
import type { BenchContext } from './context.ts';
import type { Row } from './report.ts';

const BATCH = 500;
const GET_CONNECTIONS = 32;
const MAX_TIME_MS = 8_640_000_000_000_000;
const FLOOR_SERVER = fileURLToPath(new URL('./runs-floor-server.ts', import.meta.url));

export async function measureWorkedIn(ctx: BenchContext): Promise<Row[]> {
  const runs = ctx.options.quick ? 20_000 : 200_000;
  const dbPath = join(ctx.tmp, 'worked.db');
  const control = await startControl(dbPath, ctx.env);
  const worked =
    `worked-in (${runs.toLocaleString('en-US')} runs and the fan-in ingested over HTTP, then list traffic)`;
  try {
    // 1. Ingest first: `runs` finished runs, 500 per request, then 100 runners shipping live events.
    const ingest = await runLoadInWorker({
      url: control.url, connections: 4, warmupMs: 0, durationMs: 600_000, maxRequests: runs / BATCH,
      request: { kind: 'ingest-runs', batch: BATCH, source: 'worked' }, expect: [200],
    });
    if (ingest.unexpected) {
      throw new Error(`ingesting runs answered ${JSON.stringify(ingest.statuses)}: ${ingest.sample ?? ''}`);
    }
    const rows = await fanIn(ctx, control, dbPath, `${worked}: `);
    // 2. List traffic: new pages, then a big one, as a UI and its pollers would.
    const unique = { kind: 'get-unique', path: '/v1/runs?limit=50&until=@@N@@', base: MAX_TIME_MS } as const;
    await runLoadInWorker({ ...loadJob(ctx, control.url, unique, GET_CONNECTIONS), durationMs: 4000 });
    const page500 = loadJob(ctx, control.url, { kind: 'get', path: '/v1/runs?limit=500' }, GET_CONNECTIONS);
    await runLoadInWorker({ ...page500, durationMs: 2000 });

    // 3. Measure on the worked-in process; the floor reads the same DB file.
    const floor = await startServer([FLOOR_SERVER, dbPath], ctx.env);
    try {
      const job = loadJob(ctx, control.url, { ...unique, base: MAX_TIME_MS - 1e12 }, GET_CONNECTIONS);
      const list = await compareWithFloor(ctx, job, floor.url,
        { target: control.pid, floor: floor.pid });
      ctx.log(describe('worked-in GET /v1/runs vs its floor', list));
      rows.push(comparisonRow(`${worked}: GET /v1/runs?limit=50 vs SELECT + JSON.stringify in bare node:http`, list,
        '≥ 0.80× its floor, p99 ≤ 15 ms',
        meetsBar(list.ratio, { kind: 'min', value: 0.8 }) && meetsBar(list.p99Ms, { kind: 'max', value: 15 }),
        'the ceiling column is the floor\'s req/s'));
    } finally {
      await floor.stop();
    }
    const health = await compareWithCeiling(ctx, loadJob(ctx, control.url, { kind: 'get', path: '/health' },
      GET_CONNECTIONS));
    ctx.log(describe('worked-in GET /health', health));
    rows.push(comparisonRow(`${worked}: GET /health`, health, 'info: vs plain node:http', null));
    const rss = rssMb(control.pid);
    ctx.log(`worked-in RSS: ${rss.toFixed(1)} MB`);
    rows.push({
      figure: `${worked}: RSS after`, value: rss, unit: 'MB', bar: '≤ 150 MB',
      pass: meetsBar(rss, { kind: 'max', value: 150 }),
      note: `runs ingested at ${Math.round(ingest.unitsPerSecond).toLocaleString('en-US')} runs/s`,
    });
    return rows;
  } finally {
    await control.stop();
  }
}
