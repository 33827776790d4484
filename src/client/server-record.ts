// Finds the Control Plane the way DESIGN §4 says: SVC_CONTROL_URL, then a live `~/.svc/control/server.json` ({url,pid},
// which control/main.ts writes), then the default port; without pulling in node:sqlite.
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

export const DEFAULT_CONTROL_PORT = 47821;

interface Discovered {
  url: string;
  /** How the URL was found, for `svc control status` and error messages. */
  via: 'SVC_CONTROL_URL' | 'server.json' | 'default';
}

export function discoverControlUrl(env: NodeJS.ProcessEnv): Discovered {
  const explicit = env.SVC_CONTROL_URL?.trim();
  if (explicit) return { url: explicit.replace(/\/+$/, ''), via: 'SVC_CONTROL_URL' };
  const record = readServerRecordFile(serverRecordFile(env));
  // A stale file (server killed without cleanup) must not win over the default port.
  if (record && isPidAlive(record.pid)) return { url: record.url.replace(/\/+$/, ''), via: 'server.json' };
  const portText = env.SVC_CONTROL_PORT?.trim();
  const valid = portText && /^\d+$/.test(portText) && Number(portText) > 0 && Number(portText) <= 65535;
  const port = valid ? Number(portText) : DEFAULT_CONTROL_PORT;
  return { url: `http://127.0.0.1:${port}`, via: 'default' };
}
