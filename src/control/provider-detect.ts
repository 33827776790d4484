// Finds agent CLIs on PATH by looking at the filesystem (no shell), and asks each for --version once per binary.
import { statSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { which } from '../engine/which.ts';
import { runCollect } from '../spawn/start.ts';

/**
 * The engine's PATH lookup, with one rule of the Control Plane's own: a name with a slash must be absolute, because
 * the Control Plane has no project directory a relative `./agent` could mean (cwd is not a policy).
 */
export function findOnPath(name: string, pathEnv: string | undefined): string | null {
  if ((name.includes('/') || name.includes('\\')) && !isAbsolute(name)) return null;
  return which(name, pathEnv);
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
  const base: NodeJS.ProcessEnv = { PATH: env.PATH ?? '', HOME: env.HOME ?? '' };
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
      const spec = { kind: 'probe', base, extra: { LANG: 'C', NO_COLOR: '1' }, timeout: timeoutMs } as const;
      pending = runCollect([path, '--version'], spec).then((r) => {
        const out = r.stdout.trim() || r.stderr.trim();
        return r.error && !out ? null : versionFrom(out);
      });
      cache.set(key, pending);
    }
    return pending;
  };
}
