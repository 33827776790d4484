// Which repository config files a person trusted (`svc trust`), as direnv does: the file's real path and the sha256 of
// its exact bytes, kept in ~/.svc/trust.json (never visible inside a sandbox). A changed file is not trusted until
// trusted again. Only CLI runs consult it; a run a server started never widens on a repository's word.
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { isJsonObject } from '../untrusted.ts';
import { BadSettingError } from '../errors.ts';
import { writeJsonAtomic } from './safe-fs.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';

export interface TrustRecord {
  /** The config file's real path. */
  path: string;
  sha256: string;
  trusted_at: string;
}

export function trustFile(env: NodeJS.ProcessEnv): string {
  return join(svcHomeOf(env), 'trust.json');
}

/** The real path a record is keyed by: links resolved, so two names of one file share one record. */
export function trustKey(path: string): string {
  for (const real of [() => realpathSync(path), () => join(realpathSync(dirname(path)), basename(path))]) {
    try {
      return real();
    } catch {
      // gone: a record of a removed file is still found by the path it was trusted under
    }
  }
  return path;
}

export function readTrust(env: NodeJS.ProcessEnv): TrustRecord[] {
  const path = trustFile(env);
  if (!existsSync(path)) return [];
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    throw new BadSettingError(`${path} is not valid JSON; remove it and trust your repositories again`);
  }
  const files = isJsonObject(raw) ? raw.files : undefined;
  if (!Array.isArray(files)) throw new BadSettingError(`${path} must hold {"version":1,"files":[…]}`);
  return files.filter((f): f is TrustRecord => isJsonObject(f) && typeof f.path === 'string' &&
    typeof f.sha256 === 'string' && typeof f.trusted_at === 'string');
}

function writeTrust(env: NodeJS.ProcessEnv, files: TrustRecord[]): void {
  writeJsonAtomic(trustFile(env), { version: 1, files }, 0o600);
}

/** Whether `path` with these exact bytes (their sha256) was trusted. */
export function isTrusted(env: NodeJS.ProcessEnv, path: string, sha256: string): boolean {
  const key = trustKey(path);
  return readTrust(env).some((r) => r.path === key && r.sha256 === sha256);
}

/** The record for `path` whatever its hash (to say "changed since you trusted it"). */
export function trustRecordOf(env: NodeJS.ProcessEnv, path: string): TrustRecord | null {
  const key = trustKey(path);
  return readTrust(env).find((r) => r.path === key) ?? null;
}

export function addTrust(env: NodeJS.ProcessEnv, path: string, sha256: string, now = new Date()): TrustRecord {
  const record = { path: trustKey(path), sha256, trusted_at: now.toISOString() };
  writeTrust(env, [...readTrust(env).filter((r) => r.path !== record.path), record]);
  return record;
}

/** Removes the record for `path`; false when there was none. */
export function revokeTrust(env: NodeJS.ProcessEnv, path: string): boolean {
  const key = trustKey(path);
  const files = readTrust(env);
  const kept = files.filter((r) => r.path !== key);
  if (kept.length === files.length) return false;
  writeTrust(env, kept);
  return true;
}
