// Finds agent CLIs on PATH by looking at the filesystem (no shell), and asks each for --version once per binary.
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import { execFile } from 'node:child_process';

/** First executable regular file called `name` in the PATH entries (relative entries are skipped: cwd is not a policy). */
export function findOnPath(name: string, pathEnv: string | undefined): string | null {
  if (name.includes('/') || name.includes('\\')) return isExecutable(name) ? name : null;
  for (const dir of (pathEnv ?? '').split(delimiter)) {
    if (!dir || !isAbsolute(dir)) continue;
    const candidate = join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  return null;
}

function isExecutable(path: string): boolean {
  try {
    if (!isAbsolute(path) || !statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The first version-looking token of the output (`1.2.3`, `v0.9.1-beta`), else its first line, capped. */
function versionFrom(output: string): string | null {
  const match = /\bv?(\d+\.\d+(?:\.\d+)?(?:[-+][0-9A-Za-z.-]+)?)\b/.exec(output);
  if (match) return match[1]!;
  const line = output.split('\n').find((l) => l.trim())?.trim();
  return line ? line.slice(0, 80) : null;
}

export type VersionProbe = (path: string) => Promise<string | null>;

/**
 * `<path> --version` with a short timeout and a minimal environment (no tokens reach it), cached by path, size and
 * mtime so an upgrade is noticed without re-running every binary on every request.
 */
export function createVersionProbe(env: NodeJS.ProcessEnv, timeoutMs = 3000): VersionProbe {
  const cache = new Map<string, Promise<string | null>>();
  const childEnv: NodeJS.ProcessEnv = { PATH: env.PATH ?? '', HOME: env.HOME ?? '', LANG: 'C', NO_COLOR: '1' };
  return function probe(path) {
    let key: string;
    try {
      const st = statSync(path);
      key = `${path}|${st.size}|${st.mtimeMs}`;
    } catch {
      return Promise.resolve(null);
    }
    let pending = cache.get(key);
    if (!pending) {
      pending = new Promise((resolve) => {
        execFile(path, ['--version'], { timeout: timeoutMs, maxBuffer: 64 * 1024, env: childEnv, shell: false, windowsHide: true }, (err, stdout, stderr) => {
          const out = `${stdout}`.trim() || `${stderr}`.trim();
          resolve(err && !out ? null : versionFrom(out));
        });
      });
      cache.set(key, pending);
    }
    return pending;
  };
}
