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

/** Every core's busy time since boot from /proc/stat's first line, µs: all but idle and iowait; steal counts. */
export function machineBusyUs(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is inside user)
  return (f[0]! + f[1]! + f[2]! + f[5]! + f[6]! + f[7]!) * 10_000;
}

/** This process's CPU and that of its children it waited for (the servers and load workers once ended), µs. */
export function benchOwnUs(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return fields.slice(11, 15).reduce((sum, ticks) => sum + Number(ticks), 0) * 10_000;
}

/** Runs a load job and adds the server's CPU per measured request (the warm-up's share of the CPU left out). */
export async function loadWithCpu(job: LoadJob, pid: number): Promise<LoadResult & { cpuUsPerRequest: number }> {
  const stat = `/proc/${pid}/stat`;
  const before = cpuUs(stat);
  const result = await runLoadInWorker(job);
  const measuredShare = job.durationMs / (job.warmupMs + job.durationMs);
  return { ...result, cpuUsPerRequest: ((cpuUs(stat) - before) * measuredShare) / Math.max(1, result.requests) };
}
