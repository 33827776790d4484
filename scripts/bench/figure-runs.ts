// Control Plane over the big runs DB: /health, the runs list (newest page, filtered, deep cursor) and RSS.
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { startControl, rssMb } from './processes.ts';
import { compareWithCeiling, describe, loadJob } from './compare.ts';
import { ensureRunsDb } from './runs-db.ts';
import { meetsBar } from './stats.ts';
import type { BenchContext } from './context.ts';
import type { Row } from './report.ts';

const GET_CONNECTIONS = 32;
/** The largest time the API accepts (8.64e15 ms, what a Date can hold). */
const MAX_TIME_MS = 8_640_000_000_000_000;

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

export async function measureRunsFigures(ctx: BenchContext): Promise<Row[]> {
  const rows: Row[] = [];
  const cached = ensureRunsDb(ctx.outDir, ctx.options.runs, ctx.log);
  // Serve a copy: the cache stays pristine whatever the server writes.
  const dbPath = join(ctx.tmp, 'runs.db');
  copyFileSync(cached, dbPath);
  const control = await startControl(dbPath, ctx.env);
  const size = ctx.options.runs.toLocaleString('en-US');
  try {
    const health = await compareWithCeiling(ctx, loadJob(ctx, control.url, { kind: 'get', path: '/health' }, GET_CONNECTIONS));
    ctx.log(describe('GET /health', health));
    rows.push({
      figure: 'GET /health', value: health.rps, unit: 'req/s', p50Ms: health.p50Ms, p99Ms: health.p99Ms,
      ceiling: health.ceilingRps, ratio: health.ratio, bar: '≥ 0.85× ceiling',
      pass: health.target.unexpected === 0 && meetsBar(health.ratio, { kind: 'min', value: 0.85 }),
    });

    // The primary list row (DESIGN §7): every request a different `until` just above all runs, so the same newest
    // page but never a response-cache hit. This is what producing a page costs, and what the bar is about.
    const uniquePage = { kind: 'get-unique', path: '/v1/runs?limit=50&until=@@N@@', base: MAX_TIME_MS } as const;
    const uncached = await compareWithCeiling(ctx, loadJob(ctx, control.url, uniquePage, GET_CONNECTIONS));
    ctx.log(describe('GET /v1/runs?limit=50 uncached', uncached));
    rows.push({
      figure: `GET /v1/runs?limit=50 (${size} runs), every request a cache miss`, value: uncached.rps, unit: 'req/s',
      p50Ms: uncached.p50Ms, p99Ms: uncached.p99Ms, ceiling: uncached.ceilingRps, ratio: uncached.ratio,
      bar: '≥ 0.25× ceiling, p99 < 15 ms',
      pass: uncached.target.unexpected === 0 && meetsBar(uncached.ratio, { kind: 'min', value: 0.25 }) &&
        meetsBar(uncached.p99Ms, { kind: 'max', value: 15 }),
    });

    // Secondary: the same request repeated, a response-cache hit from its third ask (what a polling dashboard gets).
    const list = await compareWithCeiling(ctx, loadJob(ctx, control.url, { kind: 'get', path: '/v1/runs?limit=50' }, GET_CONNECTIONS));
    ctx.log(describe('GET /v1/runs?limit=50 cached', list));
    rows.push({
      figure: 'GET /v1/runs?limit=50, same page repeated (cache hit)', value: list.rps, unit: 'req/s', p50Ms: list.p50Ms,
      p99Ms: list.p99Ms, ceiling: list.ceilingRps, ratio: list.ratio, bar: 'info: the cached page', pass: null,
    });

    const plainPage = await compareWithCeiling(ctx, loadJob(ctx, ctx.ceiling.url, { kind: 'get', path: '/page' }, GET_CONNECTIONS));
    ctx.log(describe('plain node:http, fixed 50-run page', plainPage));
    rows.push({
      figure: 'plain node:http, fixed 50-run page body (~28 KB)', value: plainPage.rps, unit: 'req/s', p50Ms: plainPage.p50Ms,
      p99Ms: plainPage.p99Ms, ceiling: plainPage.ceilingRps, ratio: plainPage.ratio, bar: 'info: what the payload alone costs', pass: null,
    });

    const filtered = await compareWithCeiling(
      ctx, loadJob(ctx, control.url, { kind: 'get', path: '/v1/runs?repo=acme%2Fapi&verdict=verified&limit=50' }, GET_CONNECTIONS));
    ctx.log(describe('GET /v1/runs?repo&verdict', filtered));
    rows.push({
      figure: 'GET /v1/runs?repo=…&verdict=verified&limit=50', value: filtered.rps, unit: 'req/s', p50Ms: filtered.p50Ms,
      p99Ms: filtered.p99Ms, ceiling: filtered.ceilingRps, ratio: filtered.ratio, bar: 'list bar; repeated, so a cache hit',
      pass: filtered.target.unexpected === 0 && meetsBar(filtered.ratio, { kind: 'min', value: 0.25 }) && meetsBar(filtered.p99Ms, { kind: 'max', value: 15 }),
    });

    const depth = Math.min(50_000, Math.floor(ctx.options.runs / 2));
    const cursor = await deepCursor(control.url, depth);
    if (cursor) {
      const deep = await compareWithCeiling(
        ctx, loadJob(ctx, control.url, { kind: 'get', path: `/v1/runs?limit=50&cursor=${encodeURIComponent(cursor)}` }, GET_CONNECTIONS));
      ctx.log(describe(`GET /v1/runs cursor at ${depth}`, deep));
      rows.push({
        figure: `GET /v1/runs?limit=50&cursor=… (${depth.toLocaleString('en-US')} deep)`, value: deep.rps, unit: 'req/s',
        p50Ms: deep.p50Ms, p99Ms: deep.p99Ms, ceiling: deep.ceilingRps, ratio: deep.ratio, bar: 'list bar; repeated, so a cache hit',
        pass: deep.target.unexpected === 0 && meetsBar(deep.ratio, { kind: 'min', value: 0.25 }) && meetsBar(deep.p99Ms, { kind: 'max', value: 15 }),
      });
    }

    const rss = rssMb(control.pid);
    ctx.log(`Control Plane RSS after the runs load: ${rss.toFixed(1)} MB`);
    rows.push({ figure: `RSS serving ${size} runs (after the load)`, value: rss, unit: 'MB', bar: '< 150 MB', pass: meetsBar(rss, { kind: 'max', value: 150 }) });
  } finally {
    await control.stop();
  }
  return rows;
}
