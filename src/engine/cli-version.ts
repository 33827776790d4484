// Which version of an agent CLI is installed, and the range `npm run test:providers` proved for it (docs/engine.md).
import { statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { runCollect } from '../spawn/start.ts';
import { orNull, readOrNull, realOrNull } from '../spawn/tree.ts';
import { obj, tryParseJson } from '../untrusted.ts';

/** The npm package the suite installs and the version it drove (equal to test/providers/versions.json); aider is on
 * PyPI only, out of these machines' reach, so it has no entry. */
export const TESTED_CLIS: Readonly<Record<string, { package: string; version: string }>> = {
  claude: { package: '@anthropic-ai/claude-code', version: '2.1.330' },
  codex: { package: '@openai/codex', version: '0.169.0' },
  gemini: { package: '@google/gemini-cli', version: '0.61.0' },
  opencode: { package: 'opencode-ai', version: '1.18.33' },
};

type Triple = [number, number, number];

function parse(version: string): Triple | null {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version.trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : null;
}

function compare(a: Triple, b: Triple): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}

/** The first version past the range: the next major, or for 0.x the next minor (as npm's caret reads it). */
function ceiling(v: Triple): Triple {
  return v[0] > 0 ? [v[0] + 1, 0, 0] : [0, v[1] + 1, 0];
}

/** The range the suite proved (`>=2.1.330 <3.0.0`) and whether `version` lies in it; null where either is unknown. */
export function versionStanding(provider: string, version: string | null) {
  const tested = TESTED_CLIS[provider] ?? null;
  const low = tested ? parse(tested.version) : null;
  const found = version === null ? null : parse(version);
  const within = low && found ? compare(found, low) >= 0 && compare(found, ceiling(low)) < 0 : null;
  const range = low ? `>=${low.join('.')} <${ceiling(low).join('.')}` : null;
  return { tested_version: tested?.version ?? null, tested_range: range, within_tested_range: within };
}

/** The warning a run logs when its provider's version lies outside the tested range; null when it does not. */
export function untestedWarning(provider: string, version: string | null): string | null {
  const standing = versionStanding(provider, version);
  if (standing.within_tested_range !== false) return null;
  return `warning: ${provider} ${version} is outside the range the provider conformance suite tested ` +
    `(${standing.tested_range}, driven at ${standing.tested_version}); its flags or output may have changed`;
}

/** The first version-looking token of the output (`1.2.3`, `v0.9.1-beta`), else its first line, capped. */
function versionFrom(output: string): string | null {
  const match = /\bv?(\d+\.\d+(?:\.\d+)?(?:[-+][0-9A-Za-z.-]+)?)\b/.exec(output);
  if (match) return match[1]!;
  const line = output.split('\n').find((l) => l.trim())?.trim();
  return line ? line.slice(0, 80) : null;
}

/** The version in the package.json of the npm package `pkg` that holds the real file behind `path`, if any. */
export function packageVersion(path: string, pkg: string): string | null {
  const real = realOrNull(path);
  if (real === null) return null;
  let dir = dirname(real);
  for (let i = 0; i < 6; i++) {
    // No package.json here (or not JSON): keep climbing.
    const meta = obj(tryParseJson(readOrNull(join(dir, 'package.json')) ?? ''));
    if (meta.name === pkg && typeof meta.version === 'string') return meta.version;
    const up = dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return null;
}

export type VersionProbe = (path: string, provider?: string) => Promise<string | null>;

/** A built-in's version from its npm package, else `<path> --version` (timed, no tokens in its environment); cached
 * by path, size and mtime so an upgrade is noticed. */
export function createVersionProbe(env: NodeJS.ProcessEnv): VersionProbe {
  const cache = new Map<string, Promise<string | null>>();
  const base: NodeJS.ProcessEnv = { PATH: env.PATH ?? '', HOME: env.HOME ?? '' };
  return function probe(path, provider) {
    const st = orNull(() => statSync(path));
    if (st === null) return Promise.resolve(null);
    const key = `${path}|${st.size}|${st.mtimeMs}|${provider ?? ''}`;
    if (!cache.has(key)) {
      const pkg = provider ? TESTED_CLIS[provider]?.package : undefined;
      const fromPackage = pkg ? packageVersion(path, pkg) : null;
      const spec = { kind: 'probe', base, extra: { LANG: 'C', NO_COLOR: '1' }, timeout: 20_000 } as const;
      cache.set(key, fromPackage !== null ? Promise.resolve(fromPackage) : runCollect([path, '--version'], spec)
        .then((r) => {
          const out = r.stdout.trim() || r.stderr.trim();
          return r.error && !out ? null : versionFrom(out);
        }));
    }
    return cache.get(key)!;
  };
}
