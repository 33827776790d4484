// Measures a target against the ceiling in alternating rounds (ceiling, target, ceiling, target, …) and
// keeps the medians, so a neighbour's burst of CPU use hits both sides instead of one.
import { runLoadInWorker } from './worker-client.ts';
import type { LoadJob, LoadResult } from './load.ts';
import type { BenchContext } from './context.ts';
import { median, ratio } from './stats.ts';

export interface Comparison {
  ceilingRps: number;
  target: LoadResult;
  rps: number;
  ratio: number;
  p50Ms: number;
  p99Ms: number;
}

export function loadJob(ctx: BenchContext, url: string, request: LoadJob['request'], connections: number, expect = [200]): LoadJob {
  return { url, connections, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, request, expect };
}

export async function compareWithCeiling(ctx: BenchContext, target: LoadJob): Promise<Comparison> {
  const ceilings: number[] = [];
  const results: LoadResult[] = [];
  const ceilingJob: LoadJob = { ...target, url: ctx.ceiling.url, request: { kind: 'get', path: '/health' }, expect: [200] };
  for (let i = 0; i < ctx.rounds; i++) {
    ceilings.push((await runLoadInWorker(ceilingJob)).rps);
    results.push(await runLoadInWorker(target));
  }
  const rps = median(results.map((r) => r.rps));
  const ceilingRps = median(ceilings);
  // Report the round whose throughput is the median, so rps and its latencies come from one run.
  const middle = results.slice().sort((a, b) => a.rps - b.rps)[Math.floor(results.length / 2)] as LoadResult;
  return { ceilingRps, target: middle, rps, ratio: ratio(rps, ceilingRps), p50Ms: median(results.map((r) => r.latencyMs.p50)), p99Ms: median(results.map((r) => r.latencyMs.p99)) };
}

/** One line for the log: what was measured and any non-2xx answers (a failing figure should explain itself). */
export function describe(label: string, c: Comparison): string {
  const s = c.target;
  const bad = s.unexpected ? ` unexpected=${s.unexpected} statuses=${JSON.stringify(s.statuses)} sample=${s.sample ?? ''}` : '';
  return `${label}: ${Math.round(c.rps)} req/s vs ceiling ${Math.round(c.ceilingRps)} (${c.ratio.toFixed(2)}×) p50 ${s.latencyMs.p50.toFixed(2)} ms p99 ${s.latencyMs.p99.toFixed(2)} ms${bad}`;
}
