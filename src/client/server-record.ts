// Finds the Control Plane as DESIGN §4 says: SVC_CONTROL_URL, then a live `~/.svc/control/server.json` ({url,pid},
// which control/main.ts writes), then the default port.
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { settingInt } from '../settings-registry.ts';
import { BadSettingError } from '../errors.ts';

export interface ServerRecord {
  url: string;
  pid: number;
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

/** Signal 0 checks existence; EPERM means the process exists but belongs to someone else. */
export function isPidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
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

export const DEFAULT_CONTROL_PORT = 47821;

/** The URL, and `via`: how it was found, for `svc control status` and error messages. */
export interface FoundControl {
  url: string;
  via: 'SVC_CONTROL_URL' | 'server.json' | 'default';
}

/** discoverControlUrl, but null where SVC_CONTROL_PORT=0 (any free port) leaves no default address to try: `svc
 * dashboard` then starts a Control Plane on a free port, as it did before clients refused 0. */
export function findControlUrl(env: NodeJS.ProcessEnv): FoundControl | null {
  const explicit = env.SVC_CONTROL_URL?.trim();
  if (explicit) return { url: explicit.replace(/\/+$/, ''), via: 'SVC_CONTROL_URL' };
  const record = readServerRecordFile(serverRecordFile(env));
  // A stale file (server killed without cleanup) must not win over the default port.
  if (record && isPidAlive(record.pid)) return { url: record.url.replace(/\/+$/, ''), via: 'server.json' };
  // A bad value exits 2 naming it, as for `svc control serve`: never a silent fall back to another server's port.
  const port = settingInt(env, 'SVC_CONTROL_PORT');
  return port === 0 ? null : { url: `http://127.0.0.1:${port}`, via: 'default' };
}

export function discoverControlUrl(env: NodeJS.ProcessEnv): FoundControl {
  const found = findControlUrl(env);
  if (found) return found;
  throw new BadSettingError('SVC_CONTROL_PORT=0 (any free port) names no port a client can reach: set ' +
    'SVC_CONTROL_URL to the Control Plane\'s address');
}
