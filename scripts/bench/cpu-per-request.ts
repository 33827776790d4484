// Server CPU per request (utime + stime from /proc/<pid>/stat over a load round ÷ requests answered): unlike req/s and
// p99, it hardly moves when neighbours load the cores, so it decides between two ways of doing the same job.
import { readFileSync } from 'node:fs';
import { runLoadInWorker } from './worker-client.ts';
import type { LoadJob, LoadResult } from './load.ts';

/** utime + stime in µs (clock ticks of 10 ms) from a `stat` file: a process's, or one thread's under its task/. */
export function cpuUs(stat: string): number {
  const fields = readFileSync(stat, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** Runs a load job and adds the server's CPU per measured request (the warm-up's share of the CPU left out). */
export async function loadWithCpu(job: LoadJob, pid: number): Promise<LoadResult & { cpuUsPerRequest: number }> {
  const stat = `/proc/${pid}/stat`;
  const before = cpuUs(stat);
  const result = await runLoadInWorker(job);
  const measuredShare = job.durationMs / (job.warmupMs + job.durationMs);
  return { ...result, cpuUsPerRequest: ((cpuUs(stat) - before) * measuredShare) / Math.max(1, result.requests) };
}
