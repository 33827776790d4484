// Reads the Control Plane's `~/.svc/control/server.json` ({url,pid}) without pulling in node:sqlite,
// so clients can discover a running server; main.ts writes the same file.
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export interface ServerRecord {
  url: string;
  pid: number;
}

/** `<HOME>/.svc/control/server.json`; HOME from the given environment so tests can point it at a temp dir. */
export function serverRecordFile(env: NodeJS.ProcessEnv): string {
  // The client is published on its own (package.json "exports"), so it imports nothing of svc: this is the one copy of
  // ~/.svc outside src/spawn/svc-paths.ts, kept in step by test/client/discover.test.ts.
  return join(env.HOME || homedir(), '.svc', 'control', 'server.json');
}

/**
 * The record, or null when the file is missing, unreadable or not `{url: string, pid: number}`; any other field
 * (dashboard.json's proc_start) comes along unchecked.
 */
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

/** Signal 0 checks existence; EPERM means the process exists but belongs to someone else. */
export function isPidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
