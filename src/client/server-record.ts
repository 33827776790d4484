// The Control Plane's server record, `~/.svc/control/server.json` ({url,pid}, which control/main.ts writes), and its
// health: what svc's discovery (src/engine/control-url.ts) and `svc dashboard` read.
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export interface ServerRecord {
  url: string;
  pid: number;
  /** The server's start time (/proc/<pid>/stat field 22); a record an svc before it wrote has none. */
  proc_start?: string | undefined;
}

export function serverRecordFile(env: NodeJS.ProcessEnv): string {
  // The published client imports nothing of svc: the one copy of ~/.svc outside src/spawn/svc-paths.ts (a test
  // keeps them in step).
  return join(env.HOME || homedir(), '.svc', 'control', 'server.json');
}

/** The record, or null when it is not `{url: string, pid: number}`; other fields (proc_start) come unchecked. */
export function readServerRecordFile(path: string): (ServerRecord & Record<string, unknown>) | null {
  try {
    const value = JSON.parse(readFileSync(path, 'utf8')) as Partial<ServerRecord> | null;
    if (!value || typeof value.url !== 'string' || typeof value.pid !== 'number') return null;
    if (!Number.isInteger(value.pid) || value.pid <= 0) return null;
    return { ...value, url: value.url, pid: value.pid };
  } catch {
    return null;
  }
}

/** Whether a server answers 2xx on `<url>/health` within `timeoutMs`. */
export async function answersHealth(url: string, timeoutMs: number): Promise<boolean> {
  try {
    const res = await fetch(`${url.replace(/\/+$/, '')}/health`, { signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel();
    return res.ok;
  } catch {
    return false;
  }
}
