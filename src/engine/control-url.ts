// Finds the Control Plane for svc's own commands and shipper (DESIGN §4): SVC_CONTROL_URL, then a live
// `~/.svc/control/server.json`, then SVC_CONTROL_PORT read as the server reads it. Outside src/client: the published
// client imports nothing of svc's settings.
import { isPidAlive, readServerRecordFile, serverRecordFile } from '../client/server-record.ts';
import { procStart } from './proc-group.ts';
import { settingInt } from '../settings-registry.ts';
import { BadSettingError } from '../errors.ts';
import { causeOf, type ControlApiError } from '../client/client.ts';

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

/** The next step after a 401, for every svc command: where the token goes (systemd keeps it as a credential). */
const TOKEN_HINT = 'set SVC_CONTROL_TOKEN, or SVC_CONTROL_TOKEN_FILE to a file holding it '
  + '(under systemd: /etc/svc/credentials/control-token)';

/** The next step when nothing answers, for every svc command, by how the address was found (`via`). */
function startHint(via: string): string {
  if (via === 'SVC_CONTROL_URL') {
    return 'start the server SVC_CONTROL_URL names, or unset SVC_CONTROL_URL to use a local one';
  }
  if (via === '--url') return 'start the server --url names, or leave --url out to use a local one';
  const stale = via === 'server.json' ? 'the server recorded in ~/.svc/control/server.json does not answer; ' : '';
  return `${stale}start one with "svc control serve" (in this terminal) or "svc dashboard" (in the background), `
    + 'or set SVC_CONTROL_URL to where yours listens';
}

/**
 * "The Control Plane failed", in the one wording every svc command and the shipper use: nothing answered (why, and how
 * to start one), the token missing or refused (and where it goes), an answer cut short or not JSON, or what it
 * answered instead.
 */
export function controlFailed(err: ControlApiError, found: { url: string; via: string }, hasToken: boolean): string {
  const { url, via } = found;
  if (err.status === 0) {
    // fetch's own error (ENOTFOUND, ECONNREFUSED, a timeout): what to fix differs by it.
    const why = err.cause === undefined ? '' : ` (${causeOf(err.cause)})`;
    return `no Control Plane answered at ${url}${why}: ${startHint(via)}`;
  }
  // The client's sentence names the Control Plane and what was wrong with its answer already.
  if (err.code === 'bad_response') return err.message.replace(/^The /, 'the ');
  if (err.status === 401) {
    const what = hasToken ? 'refused the token svc sent' : 'needs a token';
    return `the Control Plane at ${url} ${what} (401 unauthorized): ${TOKEN_HINT}`;
  }
  return `the Control Plane at ${url} answered ${err.status} ${err.code} (${err.message})`;
}
