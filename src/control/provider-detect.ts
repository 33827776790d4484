// Finds agent CLIs on PATH by looking at the filesystem (no shell), reads each built-in's version once per binary,
// and says whether it lies in the range the provider conformance suite tested. Shared by GET /v1/providers and
// `svc providers`.
import { isAbsolute } from 'node:path';
import { which } from '../spawn/which.ts';
import { versionStanding, type VersionProbe, type VersionStanding } from '../engine/cli-version.ts';

export { createVersionProbe, type VersionProbe } from '../engine/cli-version.ts';

/**
 * The engine's PATH lookup, with one rule of the Control Plane's own: a name with a slash must be absolute, because
 * the Control Plane has no project directory a relative `./agent` could mean (cwd is not a policy).
 */
export function findOnPath(name: string, pathEnv: string | undefined): string | null {
  if ((name.includes('/') || name.includes('\\')) && !isAbsolute(name)) return null;
  return which(name, pathEnv);
}

export interface ProviderEntry {
  name: string;
  kind: 'builtin' | 'command';
  /** What runs: the built-in's own name, or a command provider's argv[0]. */
  binary: string;
}

export interface ProviderReport extends VersionStanding {
  name: string;
  kind: 'builtin' | 'command';
  available: boolean;
  path: string | null;
  version: string | null;
}

export function describeProviders(entries: ProviderEntry[], pathEnv: string | undefined, probe: VersionProbe) {
  return Promise.all(entries.map(async (e): Promise<ProviderReport> => {
    const path = findOnPath(e.binary, pathEnv);
    // Command providers are arbitrary programs: they may not know --version, so only built-ins are asked.
    const version = path && e.kind === 'builtin' ? await probe(path, e.name) : null;
    const standing = versionStanding(e.kind === 'builtin' ? e.name : '', version);
    return { name: e.name, kind: e.kind, available: path !== null, path, version, ...standing };
  }));
}
