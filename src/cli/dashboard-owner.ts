// The record of the Control Plane `svc dashboard` started (~/.svc/control/dashboard.json: pid, its /proc start time,
// url), and `svc dashboard stop`, which signals only that process: a server started any other way (a terminal,
// systemd, another HOME) is never this command's to stop, and a recycled pid never matches the recorded start time.
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { serverRecordFile, readServerRecordFile, isPidAlive } from '../client/server-record.ts';
import { procStart } from '../engine/proc-group.ts';
import { procList } from '../spawn/tree.ts';
import { FailedError } from '../errors.ts';
import { writeJsonAtomic } from '../engine/safe-fs.ts';

export interface DashboardServer {
  pid: number;
  proc_start: string;
  url: string;
}

export function dashboardRecordFile(env: NodeJS.ProcessEnv): string {
  return join(serverRecordFile(env), '..', 'dashboard.json');
}

/** Written once the server `svc dashboard` started answers; without a /proc start time nothing can be proven later. */
export function recordDashboardServer(env: NodeJS.ProcessEnv, pid: number, url: string): void {
  const start = procStart(pid);
  if (start !== null) writeJsonAtomic(dashboardRecordFile(env), { pid, proc_start: start, url }, 0o600);
}

function readDashboardRecord(path: string): DashboardServer | null {
  try {
    const value = JSON.parse(readFileSync(path, 'utf8')) as Partial<DashboardServer> | null;
    if (!value || !Number.isInteger(value.pid) || (value.pid as number) <= 1) return null;
    if (typeof value.proc_start !== 'string' || typeof value.url !== 'string') return null;
    return { pid: value.pid as number, proc_start: value.proc_start, url: value.url };
  } catch {
    return null;
  }
}

/** The recorded process is still the one started: same pid, same start time, and it is `svc control serve`. */
function isTheStartedServer(record: DashboardServer): boolean {
  if (procStart(record.pid) !== record.proc_start) return false;
  const argv = procList(record.pid, 'cmdline') ?? [];
  const at = argv.indexOf('control');
  return at >= 0 && argv[at + 1] === 'serve';
}

export type StopOutcome =
  | { stopped: true; pid: number; url: string }
  | { stopped: false; why: 'none' | 'gone' | 'not-ours'; pid?: number; url?: string };

const STOP_DEADLINE_MS = 30_000;

/**
 * SIGTERM to the server `svc dashboard` started, then waits for it to exit (it lets requests finish and closes its
 * database). `not-ours`: no such record, but server.json names a live Control Plane someone else started.
 */
export async function stopDashboardServer(env: NodeJS.ProcessEnv): Promise<StopOutcome> {
  const path = dashboardRecordFile(env);
  const record = readDashboardRecord(path);
  if (!record || !isTheStartedServer(record)) {
    rmSync(path, { force: true });
    const other = readServerRecordFile(serverRecordFile(env));
    if (other && isPidAlive(other.pid)) return { stopped: false, why: 'not-ours', pid: other.pid, url: other.url };
    return { stopped: false, why: record ? 'gone' : 'none' };
  }
  process.kill(record.pid, 'SIGTERM');
  const deadline = Date.now() + STOP_DEADLINE_MS;
  while (procStart(record.pid) === record.proc_start) {
    if (Date.now() > deadline) {
      throw new FailedError(`The Control Plane (pid ${record.pid}) is still shutting down after ` +
        `${STOP_DEADLINE_MS / 1000}s; see ~/.svc/control/server.log`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  rmSync(path, { force: true });
  return { stopped: true, pid: record.pid, url: record.url };
}
