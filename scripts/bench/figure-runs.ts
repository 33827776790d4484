// Control Plane over the big runs DB: /health, the runs list (newest page, filtered, deep cursor) and RSS.
// The primary list rows ask for a new page every request, at 200,000 and at the full size.
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startControl, startServer, rssMb, type ServerProcess } from './processes.ts';
import { compareWithCeiling, compareWithFloor, comparisonRow, describe, loadJob } from './compare.ts';
import { ensureRunsDb } from './runs-db.ts';
import { meetsBar } from './stats.ts';
import type { BenchContext } from './context.ts';
import type { Row } from './report.ts';

const GET_CONNECTIONS = 32;
/** The largest time the API accepts (8.64e15 ms, what a Date can hold). */
const MAX_TIME_MS = 8_640_000_000_000_000;
/** The smaller DB the list is also measured on. */
const SMALL_RUNS = 200_000;
/** Every request `limit=50&until=<8.64e15 − n>`: the same newest page under a new filter, so every request makes a
 * page. */
const UNIQUE_PAGE = { kind: 'get-unique', path: '/v1/runs?limit=50&until=@@N@@', base: MAX_TIME_MS } as const;
// Against hello-world node:http: an info row since DESIGN §7 measures the list against its own floor (below).
const LIST_BAR = 'info: vs plain node:http (was ≥ 0.25× ceiling, p99 < 15 ms)';
/** DESIGN §7: the list against the plainest correct page (SELECT + JSON.stringify) in a bare node:http server. */
const FLOOR_BAR = '≥ 0.80× its floor, p99 ≤ 15 ms';
const FLOOR_SERVER = fileURLToPath(new URL('./runs-floor-server.ts', import.meta.url));

/** The primary list load against the floor: a bare server making the same page plainly over the same (pristine) DB. */
async function floorRow(ctx: BenchContext, url: string, pid: number, rows: number): Promise<Row> {
  const floor = await startServer([FLOOR_SERVER, ensureRunsDb(ctx.outDir, rows, ctx.log)], ctx.env);
  try {
    const c = await compareWithFloor(ctx, loadJob(ctx, url, UNIQUE_PAGE, GET_CONNECTIONS), floor.url,
      { target: pid, floor: floor.pid });
    ctx.log(describe(`GET /v1/runs?limit=50 (${rows} runs) vs its floor`, c));
    const label = `GET /v1/runs?limit=50 (${rows.toLocaleString('en-US')} runs), every request a different page, ` +
      'vs SELECT + JSON.stringify in bare node:http';
    return comparisonRow(label, c, FLOOR_BAR,
      meetsBar(c.ratio, { kind: 'min', value: 0.8 }) && meetsBar(c.p99Ms, { kind: 'max', value: 15 }),
      'the ceiling column is the floor\'s req/s');
  } finally {
    await floor.stop();
  }
}

/** Follows next_cursor with limit=500 to reach a page `depth` runs down the list. */
async function deepCursor(url: string, depth: number): Promise<string | null> {
  let cursor: string | null = null;
  for (let seen = 0; seen < depth; seen += 500) {
    const page = await fetch(`${url}/v1/runs?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    if (!page.ok) throw new Error(`paging /v1/runs answered ${page.status}: ${(await page.text()).slice(0, 200)}`);
    cursor = ((await page.json()) as { next_cursor: string | null }).next_cursor;
    if (!cursor) return null;
  }
  return cursor;
}

/** A Control Plane over a private copy of the cached `rows`-run DB (the cache stays pristine). */
async function controlOver(ctx: BenchContext, rows: number): Promise<ServerProcess> {
  const cached = ensureRunsDb(ctx.outDir, rows, ctx.log);
  const dbPath = join(ctx.tmp, `runs-${rows}.db`);
  copyFileSync(cached, dbPath);
  return startControl(dbPath, ctx.env);
}

async function helloWorldRow(ctx: BenchContext, url: string, rows: number): Promise<Row> {
  const c = await compareWithCeiling(ctx, loadJob(ctx, url, UNIQUE_PAGE, GET_CONNECTIONS));
  ctx.log(describe(`GET /v1/runs?limit=50 new pages (${rows} runs)`, c));
  const label = `GET /v1/runs?limit=50 (${rows.toLocaleString('en-US')} runs), a new page every request`;
  return comparisonRow(label, c, LIST_BAR, null);
}

export async function measureRunsFigures(ctx: BenchContext): Promise<Row[]> {
  const rows: Row[] = [];
  if (ctx.options.runs > SMALL_RUNS) {
    const small = await controlOver(ctx, SMALL_RUNS);
    try {
      rows.push(await helloWorldRow(ctx, small.url, SMALL_RUNS));
    } finally {
      await small.stop();
    }
  }
  const control = await controlOver(ctx, ctx.options.runs);
  const size = ctx.options.runs.toLocaleString('en-US');
  try {
    const health = await compareWithCeiling(ctx, loadJob(ctx, control.url, { kind: 'get', path: '/health' },
      GET_CONNECTIONS));
    ctx.log(describe('GET /health', health));
    // DESIGN §7: a ratio to hello-world node:http shows framework overhead, not the work: an info row.
    rows.unshift(comparisonRow('GET /health', health, 'info: vs plain node:http', null));

    // The primary list row (DESIGN §7): what producing a page costs against the floor of that work, and against the
    // hello-world ceiling.
    rows.push(await floorRow(ctx, control.url, control.pid, ctx.options.runs));
    rows.push(await helloWorldRow(ctx, control.url, ctx.options.runs));

    const plainPage = await compareWithCeiling(ctx, loadJob(ctx, ctx.ceiling.url, { kind: 'get', path: '/page' },
      GET_CONNECTIONS));
    ctx.log(describe('plain node:http, fixed 50-run page', plainPage));
    rows.push(comparisonRow('plain node:http, fixed 50-run page body (~28 KB)', plainPage,
      'info: what the payload alone costs', null));

    // The filtered and deep-cursor paths, a new page every request too (a new `until` above every run).
    const filteredPath = '/v1/runs?repo=acme%2Fapi&verdict=verified&limit=50&until=@@N@@';
    const filteredJob = { kind: 'get-unique', path: filteredPath, base: MAX_TIME_MS } as const;
    const filtered = await compareWithCeiling(ctx, loadJob(ctx, control.url, filteredJob, GET_CONNECTIONS));
    ctx.log(describe('GET /v1/runs?repo&verdict new pages', filtered));
    rows.push(comparisonRow('GET /v1/runs?repo=…&verdict=verified&limit=50, a new page every request', filtered,
      LIST_BAR, null));

    const depth = Math.min(50_000, Math.floor(ctx.options.runs / 2));
    const cursor = await deepCursor(control.url, depth);
    if (cursor) {
      const deepPath = `/v1/runs?limit=50&cursor=${encodeURIComponent(cursor)}&until=@@N@@`;
      const deepJob = { kind: 'get-unique', path: deepPath, base: MAX_TIME_MS } as const;
      const deep = await compareWithCeiling(ctx, loadJob(ctx, control.url, deepJob, GET_CONNECTIONS));
      ctx.log(describe(`GET /v1/runs cursor at ${depth} new pages`, deep));
      const label = `GET /v1/runs?limit=50&cursor=… (${depth.toLocaleString('en-US')} deep), a new page every request`;
      rows.push(comparisonRow(label, deep, LIST_BAR, null));
    }

    const rss = rssMb(control.pid);
    ctx.log(`Control Plane RSS after the runs load: ${rss.toFixed(1)} MB`);
    rows.push({
      figure: `RSS serving ${size} runs (after the load)`, value: rss, unit: 'MB', bar: '< 150 MB',
      pass: meetsBar(rss, { kind: 'max', value: 150 }),
    });
  } finally {
    await control.stop();
  }
  return rows;
}
