// Measures a target against the ceiling in alternating rounds (ceiling, target, ceiling, target, …) and
// keeps the medians, so a neighbour's burst of CPU use hits both sides instead of one.
import { runLoadInWorker } from './worker-client.ts';
import { loadWithCpu } from './cpu-per-request.ts';
import type { LoadJob, LoadResult } from './load.ts';
import type { BenchContext } from './context.ts';
import { median, ratio } from './stats.ts';
import type { Row } from './report.ts';

export interface Comparison {
  ceilingRps: number;
  target: LoadResult;
  rps: number;
  ratio: number;
  p50Ms: number;
  p99Ms: number;
  /** Worst single request over every round (5 × 2 s = 10 s measured in a full run). */
  maxMs: number;
  /** The floor's own worst request over its rounds, which alternate with the target's on the same machine: a stall
   * of the machine (other load, the load generator) shows in both. */
  floorMaxMs?: number;
  /** Each round's target / the ceiling round just before it, in order (shows the spread the median hides). */
  ratios: number[];
  /** Median server CPU per request (µs) of the target and of the floor, when their pids were given. */
  cpuUs?: { target: number; floor: number };
}

export function loadJob(
  ctx: BenchContext, url: string, request: LoadJob['request'], connections: number, expect = [200],
): LoadJob {
  return { url, connections, warmupMs: ctx.warmupMs, durationMs: ctx.durationMs, request, expect };
}

export async function compareWithCeiling(ctx: BenchContext, target: LoadJob): Promise<Comparison> {
  const ceilings: number[] = [];
  const results: LoadResult[] = [];
  // GETs are compared with the ceiling's tiny GET; a request with a body with the ceiling reading that same body.
  const sameBody = target.request.kind === 'trackerb' || target.request.kind === 'github';
  const request = sameBody ? target.request : { kind: 'get', path: '/health' } as const;
  const ceilingJob: LoadJob = { ...target, url: ctx.ceiling.url, request, expect: [200] };
  for (let i = 0; i < ctx.rounds; i++) {
    ceilings.push((await runLoadInWorker(ceilingJob)).rps);
    results.push(await runLoadInWorker(target));
  }
  const rps = median(results.map((r) => r.rps));
  const ceilingRps = median(ceilings);
  // Report the round whose throughput is the median, so rps and its latencies come from one run.
  const middle = results.slice().sort((a, b) => a.rps - b.rps)[Math.floor(results.length / 2)] as LoadResult;
  return {
    ceilingRps, target: middle, rps, ratio: ratio(rps, ceilingRps),
    p50Ms: median(results.map((r) => r.latencyMs.p50)), p99Ms: median(results.map((r) => r.latencyMs.p99)),
    maxMs: Math.max(...results.map((r) => r.latencyMs.max)), ratios: results.map((r, i) => ratio(r.rps, ceilings[i]!)),
  };
}

/**
 * Measures a target against the floor of its own work (DESIGN §7: a bare server doing only what the request needs,
 * e.g. the same page SQL): alternating rounds as with the ceiling, the floor answering the same requests.
 */
export async function compareWithFloor(
  ctx: BenchContext, target: LoadJob, floorUrl: string, pids?: { target: number; floor: number },
): Promise<Comparison> {
  const floors: number[] = [];
  let floorMaxMs = 0;
  const results: LoadResult[] = [];
  const cpu = { target: [] as number[], floor: [] as number[] };
  const floorJob: LoadJob = { ...target, url: floorUrl };
  for (let i = 0; i < ctx.rounds; i++) {
    const run = (job: LoadJob, pid: number | undefined) => (pid ? loadWithCpu(job, pid) : runLoadInWorker(job));
    const floor = await run(floorJob, pids?.floor);
    floors.push(floor.rps);
    floorMaxMs = Math.max(floorMaxMs, floor.latencyMs.max);
    const result = await run(target, pids?.target);
    results.push(result);
    if ('cpuUsPerRequest' in floor && 'cpuUsPerRequest' in result) {
      cpu.floor.push(floor.cpuUsPerRequest as number);
      cpu.target.push(result.cpuUsPerRequest as number);
    }
  }
  const rps = median(results.map((r) => r.rps));
  const floorRps = median(floors);
  const middle = results.slice().sort((a, b) => a.rps - b.rps)[Math.floor(results.length / 2)] as LoadResult;
  return { ceilingRps: floorRps, target: middle, rps, ratio: ratio(rps, floorRps),
    p50Ms: median(results.map((r) => r.latencyMs.p50)), p99Ms: median(results.map((r) => r.latencyMs.p99)),
    maxMs: Math.max(...results.map((r) => r.latencyMs.max)), floorMaxMs,
    ratios: results.map((r, i) => ratio(r.rps, floors[i]!)),
    ...(pids ? { cpuUs: { target: median(cpu.target), floor: median(cpu.floor) } } : {}) };
}

/** One line for the log: what was measured and any non-2xx answers (a failing figure should explain itself). */
export function describe(label: string, c: Comparison): string {
  const s = c.target;
  const bad = s.unexpected
    ? ` unexpected=${s.unexpected} statuses=${JSON.stringify(s.statuses)} sample=${s.sample ?? ''}` : '';
  const { p50, p99 } = s.latencyMs;
  const floorMax = c.floorMaxMs === undefined ? '' : ` (the floor's ${c.floorMaxMs.toFixed(1)} ms)`;
  const latency = `p50 ${p50.toFixed(2)} ms p99 ${p99.toFixed(2)} ms max ${c.maxMs.toFixed(1)} ms${floorMax}`;
  return `${label}: ${Math.round(c.rps)} req/s vs ceiling ${Math.round(c.ceilingRps)} (${c.ratio.toFixed(2)}×) ` +
    `${latency} (${c.ratios.map((r) => r.toFixed(2)).join('/')})${bad}`;
}

/** A table row for a comparison: value, p50/p99/max, ceiling, ratio, and every round's ratio in the notes. */
export function comparisonRow(figure: string, c: Comparison, bar: string, pass: boolean | null, note = ''): Row {
  const cpu = c.cpuUs
    ? `server CPU per request ${c.cpuUs.target.toFixed(0)} µs, floor ${c.cpuUs.floor.toFixed(0)} µs; ` : '';
  const floorMax = c.floorMaxMs === undefined ? '' : `the floor's own max ${c.floorMaxMs.toFixed(1)} ms; `;
  const rounds = `${cpu}${floorMax}rounds (target/ceiling): ${c.ratios.map((r) => `${r.toFixed(3)}×`).join(', ')}`;
  return {
    figure, value: c.rps, unit: 'req/s', p50Ms: c.p50Ms, p99Ms: c.p99Ms, maxMs: c.maxMs, ceiling: c.ceilingRps,
    ratio: c.ratio, bar,
    pass: pass === null ? null : c.target.unexpected === 0 && pass, note: note ? `${note}; ${rounds}` : rounds,
  };
}
