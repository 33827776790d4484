// Finds the Control Plane the way DESIGN §4 says: SVC_CONTROL_URL, then a live server.json, then the default port.
import { serverRecordFile, readServerRecordFile, isPidAlive } from './server-record.ts';

export const DEFAULT_CONTROL_PORT = 47821;

export interface Discovered {
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
