// Takes the secrets a child svc was handed (a pipe on fd 3, sent by start.ts startChild) and hands them across this
// process's own re-exec (a 0600 file in ~/.svc/handoff), never through the environment, which /proc/<pid>/environ
// shows to the same user (DESIGN §7a; docs/engine.md "Secrets of the worker"). Must not: write a value anywhere but
// that pipe or file, or accept a name that is not one of svc's secrets.
import {
  mkdirSync, writeFileSync, closeSync, readFileSync, rmSync, chmodSync, readdirSync, statSync, fstatSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { svcHomeOf } from './svc-paths.ts';
import { orNull, readOrNull } from './tree.ts';
import { HANDOFF_FD, HANDOFF_FD_VAR, HANDOFF_VAR, secretsIn } from './start.ts';
import { obj, objOrNull, tryParseJson } from '../untrusted.ts';
import { RefusedError } from '../errors.ts';

export type Secrets = Record<string, string>;

/** A receiver takes its file within a second of starting; one still there after this never will (it crashed). */
const STALE_MS = 10 * 60_000;

/** ~/.svc/handoff (0700), which no sandbox shows; stale files are removed on the way. */
function handoffDir(env: NodeJS.ProcessEnv): string {
  const dir = join(svcHomeOf(env), 'handoff');
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
 * For a re-exec only: writes `secrets` to a fresh 0600 file and returns the extra environment that names it, or `{}`
 * when there is nothing to hand over. The caller removes the file (`dropHandoff`) if the new image never started.
 */
export function writeHandoff(secrets: Secrets, env: NodeJS.ProcessEnv): Record<string, string> {
  const handed = secretsIn(secrets);
  if (Object.keys(handed).length === 0) return {};
  const path = join(handoffDir(env), `${process.pid}-${randomBytes(12).toString('hex')}.json`);
  writeFileSync(path, JSON.stringify({ secrets: handed }), { flag: 'wx', mode: 0o600 });
  return { [HANDOFF_VAR]: path };
}

/** Removes a handoff file nobody took (the child failed to start). */
export function dropHandoff(extra: Record<string, string>): void {
  const path = extra[HANDOFF_VAR];
  if (path) rmSync(path, { force: true });
}

/** Reads the inherited handoff pipe to its end and closes it; null unless fd 3 is the socket svc gave this process. */
function readPipe(): string | null {
  // Otherwise fd 3 may be one of Node's own, which must stay open.
  if (!orNull(() => fstatSync(HANDOFF_FD))?.isSocket()) return null;
  try {
    return orNull(() => readFileSync(HANDOFF_FD, 'utf8'));
  } finally {
    closeSync(HANDOFF_FD);
  }
}

/** The secrets in one handoff message; nothing from bad JSON. */
function parse(text: string | null): Secrets {
  return secretsIn(obj(obj(tryParseJson(text ?? '')).secrets));
}

/**
 * Takes what this process was handed (once, at start): the pipe `SVC_HANDOFF_FD` names and the file
 * `SVC_SECRETS_HANDOFF` names (deleted once read), and removes both names from `env`.
 */
export function takeHandoff(env: NodeJS.ProcessEnv): Secrets {
  const fd = env[HANDOFF_FD_VAR];
  const path = env[HANDOFF_VAR];
  delete env[HANDOFF_FD_VAR];
  delete env[HANDOFF_VAR];
  const file = path ? readOrNull(path) : null;
  if (path) rmSync(path, { force: true });
  const piped = fd === String(HANDOFF_FD) ? readPipe() : null;
  // A launch may be started before its job is confirmed (trigger/managed-checkout.ts): a pipe that was named but
  // held no message (its parent withdrew the launch or died first, or it could not be read) is no go-ahead.
  if (fd !== undefined && objOrNull(obj(tryParseJson(piped ?? '')).secrets) === null) {
    throw new RefusedError('the process that started this one sent it no go-ahead: not starting');
  }
  return { ...parse(file), ...parse(piped) };
}
