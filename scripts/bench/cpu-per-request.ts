// Server CPU per request (utime + stime from /proc/<pid>/stat over a load round ÷ requests answered): unlike req/s and
// p99, it hardly moves when neighbours load the cores, so it decides between two ways of doing the same job.
import { readFileSync } from 'node:fs';
import { runLoadInWorker } from './worker-client.ts';
import type { LoadJob, LoadResult } from './load.ts';

/** utime + stime of a process in µs (clock ticks of 10 ms). */
function cpuUs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

export async function loadWithCpu(job: LoadJob, pid: number): Promise<LoadResult & { cpuUsPerRequest: number }> {
  const before = cpuUs(pid);
  const result = await runLoadInWorker({ ...job, warmupMs: 0 });
  return { ...result, cpuUsPerRequest: (cpuUs(pid) - before) / Math.max(1, result.requests) };
}
