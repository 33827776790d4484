// Which version of an agent CLI is installed: read from the npm package the executable belongs to when it is one
// (free, and npm-installed CLIs can take seconds to answer --version on a busy host), else from `<path> --version`.
import { readFileSync, realpathSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { runCollect } from '../spawn/start.ts';
import { TESTED_CLIS, untestedWarning } from './tested-clis.ts';
import type { ResolvedProvider } from './providers.ts';

/** The first version-looking token of the output (`1.2.3`, `v0.9.1-beta`), else its first line, capped. */
export function versionFrom(output: string): string | null {
  const match = /\bv?(\d+\.\d+(?:\.\d+)?(?:[-+][0-9A-Za-z.-]+)?)\b/.exec(output);
  if (match) return match[1]!;
  const line = output.split('\n').find((l) => l.trim())?.trim();
  return line ? line.slice(0, 80) : null;
}

/** The version in the package.json of the npm package `pkg` that holds the real file behind `path`, if any. */
export function packageVersion(path: string, pkg: string): string | null {
  let dir: string;
  try {
    dir = dirname(realpathSync(path));
  } catch {
    return null;
  }
  for (let i = 0; i < 6; i++) {
    try {
      const meta = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
      if (meta.name === pkg && typeof meta.version === 'string') return meta.version;
    } catch {
      // No package.json here (or not JSON): keep climbing.
    }
    const up = dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return null;
}

export type VersionProbe = (path: string, provider?: string) => Promise<string | null>;

/**
 * A built-in's version from its npm package, else `<path> --version` with a timeout and a minimal environment (no
 * tokens reach it); cached by path, size and mtime so an upgrade is noticed without re-running every binary.
 */
export function createVersionProbe(env: NodeJS.ProcessEnv, timeoutMs = 20_000): VersionProbe {
  const cache = new Map<string, Promise<string | null>>();
  const base: NodeJS.ProcessEnv = { PATH: env.PATH ?? '', HOME: env.HOME ?? '' };
  return function probe(path, provider) {
    let key: string;
    try {
      const st = statSync(path);
      key = `${path}|${st.size}|${st.mtimeMs}|${provider ?? ''}`;
    } catch {
      return Promise.resolve(null);
    }
    let pending = cache.get(key);
    if (!pending) {
      const pkg = provider ? TESTED_CLIS[provider]?.package : undefined;
      const fromPackage = pkg ? packageVersion(path, pkg) : null;
      const spec = { kind: 'probe', base, extra: { LANG: 'C', NO_COLOR: '1' }, timeout: timeoutMs } as const;
      const asked = () => runCollect([path, '--version'], spec).then((r) => {
        const out = r.stdout.trim() || r.stderr.trim();
        return r.error && !out ? null : versionFrom(out);
      });
      pending = fromPackage !== null ? Promise.resolve(fromPackage) : asked();
      cache.set(key, pending);
    }
    return pending;
  };
}

/**
 * Warns when a run's built-in provider CLI is a version outside the range the conformance suite tested: its flags or
 * output format may have changed, the first thing to suspect when such a run misbehaves. Null for a tested version,
 * an unknown one, a command provider and aider.
 */
export async function untestedProviderWarning(
  provider: ResolvedProvider, env: NodeJS.ProcessEnv,
): Promise<string | null> {
  if (provider.kind !== provider.name || !TESTED_CLIS[provider.name]) return null;
  const version = await createVersionProbe(env)(provider.argv[0]!, provider.name);
  return untestedWarning(provider.name, version);
}
