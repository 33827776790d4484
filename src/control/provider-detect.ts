// Finds agent CLIs on PATH (no shell) and says whether each built-in's version lies in the tested range; for
// GET /v1/providers and `svc providers`.
import { which } from '../spawn/svc-paths.ts';
import { BUILTIN_PROVIDERS } from '../engine/providers.ts';
import { isRelativeProgram } from '../engine/config.ts';
import { versionStanding, type VersionProbe } from '../engine/cli-version.ts';

/** A name with a slash must be absolute: the Control Plane has no project directory `./agent` could mean. */
export function findOnPath(name: string, pathEnv: string | undefined): string | null {
  if (isRelativeProgram(name)) return null;
  return which(name, pathEnv);
}

export function describeProviders(
  commands: Record<string, { command: string[] }>, pathEnv: string | undefined, probe: VersionProbe,
) {
  // A command provider of a built-in's name (the operator's may be one) is what a run of that name runs.
  const entries = [
    ...BUILTIN_PROVIDERS.filter((name) => !Object.hasOwn(commands, name))
      .map((name) => ({ name, kind: 'builtin' as const, binary: name })),
    ...Object.entries(commands).map(([name, p]) => ({ name, kind: 'command' as const, binary: p.command[0]! })),
  ];
  return Promise.all(entries.map(async (e) => {
    const path = findOnPath(e.binary, pathEnv);
    // Command providers are arbitrary programs: they may not know --version, so only built-ins are asked.
    const version = path && e.kind === 'builtin' ? await probe(path, e.name) : null;
    const standing = versionStanding(e.kind === 'builtin' ? e.name : '', version);
    return { name: e.name, kind: e.kind, available: path !== null, path, version, ...standing };
  }));
}

export type ProviderReport = Awaited<ReturnType<typeof describeProviders>>[number];
