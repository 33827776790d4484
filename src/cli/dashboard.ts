// `svc dashboard`: finds a running Control Plane or starts one in the background, then opens the UI (never with the
// token in the URL). `stop` stops only the one it started: dashboard.json holds its pid and /proc start time. Also
// what the servers say when their port is taken.
import { mkdirSync, openSync, closeSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { sendPendingRuns } from './ship.ts';
import { parseFlags, type CliIo } from './io.ts';
import { UsageError, UnavailableError, ConflictError, FailedError } from '../errors.ts';
import { secretsIn, startChild, withoutSecrets } from '../spawn/start.ts';
import { SERVER_NODE_FLAGS } from './node-setup.ts';
import { svcCliPath } from '../spawn/svc-paths.ts';
import { answersHealth, serverRecordFile, readServerRecordFile } from '../client/server-record.ts';
import { findControlUrl, isLiveRecord, isOwnControlServe } from '../engine/control-url.ts';
import { procStart } from '../proc-stat.ts';
import { readOrNull } from '../spawn/tree.ts';
import { urlAuthority } from '../http/http-server.ts';
import { writeJsonAtomic } from '../engine/safe-fs.ts';
import { isJsonObject } from '../json-value.ts';
import { obj, objOrNull, tryParseJson } from '../untrusted.ts';
export const HELP = `Usage:
  svc dashboard [start|open] [--no-open]
  svc dashboard stop

Opens the Control Plane UI. A running Control Plane is reused (SVC_CONTROL_URL, then ~/.svc/control/server.json,
then http://127.0.0.1:$SVC_CONTROL_PORT or 47821); otherwise one is started in the background with
"svc control serve" (log: ~/.svc/control/server.log). Another program answering there (a "svc trigger serve" on
the Control Plane's port) is refused (exit 1), and nothing is sent to it. "start" and "open" do the same. The
project's pending runs are sent to it; ~/.svc/control/token goes with them only where every svc command sends it,
never to the default port when no live server.json records a Control Plane there (stderr says so). The page is
opened without a token: the UI asks for it.

  --no-open   print the URL instead of opening a browser

"stop" stops the Control Plane that "svc dashboard" started in the background (SIGTERM; it finishes its requests and
closes its database), and only that one: a Control Plane started another way (svc control serve in a terminal,
systemd) is left running (exit 1, saying so). Exit 0 when it stopped or none is running.

The browser is $BROWSER when set (run with the URL as its only argument), else xdg-open / open.
`;

export default async function dashboard(io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(io.argv, { 'no-open': { type: 'boolean' } }, 1);
  const sub = positionals[0];
  if (sub !== undefined && sub !== 'start' && sub !== 'open' && sub !== 'stop') {
    throw new UsageError(`Unknown subcommand "dashboard ${sub}" (expected start, open or stop)`);
  }
  if (sub === 'stop') return stop(io);

  // null: SVC_CONTROL_PORT=0, no default server to probe, so one is started on a free port.
  const found = findControlUrl(io.env);
  const answering = found ? await whoAnswers(found.url) : 'nothing';
  let url: string;
  if (found && answering === 'control') {
    url = found.url;
    io.stderr(`Using the Control Plane at ${url} (found via ${found.via})\n`);
  } else if (found && answering === 'other') {
    // Its pending runs must not ship there, nor a second server start on its port.
    const next = found.via === 'SVC_CONTROL_URL' ? 'point SVC_CONTROL_URL at the Control Plane'
      : 'or start the Control Plane on a free port: SVC_CONTROL_PORT=0 svc dashboard';
    throw new UnavailableError(`${found.url} (found via ${found.via}) is not a Control Plane: another program ` +
      `answers there (a svc trigger serve?). Stop it, ${next}`);
  } else if (found?.via === 'SVC_CONTROL_URL') {
    throw new UnavailableError(
      `Nothing answers at SVC_CONTROL_URL (${found.url}); start that server or unset SVC_CONTROL_URL to run one here`,
    );
  } else {
    io.stderr('No Control Plane is running; starting one in the background…\n');
    const started = await startControlInBackground(io.env);
    url = started.url;
    io.stderr(`Started the Control Plane at ${url} (pid ${started.pid}, log ${started.log})\n`);
  }
  if (io.env.SVC_CONTROL_TOKEN) io.stderr('This Control Plane has a token: the UI asks for it once per browser tab.\n');
  // Discovery finds `url` again, so ~/.svc/control/token goes only where homeTokenGoes says (control-url.ts): not to
  // one the default port answers that no live server.json records, which may be another user's. The page is opened
  // without any token either way (the UI asks for it).
  await sendPendingRuns(io, process.cwd());

  if (values['no-open']) {
    io.stdout(`${url}\n`);
    return 0;
  }
  // Exit 0 either way: the server runs. stdout holds the URL only when the person (or a script) must open it.
  const cmd = browserOf(io.env);
  const failure = await openBrowser(cmd, `${url}/`, io.env);
  if (failure === null) {
    io.stderr(`Opened ${url}/ in the browser (${cmd})\n`);
  } else {
    io.stderr(`Could not open a browser: ${failure}. Set BROWSER to choose one, or open this URL yourself:\n`);
    io.stdout(`${url}\n`);
  }
  return 0;
}

/**
 * How long what holds a port has to answer: a port nobody listens on here refuses at once, so only a hung holder
 * (or a remote SVC_CONTROL_URL whose firewall drops packets) costs the wait; a loaded machine took over 1 s (this
 * process's first fetch loads its HTTP client inside it) and a server was then told as "another program".
 */
const WHO_ANSWERS_MS = 5_000;

/**
 * What answers at `url`: a Control Plane (its OpenAPI document, or 401 `unauthorized` when it has a token, which is
 * never sent to a server not yet known as one), another program (`svc trigger serve` answers /health as well), or
 * nothing at all.
 */
async function whoAnswers(url: string): Promise<'control' | 'other' | 'nothing'> {
  let status: number;
  let body: Record<string, unknown> | null;
  try {
    const res = await fetch(`${url}/v1/openapi.json`, { signal: AbortSignal.timeout(WHO_ANSWERS_MS) });
    status = res.status;
    body = objOrNull(tryParseJson(await res.text()));
  } catch {
    return 'nothing';
  }
  const controlPlane = status === 401 ? obj(body?.error).code === 'unauthorized'
    : status === 200 && isJsonObject(obj(body?.paths)['/v1/runs']);
  return controlPlane ? 'control' : 'other';
}

/**
 * Runs `svc control serve`, `svc trigger serve` or `svc gate serve`; a taken port (EADDRINUSE) fails naming its holder
 * as far as it is known (the recorded Control Plane, another one, a server that is not one, a program) and what to do
 * next.
 */
export async function serveOnFreePort(
  server: 'control' | 'trigger' | 'gate', { host, port }: { host: string; port: number }, env: NodeJS.ProcessEnv,
  serve: () => Promise<number>,
): Promise<number> {
  try {
    return await serve();
  } catch (err) {
    if ((err as NodeJS.ErrnoException | null)?.code !== 'EADDRINUSE') throw err;
  }
  const url = `http://${urlAuthority(host, port)}`;
  const taken = `Port ${port} on ${host} is already in use`;
  const wayOut = `or run this one on a free port: svc ${server} serve --port 0`;
  const record = server === 'control' ? readServerRecordFile(serverRecordFile(env)) : null;
  const recorded = record && isLiveRecord(record) ? URL.parse(record.url) : null;
  if (record && recorded && Number(recorded.port || (recorded.protocol === 'https:' ? 443 : 80)) === port) {
    throw new UnavailableError(`${taken}: a Control Plane already runs there (pid ${record.pid}, ${record.url}). ` +
      `Use it (svc control status, svc dashboard), stop it (kill ${record.pid}), ${wayOut}`);
  }
  // What answers is told as svc dashboard tells it; a server that is not a Control Plane is not guessed at further.
  const answering = await whoAnswers(url);
  if (answering === 'control') {
    const use = server === 'control' ? `Use it (SVC_CONTROL_URL=${url}), stop it` : 'Stop it';
    throw new UnavailableError(`${taken}: a Control Plane answers ${url}. ${use}, ${wayOut}`);
  }
  if (answering === 'other') {
    throw new UnavailableError(`${taken}: a server that is not a Control Plane answers ${url}. Stop it, ${wayOut}`);
  }
  throw new UnavailableError(`${taken} by another program. Stop it, ${wayOut}`);
}

const START_DEADLINE_MS = 20_000;

/** Starts `svc control serve` detached, logging to server.log, and waits until its server.json answers /health. */
async function startControlInBackground(env: NodeJS.ProcessEnv): Promise<{ url: string; pid: number; log: string }> {
  const record = serverRecordFile(env);
  const dir = join(record, '..');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const log = join(dir, 'server.log');
  const fd = openSync(log, 'a', 0o600);
  // Its secrets travel in a pipe on its fd 3, never in its environment; given the V8 flags, it need not re-execute.
  const child = startChild([process.execPath, ...SERVER_NODE_FLAGS, svcCliPath(), 'control', 'serve'], {
    kind: 'svc-worker', base: withoutSecrets(env), detached: true, stdio: ['ignore', fd, fd], secrets: secretsIn(env),
  });
  closeSync(fd);
  const pid = child.pid;
  let exited: number | null = null;
  child.once('exit', (code) => {
    exited = code ?? 1;
  });
  // Only a spawn that failed emits 'error' here (no kill, IPC or abort signal): its pid is undefined, refused below.
  child.once('error', () => {});
  child.unref();
  if (pid === undefined) throw new FailedError(`Could not start the Control Plane (see ${log})`);

  const deadline = Date.now() + START_DEADLINE_MS;
  while (Date.now() < deadline) {
    if (exited !== null) {
      const last = readOrNull(log)?.trimEnd().split('\n').slice(-8).join('\n') ?? '(no log)';
      throw new FailedError(`The Control Plane exited with code ${exited} while starting:\n${last}`);
    }
    const found = readServerRecordFile(record);
    if (found && found.pid === pid && (await answersHealth(found.url, 1_000))) {
      // What `svc dashboard stop` may stop, while it is still this process (no /proc start time: nothing to prove).
      const start = procStart(pid);
      if (start !== null) writeJsonAtomic(dashboardRecordFile(env), { pid, proc_start: start, url: found.url }, 0o600);
      return { url: found.url.replace(/\/+$/, ''), pid, log };
    }
    await delay(100);
  }
  throw new FailedError(
    `The Control Plane did not become ready within ${START_DEADLINE_MS / 1000}s (pid ${pid}, log ${log})`,
  );
}

/** The program that opens a URL: $BROWSER (its first colon-separated entry), else the platform opener. */
function browserOf(env: NodeJS.ProcessEnv): string {
  const openers: Partial<Record<NodeJS.Platform, string>> = { darwin: 'open', win32: 'explorer.exe' };
  return env.BROWSER?.split(':').map((s) => s.trim()).find(Boolean) ?? openers[process.platform] ?? 'xdg-open';
}

/** xdg-open fails within milliseconds (exit 3 or 4); an opener still running after this has opened the page. */
const OPENER_GRACE_MS = 3_000;

/** Runs `cmd URL` (no shell); resolves null when it opened the page, else why not. */
function openBrowser(cmd: string, url: string, env: NodeJS.ProcessEnv): Promise<string | null> {
  return new Promise((resolve) => {
    const child = startChild([cmd, url], { kind: 'tool', base: env, detached: true, stdio: 'ignore' });
    const timer = setTimeout(() => {
      child.removeAllListeners('exit');
      child.unref();
      resolve(null);
    }, OPENER_GRACE_MS);
    child.once('error', (err) => {
      clearTimeout(timer);
      resolve(`${cmd} could not be started (${(err as NodeJS.ErrnoException).code ?? err.message})`);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve(code === 0 ? null : `${cmd} ${signal ? `was killed by ${signal}` : `exited with code ${code}`}`);
    });
  });
}

const dashboardRecordFile = (env: NodeJS.ProcessEnv) => join(serverRecordFile(env), '..', 'dashboard.json');

/** The recorded process is still the one started: same pid, same start time, and this user's `svc control serve`. */
function isTheStartedServer(record: { pid: number; proc_start?: unknown }): boolean {
  if (record.pid <= 1 || typeof record.proc_start !== 'string' || procStart(record.pid) !== record.proc_start) {
    return false;
  }
  return isOwnControlServe(record.pid);
}

const STOP_DEADLINE_MS = 30_000;

/** SIGTERM to the server `svc dashboard` started, then waits for it to exit; one started otherwise is left alone. */
async function stop(io: CliIo): Promise<number> {
  const path = dashboardRecordFile(io.env);
  const record = readServerRecordFile(path);
  if (!record || !isTheStartedServer(record)) {
    rmSync(path, { force: true });
    const other = readServerRecordFile(serverRecordFile(io.env));
    if (other && isLiveRecord(other)) {
      throw new ConflictError(`The Control Plane at ${other.url} (pid ${other.pid}) was not started by ` +
        'svc dashboard: stop it where it was started (Ctrl-C in its terminal, systemctl stop svc-control)');
    }
    io.stderr('No Control Plane started by svc dashboard is running\n');
    return 0;
  }
  process.kill(record.pid, 'SIGTERM');
  const deadline = Date.now() + STOP_DEADLINE_MS;
  while (procStart(record.pid) === record.proc_start) {
    if (Date.now() > deadline) {
      throw new FailedError(`The Control Plane (pid ${record.pid}) is still shutting down after ` +
        `${STOP_DEADLINE_MS / 1000}s; see ~/.svc/control/server.log`);
    }
    await delay(100);
  }
  rmSync(path, { force: true });
  io.stderr(`Stopped the Control Plane at ${record.url} (pid ${record.pid})\n`);
  return 0;
}
