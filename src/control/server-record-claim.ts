// Writes and removes ~/.svc/control/server.json ({url,pid}), the record clients find the Control Plane by
// (src/client/server-record.ts reads it). One record, one owner: a second Control Plane (on another port, or one
// that failed to bind) never replaces the record of a first one that still answers, and a server removes the record
// on exit only when it is its own (pid check), so the first stays findable.
import { mkdirSync, writeFileSync, rmSync, renameSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { readServerRecordFile, isPidAlive, type ServerRecord } from '../client/server-record.ts';

const PROBE_MS = 500;

function recordPath(svcHome: string): string {
  return join(svcHome, 'control', 'server.json');
}

/** Written atomically so a client never reads half a record. */
function writeRecord(svcHome: string, record: ServerRecord): void {
  const path = recordPath(svcHome);
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(record) + '\n', { mode: 0o600 });
  renameSync(tmp, path);
}

/** Whether a Control Plane answers /health at url (loopback or wherever the record says it listens). */
async function answers(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url.replace(/\/+$/, '')}/health`, { signal: AbortSignal.timeout(PROBE_MS) });
    await res.body?.cancel();
    return res.ok;
  } catch {
    return false;
  }
}

/**
 * Records this server unless the file names another live Control Plane: its pid alive and its URL answering /health
 * (a dead pid, a recycled pid or a silent URL is a stale record, taken over). Answers the record kept instead, if any.
 */
export async function claimServerRecord(svcHome: string, own: ServerRecord): Promise<ServerRecord | null> {
  const found = readServerRecordFile(recordPath(svcHome));
  if (found && found.pid !== own.pid && isPidAlive(found.pid) && (await answers(found.url))) return found;
  writeRecord(svcHome, own);
  return null;
}

/** Removes the record only when it is this process's own. */
export function releaseServerRecord(svcHome: string, pid: number): void {
  if (readServerRecordFile(recordPath(svcHome))?.pid === pid) rmSync(recordPath(svcHome), { force: true });
}
