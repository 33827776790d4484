// Hands svc's secrets to a child svc, or to this same process after it re-executes itself, through a 0600 file the
// receiver reads and deletes before it does anything else: never through the environment, which /proc/<pid>/environ
// shows to every process of the same user for the whole life of the process (DESIGN §7a, issue 9 item 4).
// Must not: write a value anywhere but that file, or accept a name that is not one of svc's secrets.
import {
  mkdirSync, openSync, writeSync, closeSync, readFileSync, rmSync, chmodSync, readdirSync, statSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { homedir } from 'node:os';
import { SVC_SECRET_NAMES } from './env.ts';

/** The one variable that travels instead: the path of the handoff file (a path, not a secret). */
export const HANDOFF_VAR = 'SVC_SECRETS_HANDOFF';

export type Secrets = Record<string, string>;

/** Secret values in `env` (the `*_FILE` names hold paths and stay where they are). */
export function secretsIn(env: NodeJS.ProcessEnv): Secrets {
  const out: Secrets = {};
  for (const name of SVC_SECRET_NAMES) {
    const value = env[name];
    if (!name.endsWith('_FILE') && value) out[name] = value;
  }
  return out;
}

/** `env` without any of svc's secret values and without a stale handoff path. */
export function withoutSecrets(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    const secretValue = SVC_SECRET_NAMES.has(name) && !name.endsWith('_FILE');
    if (value === undefined || name === HANDOFF_VAR || secretValue) continue;
    out[name] = value;
  }
  return out;
}

/** A receiver takes its file within a second of starting; one still there after this never will (it crashed). */
const STALE_MS = 10 * 60_000;

/** ~/.svc/handoff (0700): inside ~/.svc, which the agent sandbox never shows. Stale files are removed on the way. */
function handoffDir(env: NodeJS.ProcessEnv): string {
  const dir = join(env.HOME || homedir(), '.svc', 'handoff');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const now = Date.now();
  for (const name of readdirSync(dir)) {
    try {
      if (now - statSync(join(dir, name)).mtimeMs > STALE_MS) rmSync(join(dir, name), { force: true });
    } catch {
      // Taken by its receiver meanwhile.
    }
  }
  return dir;
}

/**
 * Writes `secrets` to a fresh 0600 file and returns the extra environment that names it, or `{}` when there is
 * nothing to hand over. The caller removes the file (`dropHandoff`) if the receiver never started.
 */
export function writeHandoff(secrets: Secrets, env: NodeJS.ProcessEnv): Record<string, string> {
  const names = Object.keys(secrets).filter((n) => SVC_SECRET_NAMES.has(n) && secrets[n]);
  if (names.length === 0) return {};
  const path = join(handoffDir(env), `${process.pid}-${randomBytes(12).toString('hex')}.json`);
  const fd = openSync(path, 'wx', 0o600);
  try {
    writeSync(fd, JSON.stringify(Object.fromEntries(names.map((n) => [n, secrets[n]]))));
  } finally {
    closeSync(fd);
  }
  return { [HANDOFF_VAR]: path };
}

/** Removes a handoff file nobody took (the child failed to start). */
export function dropHandoff(extra: Record<string, string>): void {
  const path = extra[HANDOFF_VAR];
  if (path) rmSync(path, { force: true });
}

/**
 * Reads and deletes the handoff file `env` names (once, at process start) and removes the name from `env`.
 * Only svc's secret names are taken from it; a missing or malformed file hands over nothing.
 */
export function takeHandoff(env: NodeJS.ProcessEnv): Secrets {
  const path = env[HANDOFF_VAR];
  delete env[HANDOFF_VAR];
  if (!path) return {};
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return {};
  } finally {
    rmSync(path, { force: true });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return {};
  }
  const out: Secrets = {};
  if (typeof value !== 'object' || value === null) return out;
  for (const [name, v] of Object.entries(value)) {
    if (SVC_SECRET_NAMES.has(name) && !name.endsWith('_FILE') && typeof v === 'string' && v) out[name] = v;
  }
  return out;
}
