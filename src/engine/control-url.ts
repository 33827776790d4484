// Finds the Control Plane for svc's own commands and shipper (DESIGN §4): SVC_CONTROL_URL, then a live
// `~/.svc/control/server.json`, then SVC_CONTROL_PORT read as the server reads it. Outside src/client: the published
// client imports nothing of svc's settings.
import { isPidAlive, readServerRecordFile, serverRecordFile } from '../client/server-record.ts';
import { procStart } from './proc-group.ts';
import { settingInt } from '../settings-registry.ts';
import { BadSettingError } from '../errors.ts';

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
  const url = liveRecordUrl(env);
  // A stale file (server killed without cleanup) must not win over the default port.
  if (url !== null) return { url, via: 'server.json' };
  // A bad value exits 2 naming it, as for `svc control serve`: never a silent fall back to another server's port.
  const port = settingInt(env, 'SVC_CONTROL_PORT');
  return port === 0 ? null : { url: `http://127.0.0.1:${port}`, via: 'default' };
}

/**
 * The URL server.json names while the server that wrote it runs: its pid alive with the start time it recorded (a
 * record from an svc before start times: its pid alive); else null.
 */
export function liveRecordUrl(env: NodeJS.ProcessEnv): string | null {
  const record = readServerRecordFile(serverRecordFile(env));
  if (!record) return null;
  const started = record.proc_start;
  const live = typeof started === 'string' ? procStart(record.pid) === started : isPidAlive(record.pid);
  return live ? record.url.replace(/\/+$/, '') : null;
}

export function discoverControlUrl(env: NodeJS.ProcessEnv): FoundControl {
  const found = findControlUrl(env);
  if (found) return found;
  throw new BadSettingError('SVC_CONTROL_PORT=0 (any free port) names no port a client can reach: set ' +
    'SVC_CONTROL_URL to the Control Plane\'s address');
}
