// Which projects the Control Plane may start a process in: imported or named by the `repos` setting, never a path
// only a caller named. Compared by real path.
import { realOrNull } from '../spawn/tree.ts';
import type { ControlDeps } from './deps.ts';
import { readEffectiveConfig } from './config-schema.ts';
import { iso } from '../iso-time.ts';

export function isRegisteredProject(deps: ControlDeps, path: string): boolean {
  const real = realOrNull(path);
  if (real === null) return false;
  if (deps.stores.projects.has(real)) return true;
  const repos = readEffectiveConfig(deps.stores.config).config.repos as string[];
  return repos.some((p) => realOrNull(p) === real);
}

export function listProjects(deps: ControlDeps) {
  const out: Array<{ path: string; via: 'import' | 'repos'; registered_at: string | null }> = deps.stores.projects
    .list().map((p) => ({ path: p.path, via: 'import', registered_at: iso(p.registered_at) }));
  const seen = new Set(out.map((p) => p.path));
  for (const path of readEffectiveConfig(deps.stores.config).config.repos as string[]) {
    if (seen.has(realOrNull(path) ?? path)) continue;
    seen.add(realOrNull(path) ?? path);
    out.push({ path, via: 'repos', registered_at: null });
  }
  return out;
}

export function unregisteredMessage(path: string): string {
  return `Project ${JSON.stringify(path)} is not registered with this Control Plane: ` +
    'import it first (POST /v1/import {"path": …}, or add it to the "repos" setting)';
}
