// Finds the Control Plane for svc's own commands and shipper (DESIGN §4): SVC_CONTROL_URL, then a live
// `~/.svc/control/server.json`, then SVC_CONTROL_PORT read as the server reads it; and the one rule for which token
// goes there (the home file only to this machine's own Control Plane). Outside src/client: the published client
// imports nothing of svc's settings.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { readServerRecordFile, serverRecordFile, type ServerRecord } from '../client/server-record.ts';
import { procStart } from '../proc-stat.ts';
import { orNull, procList } from '../spawn/tree.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { isLoopbackHost } from '../http/guards.ts';
import { setting, settingInt } from '../settings-registry.ts';
import { BadSettingError } from '../errors.ts';
import { causeOf, type ControlApiError } from '../client/client.ts';

/** The URL, and `via`: how it was found, for `svc control status` and error messages. */
interface FoundControl {
  url: string;
  via: 'SVC_CONTROL_URL' | 'server.json' | 'SVC_CONTROL_PORT' | 'default';
}

/** How the Control Plane was found, or `--url` a person gave. */
export interface ControlFound {
  url: string;
  via: FoundControl['via'] | '--url';
}

/** discoverControlUrl, but null where SVC_CONTROL_PORT=0 (any free port) leaves no default address to try: `svc
 * dashboard` then starts a Control Plane on a free port, as it did before clients refused 0. */
export function findControlUrl(env: NodeJS.ProcessEnv): FoundControl | null {
  // A malformed value exits 2 naming it (its pattern); only a well-formed one nothing answers at is exit 1.
  const explicit = setting(env, 'SVC_CONTROL_URL')?.trim();
  if (explicit) return { url: explicit.replace(/\/+$/, ''), via: 'SVC_CONTROL_URL' };
  // A bad value exits 2 naming it, as for `svc control serve`, even where server.json wins: a typo is never ignored.
  const port = settingInt(env, 'SVC_CONTROL_PORT');
  const url = liveRecordUrl(env);
  // A stale file (server killed without cleanup) must not win over the default port.
  if (url !== null) return { url, via: 'server.json' };
  if (port === 0) return null;
  return { url: `http://127.0.0.1:${port}`, via: setting(env, 'SVC_CONTROL_PORT') ? 'SVC_CONTROL_PORT' : 'default' };
}

/** The URL server.json names while the server that wrote it runs (isLiveRecord); else null. */
function liveRecordUrl(env: NodeJS.ProcessEnv): string | null {
  const record = readServerRecordFile(serverRecordFile(env));
  return record && isLiveRecord(record) ? record.url.replace(/\/+$/, '') : null;
}

/**
 * Whether the server that wrote `record` runs: its pid alive with the start time it recorded; a record without one
 * (an svc before start times, or a host without /proc) while its pid is this user's `svc control serve`. A pid another
 * process reused, above all another user's, names no Control Plane of ours.
 */
export function isLiveRecord(record: ServerRecord): boolean {
  const started = record.proc_start;
  return typeof started === 'string' ? procStart(record.pid) === started : isOwnControlServe(record.pid);
}

/**
 * Whether process `pid` is a `svc control serve` of this user: its command line `… control serve` (a `--verbose`
 * anywhere, which cli.ts drops, aside) and its /proc entry owned by this user. Without /proc (not Linux) there is no
 * command line to read: signal 0 reaching it (not EPERM, another user's) is all there is to ask.
 */
export function isOwnControlServe(pid: number): boolean {
  const argv = procList(pid, 'cmdline')?.filter((arg) => arg !== '--verbose');
  if (argv === undefined) return !existsSync('/proc/self') && orNull(() => process.kill(pid, 0)) === true;
  const serve = argv.some((arg, at) => arg === 'control' && argv[at + 1] === 'serve');
  const owner = statSync(`/proc/${pid}`, { throwIfNoEntry: false })?.uid;
  return serve && owner === process.getuid?.();
}

export function discoverControlUrl(env: NodeJS.ProcessEnv): FoundControl {
  const found = findControlUrl(env);
  if (found) return found;
  throw new BadSettingError('SVC_CONTROL_PORT=0 (any free port) names no port a client can reach: set ' +
    'SVC_CONTROL_URL to the Control Plane\'s address');
}

/** Whether the Control Plane at `url` is this machine's: only it may learn a run's folder or get the home token. */
export function isSameMachine(url: string): boolean {
  return isLoopbackHost(URL.parse(url)?.hostname ?? '');
}

/**
 * Whether ~/.svc/control/token, this machine's own Control Plane's, may go to `found` now: a loopback address the
 * person named (SVC_CONTROL_URL, SVC_CONTROL_PORT, --url), or the one a live server.json records while it still
 * records it (asked again, a restarted Control Plane whose port was taken in the gap gets none). Never the default
 * port's fallback, taken when no Control Plane is known to run: on a shared host anyone may listen there while the
 * user's is down. Every reader of the home file asks this, and only this.
 */
export function homeTokenGoes(env: NodeJS.ProcessEnv, found: ControlFound): boolean {
  if (!isSameMachine(found.url)) return false;
  if (found.via === 'server.json') return liveRecordUrl(env) === found.url;
  return found.via !== 'default';
}

let withheldSaid = false;

/** Said once a process (stderr: the terminal, or the worker's log) when the home token is not sent to `url`. */
export function sayWithheld(url: string): void {
  if (withheldSaid) return;
  withheldSaid = true;
  process.stderr.write(`svc: ~/.svc/control/token is not sent to ${url}: no Control Plane is known to run there (no ` +
    'live ~/.svc/control/server.json), and while yours is down another user may listen on its port; if yours ' +
    `listens there, set SVC_CONTROL_URL=${url}\n`);
}

/**
 * The token svc sends to `found`: SVC_CONTROL_TOKEN_FILE, then ~/.svc/control/token (where homeTokenGoes says),
 * SVC_CONTROL_TOKEN; `home` when it is the home file's, which a long-lived sender asks homeTokenGoes about again.
 */
export function controlToken(env: NodeJS.ProcessEnv, found: ControlFound): { token?: string; home: boolean } {
  const home = isSameMachine(found.url) ? join(svcHomeOf(env), 'control', 'token') : undefined;
  let withheld = false;
  for (const file of [env.SVC_CONTROL_TOKEN_FILE, home]) {
    try {
      const token = file ? readFileSync(file, 'utf8').trim() : '';
      if (!token) continue;
      // A file SVC_CONTROL_TOKEN_FILE names goes where it is named, even when it is the home file.
      if (file === env.SVC_CONTROL_TOKEN_FILE) return { token, home: false };
      if (homeTokenGoes(env, found)) return { token, home: true };
      withheld = true;
    } catch {
      // missing: the next source
    }
  }
  if (withheld && !env.SVC_CONTROL_TOKEN) sayWithheld(found.url);
  return { token: env.SVC_CONTROL_TOKEN || undefined, home: false };
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
