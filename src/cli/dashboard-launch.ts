// Background start of the Control Plane for `svc dashboard`, and opening a URL in the person's browser.
// Children are argv arrays (never a shell); the server is detached so it outlives this command.
import { startChild } from '../spawn/start.ts';
import { secretsIn, withoutSecrets, handoffPipe, sendHandoff } from '../spawn/secrets-handoff.ts';
import { SERVER_NODE_FLAGS } from './server-flags.ts';
import { mkdirSync, openSync, closeSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { svcCliPath } from '../spawn/svc-paths.ts';
import { serverRecordFile, readServerRecordFile } from '../client/server-record.ts';
import { FailedError } from '../errors.ts';
import { recordDashboardServer } from './dashboard-owner.ts';

const START_DEADLINE_MS = 20_000;

/** True when GET <url>/health answers 2xx within the timeout. */
export async function isHealthy(url: string, timeoutMs = 2_000): Promise<boolean> {
  try {
    const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel();
    return res.ok;
  } catch {
    return false;
  }
}

export interface Started {
  url: string;
  pid: number;
  log: string;
}

/**
 * Starts `svc control serve` detached with its output appended to ~/.svc/control/server.log, then waits until it has
 * written server.json with its own pid and answers /health. Fails with the log's tail if the server exits first.
 */
export async function startControlInBackground(env: NodeJS.ProcessEnv): Promise<Started> {
  const record = serverRecordFile(env);
  const dir = join(record, '..');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const log = join(dir, 'server.log');
  const fd = openSync(log, 'a', 0o600);
  // Its secrets (the control token, what runs use) travel in a pipe on its fd 3, never in its environment; with the
  // server's V8 flags already given it has no reason to re-execute itself, which would need a handoff file.
  const pipe = handoffPipe(['ignore', fd, fd]);
  const child = startChild([process.execPath, ...SERVER_NODE_FLAGS, svcCliPath(), 'control', 'serve'], {
    kind: 'svc-worker', base: withoutSecrets(env), extra: pipe.extra, detached: true, stdio: pipe.stdio,
  });
  sendHandoff(child, secretsIn(env));
  closeSync(fd);
  const pid = child.pid;
  let exited: number | null = null;
  child.once('exit', (code) => {
    exited = code ?? 1;
  });
  child.once('error', () => {
    exited = 1;
  });
  child.unref();
  if (pid === undefined) throw new FailedError(`Could not start the Control Plane (see ${log})`);

  const deadline = Date.now() + START_DEADLINE_MS;
  while (Date.now() < deadline) {
    if (exited !== null) {
      throw new FailedError(`The Control Plane exited with code ${exited} while starting:\n${tail(log)}`);
    }
    const found = readServerRecordFile(record);
    if (found && found.pid === pid && (await isHealthy(found.url, 1_000))) {
      // What `svc dashboard stop` may stop: this process, and only while it is still this process.
      recordDashboardServer(env, pid, found.url);
      return { url: found.url.replace(/\/+$/, ''), pid, log };
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new FailedError(
    `The Control Plane did not become ready within ${START_DEADLINE_MS / 1000}s (pid ${pid}, log ${log})`,
  );
}

function tail(path: string): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-8).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * The program that opens a URL, run with the URL as its one argument (no shell): $BROWSER (its first colon-separated
 * entry), else the platform opener.
 */
function browserOf(env: NodeJS.ProcessEnv): string {
  const openers: Partial<Record<NodeJS.Platform, string>> = { darwin: 'open', win32: 'explorer.exe' };
  return env.BROWSER?.split(':').map((s) => s.trim()).find(Boolean) ?? openers[process.platform] ?? 'xdg-open';
}

/** How handing the URL over went: the opener exited 0 or is still running (a browser in the foreground), or failed. */
export type OpenResult = { opened: true; cmd: string } | { opened: false; cmd: string; reason: string };

/**
 * How long to wait for the opener to exit. xdg-open fails within milliseconds when it finds no browser (exit 3) or
 * the browser refuses (exit 4), but some browsers it hands the URL to stay in the foreground until closed: an opener
 * still running after this is taken to have opened the page, and left to run.
 */
const OPENER_GRACE_MS = 3_000;

/** Opens the URL; resolves opened: false when the opener could not be started or exited non-zero. */
export function openBrowser(url: string, env: NodeJS.ProcessEnv): Promise<OpenResult> {
  const cmd = browserOf(env);
  return new Promise((resolve) => {
    const child = startChild([cmd, url], { kind: 'tool', base: env, detached: true, stdio: 'ignore' });
    const timer = setTimeout(() => {
      child.removeAllListeners('exit');
      child.unref();
      resolve({ opened: true, cmd });
    }, OPENER_GRACE_MS);
    child.once('error', (err) => {
      clearTimeout(timer);
      const why = (err as NodeJS.ErrnoException).code ?? err.message;
      resolve({ opened: false, cmd, reason: `${cmd} could not be started (${why})` });
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
      if (code === 0) resolve({ opened: true, cmd });
      else resolve({ opened: false, cmd, reason: `${cmd} ${how}` });
    });
  });
}
